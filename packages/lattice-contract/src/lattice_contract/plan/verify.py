"""Graph verification and plan import through real MLIR, for every runtime.

Python never parses lattice MLIR.  A graph is verified either by the native
``lattice_mlir`` module (parser and lattice dialect verifier, in process) or
by running a ``lattice-opt`` executable.  Tool lookup order for
:func:`lattice_graph_status`: an explicit ``lattice_opt=`` path; else the
in-process module when installed; else the executable named by the runtime's
environment variable (``env``, e.g. ``MLX_LATTICE_LATTICE_OPT``); else a
``lattice-opt`` beside the Python interpreter or on ``PATH``.  With none of
them the functions raise :class:`ArtifactCapabilityError` instead of guessing.

Plan import (:func:`import_native_plan`) needs the in-process module; it
returns the frozen :class:`~lattice_contract.plan.RuntimePlan`.  A caller
that needs the verdict and then the plan (validating an artifact before
compiling it) calls :func:`graph_status_and_plan`, which gets both from one
native parse and verification instead of two.
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

from lattice_contract.plan.records import PlanError
from lattice_contract.plan.runtime_plan import RuntimePlan

__all__ = [
    "ARTIFACT_FLAG",
    "NATIVE_INSTALL_HINT",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeValidationError",
    "find_lattice_opt",
    "graph_status_and_plan",
    "import_native_plan",
    "lattice_graph_status",
    "native_module",
    "require_native",
    "validate_lattice_graph",
]

NATIVE_INSTALL_HINT = (
    "build it with `pip install -e packages/lattice-mlir` (or ./dev test, which builds it)"
)
_TOOL_TIMEOUT_S = 120
ARTIFACT_FLAG = "--lattice-verify-artifact"
"""``lattice-opt`` option that adds the artifact rules (IR version, digest, ABI) to verification."""


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


def require_native(what: str = "executing a lattice artifact") -> ModuleType:
    """The native module, or :class:`ArtifactCapabilityError` explaining its absence."""
    native = native_module()
    if native is None:
        raise ArtifactCapabilityError(
            f"{what} needs the native lattice_mlir module, which is not installed; "
            f"{NATIVE_INSTALL_HINT}. Bundle IO and lattice-opt validation work without it; "
            "there is no fallback runtime"
        )
    return native


def _executable(path: Path, origin: str) -> Path:
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ArtifactCapabilityError(f"{origin}={str(path)!r} is not an executable file")
    return path


def find_lattice_opt(
    lattice_opt: str | os.PathLike[str] | None = None, *, env: str | None = None
) -> Path | None:
    """The ``lattice-opt`` to run: explicit path, ``$env``, beside Python, or on PATH."""
    if lattice_opt is not None:
        return _executable(Path(lattice_opt), "lattice_opt")
    configured = os.environ.get(env) if env else None
    if configured:
        return _executable(Path(configured), f"${env}")
    beside = Path(sys.executable).parent / "lattice-opt"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("lattice-opt")
    return Path(found) if found else None


def _tool_status(tool: Path, graph: str) -> LatticeMLIRStatus:
    try:
        done = subprocess.run(
            [str(tool), ARTIFACT_FLAG, "-"],
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
    graph: str,
    *,
    lattice_opt: str | os.PathLike[str] | None = None,
    env: str | None = None,
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
    tool = find_lattice_opt(lattice_opt, env=env)
    if tool is None:
        where = f", set ${env} to a lattice-opt executable" if env else ""
        raise ArtifactCapabilityError(
            "no lattice MLIR verifier is available: install the native module "
            f"({NATIVE_INSTALL_HINT}), pass lattice_opt=PATH{where}"
        )
    return _tool_status(tool, graph)


def validate_lattice_graph(
    graph: str,
    *,
    lattice_opt: str | os.PathLike[str] | None = None,
    env: str | None = None,
) -> None:
    """Parse and verify ``graph``; raise :class:`LatticeValidationError` if MLIR rejects it."""
    status = lattice_graph_status(graph, lattice_opt=lattice_opt, env=env)
    if not status.valid:
        raise LatticeValidationError(
            "the lattice graph does not verify:\n" + status.diagnostics, status.diagnostics
        )


def graph_status_and_plan(
    graph: str,
    *,
    lattice_opt: str | os.PathLike[str] | None = None,
    env: str | None = None,
) -> tuple[LatticeMLIRStatus, RuntimePlan | None]:
    """Verify ``graph`` and, in process, freeze its plan too: one parse, one verification.

    For a caller that validates a graph and then compiles it (an artifact's
    status check): with the native module the verdict and the frozen plan
    come from one ``lattice_mlir.verify_and_import`` call, and a payload the
    plan rules reject is an invalid status carrying the :class:`PlanError`'s
    words.  With ``lattice_opt=`` or without the module, the graph is
    verified as :func:`lattice_graph_status` does and the plan is None.
    """
    native = native_module() if lattice_opt is None else None
    if native is None:
        return lattice_graph_status(graph, lattice_opt=lattice_opt, env=env), None
    if not isinstance(graph, str):
        raise TypeError(f"graph must be MLIR text (str), got {type(graph).__name__}")
    status, payload = native.verify_and_import(graph)
    diagnostics = str(status.diagnostics)
    if not status.valid or payload is None:
        return LatticeMLIRStatus(False, diagnostics), None
    try:
        plan = RuntimePlan.from_native(payload)
    except PlanError as exc:
        return LatticeMLIRStatus(False, str(exc)), None
    return LatticeMLIRStatus(True, diagnostics), plan


def import_native_plan(graph: str) -> RuntimePlan:
    """Verify ``graph`` in process and freeze its plan (needs the native module).

    Every runtime imports plans through here, so a graph MLIR rejects raises
    the same :class:`LatticeValidationError` (with MLIR's ``diagnostics``) in
    the same words on each; payload problems are ``PlanError``.
    """
    native = require_native("importing a lattice plan")
    try:
        payload = native.import_plan(graph)
    except ValueError as exc:
        diagnostics = getattr(exc, "diagnostics", None)
        if diagnostics is None:
            raise
        raise LatticeValidationError(
            "MLIR rejected the lattice graph:\n" + str(diagnostics), str(diagnostics)
        ) from None
    return RuntimePlan.from_native(payload)
