"""Graph verification through real MLIR: the in-process module or ``lattice-opt``.

Python never parses lattice MLIR.  A graph is verified either by the native
``lattice_mlir`` module (parser + lattice dialect verifier, in process) or by
running a ``lattice-opt`` executable: one passed as ``lattice_opt=``, else the
in-process module when it is installed, else ``$MLX_LATTICE_LATTICE_OPT``,
else a ``lattice-opt`` found next to the Python interpreter or on ``PATH``.
With none of them, validation raises :class:`ArtifactCapabilityError` rather
than guessing.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlx_lattice.artifact.io import LatticeArtifact

__all__ = [
    "LATTICE_OPT_ENV",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeValidationError",
    "lattice_artifact_status",
    "lattice_graph_operation_names",
    "lattice_graph_status",
    "native_module",
    "validate_lattice_artifact",
    "validate_lattice_graph",
]

LATTICE_OPT_ENV = "MLX_LATTICE_LATTICE_OPT"
"""Environment variable naming a ``lattice-opt`` executable."""

_TOOL_TIMEOUT_S = 120


class ArtifactCapabilityError(RuntimeError):
    """This install lacks the native MLIR support an operation needs."""


class LatticeValidationError(ValueError):
    """MLIR verification rejected a graph; ``diagnostics`` holds MLIR's messages."""

    def __init__(self, message: str, diagnostics: str = "") -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


@dataclass(frozen=True)
class LatticeMLIRStatus:
    """Outcome of verifying a graph: ``valid`` and MLIR's diagnostics text."""

    valid: bool
    diagnostics: str = ""


def native_module() -> ModuleType | None:
    """The ``lattice_mlir`` extension when it is installed and usable, else None."""
    try:
        module = importlib.import_module("lattice_mlir")
    except ImportError:
        return None
    if not (hasattr(module, "verify") and hasattr(module, "import_plan")):
        return None
    return module


def _find_tool(lattice_opt: str | os.PathLike[str] | None) -> Path | None:
    if lattice_opt is not None:
        tool = Path(lattice_opt)
        if not tool.is_file() or not os.access(tool, os.X_OK):
            raise ArtifactCapabilityError(f"lattice_opt={str(tool)!r} is not an executable file")
        return tool
    env = os.environ.get(LATTICE_OPT_ENV)
    if env:
        tool = Path(env)
        if not tool.is_file() or not os.access(tool, os.X_OK):
            raise ArtifactCapabilityError(f"${LATTICE_OPT_ENV}={env!r} is not an executable file")
        return tool
    beside = Path(sys.executable).parent / "lattice-opt"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("lattice-opt")
    return Path(found) if found else None


def _tool_status(tool: Path, graph: str) -> LatticeMLIRStatus:
    try:
        done = subprocess.run(
            [str(tool), "-"],
            input=graph.encode("utf-8"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=_TOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ArtifactCapabilityError(f"could not run {tool}: {exc}") from None
    diagnostics = done.stderr.decode("utf-8", errors="replace").strip()
    if done.returncode < 0:
        return LatticeMLIRStatus(False, f"{tool} crashed (signal {-done.returncode})")
    return LatticeMLIRStatus(done.returncode == 0, diagnostics)


def lattice_graph_status(
    graph: str, *, lattice_opt: str | os.PathLike[str] | None = None
) -> LatticeMLIRStatus:
    """Parse and verify ``graph``; report the result instead of raising.

    Raises :class:`ArtifactCapabilityError` only when no verifier is available.
    """
    if not isinstance(graph, str):
        raise TypeError(f"graph must be MLIR text (str), got {type(graph).__name__}")
    if lattice_opt is None:
        native = native_module()
        if native is not None:
            status = native.verify(graph)
            return LatticeMLIRStatus(bool(status.valid), str(status.diagnostics))
    tool = _find_tool(lattice_opt)
    if tool is None:
        raise ArtifactCapabilityError(
            "no lattice MLIR verifier is available: install the native module "
            "(pip install -e packages/lattice-mlir), pass lattice_opt=PATH, or set "
            f"${LATTICE_OPT_ENV} to a lattice-opt executable"
        )
    return _tool_status(tool, graph)


def validate_lattice_graph(
    graph: str, *, lattice_opt: str | os.PathLike[str] | None = None
) -> None:
    """Parse and verify ``graph``; raise :class:`LatticeValidationError` if MLIR rejects it."""
    status = lattice_graph_status(graph, lattice_opt=lattice_opt)
    if not status.valid:
        raise LatticeValidationError(
            "the lattice graph does not verify:\n" + status.diagnostics, status.diagnostics
        )


def lattice_artifact_status(
    artifact: LatticeArtifact, *, lattice_opt: str | os.PathLike[str] | None = None
) -> LatticeMLIRStatus:
    """Verify an artifact: its graph, and (with the native module) its weights against it.

    With the in-process module the artifact is compiled for MLX, so weight
    payloads that do not match the graph (missing entries, incomplete packed
    triplets, dtype or shape drift) and type errors are reported too.
    """
    status = lattice_graph_status(artifact.graph, lattice_opt=lattice_opt)
    if not status.valid or native_module() is None:
        return status
    from mlx_lattice.artifact.runtime import compile_lattice_artifact

    try:
        compile_lattice_artifact(artifact)
    except ValueError as exc:
        return LatticeMLIRStatus(False, str(exc))
    return status


def validate_lattice_artifact(
    artifact: LatticeArtifact, *, lattice_opt: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`LatticeValidationError` unless :func:`lattice_artifact_status` is valid."""
    status = lattice_artifact_status(artifact, lattice_opt=lattice_opt)
    if not status.valid:
        raise LatticeValidationError(
            "the lattice artifact does not verify:\n" + status.diagnostics, status.diagnostics
        )


def lattice_graph_operation_names(graph: str) -> tuple[str, ...]:
    """Names of the entry's operations in order, from the natively verified plan.

    Needs the in-process module; there is deliberately no textual fallback.
    """
    native = native_module()
    if native is None:
        raise ArtifactCapabilityError(
            "lattice_graph_operation_names needs the native lattice_mlir module; install it "
            "with pip install -e packages/lattice-mlir"
        )
    from lattice_contract.plan import RuntimePlan

    return tuple(op.name for op in RuntimePlan.from_native(native.import_plan(graph)).ops)
