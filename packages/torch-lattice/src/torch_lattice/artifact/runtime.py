"""Executing a verified lattice artifact on torch (CPU or CUDA).

The path is the same as on MLX: the native module parses and verifies
``graph.mlir`` with real MLIR and returns the plan payload;
:meth:`~lattice_contract.plan.RuntimePlan.from_native` freezes it;
:func:`lattice_contract.execute.compile_plan` type-checks it, requires a
lowering for every schema op and resolves the weights; the shared
interpreter then runs the torch lowerings of
:mod:`torch_lattice.artifact.lowerings`.  Python never reads MLIR text, and
there is no fallback interpreter: without the native module, compiling
raises :class:`ArtifactCapabilityError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from lattice_contract import verify
from lattice_contract.execute import LatticeProgramBase, ProgramCallError, compile_plan
from lattice_contract.plan import RuntimePlan
from lattice_contract.verify import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    LatticeValidationError,
    import_native_plan,
    native_module,
    require_native,
)

from torch_lattice.artifact.backend import TORCH_BACKEND
from torch_lattice.artifact.io import LatticeArtifact, load_lattice_artifact
from torch_lattice.artifact.lowerings import LOWERINGS
from torch_lattice.sparse import SparseTensor

__all__ = [
    "LATTICE_OPT_ENV",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeProgram",
    "LatticeValidationError",
    "ProgramCallError",
    "compile_lattice_artifact",
    "import_lattice_plan",
    "lattice_artifact_status",
    "lattice_graph_status",
    "load_lattice_program",
    "native_artifact_execution_available",
    "native_module",
    "validate_lattice_artifact",
    "validate_lattice_graph",
]


LATTICE_OPT_ENV = "TORCH_LATTICE_LATTICE_OPT"
"""Environment variable naming a ``lattice-opt`` executable (graph verification only)."""


def native_artifact_execution_available() -> bool:
    """Whether this install can execute artifacts (the native module is present)."""
    return native_module() is not None


def lattice_graph_status(
    graph: str, *, lattice_opt: str | os.PathLike[str] | None = None
) -> LatticeMLIRStatus:
    """Parse and verify ``graph`` with real MLIR; report instead of raising.

    Uses the in-process native module, or a ``lattice-opt`` executable
    (``lattice_opt=``, ``$TORCH_LATTICE_LATTICE_OPT``, beside Python or on PATH).
    """
    return verify.lattice_graph_status(graph, lattice_opt=lattice_opt, env=LATTICE_OPT_ENV)


def validate_lattice_graph(
    graph: str, *, lattice_opt: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`LatticeValidationError` unless MLIR accepts ``graph``."""
    verify.validate_lattice_graph(graph, lattice_opt=lattice_opt, env=LATTICE_OPT_ENV)


def import_lattice_plan(graph: str) -> RuntimePlan:
    """Verify ``graph`` in process and freeze its plan (schema- and ABI-checked).

    MLIR's rejection is a :class:`LatticeValidationError` carrying MLIR's
    diagnostics; a malformed payload a :class:`~lattice_contract.plan.PlanError`.
    """
    return import_native_plan(graph)


def lattice_graph_operation_names(graph: str) -> tuple[str, ...]:
    """Names of the entry's operations in order, from the natively verified plan.

    Needs the in-process module; there is deliberately no textual fallback.
    """
    return tuple(op.name for op in import_lattice_plan(graph).ops)


def lattice_artifact_status(
    artifact: LatticeArtifact | str | os.PathLike[str],
    *,
    lattice_opt: str | os.PathLike[str] | None = None,
) -> LatticeMLIRStatus:
    """Verify an artifact: its graph, and (with the native module) its weights against it.

    ``artifact`` is a loaded :class:`LatticeArtifact` or the path of a bundle
    directory (loaded first, so the bundle rules apply).

    The graph is verified in process or, without the native module, by a
    ``lattice-opt`` executable (as :func:`lattice_graph_status` finds it), so
    an install without ``lattice_mlir`` can still vet a bundle.  With the
    native module the artifact is also compiled for torch, so weight payloads
    that do not match the graph (missing entries, incomplete packed triplets,
    dtype or shape drift) and type errors are reported too.
    """
    if not isinstance(artifact, LatticeArtifact):
        artifact = load_lattice_artifact(artifact)
    status = lattice_graph_status(artifact.graph, lattice_opt=lattice_opt)
    if not status.valid or native_module() is None:
        return status
    try:
        LatticeProgram(import_lattice_plan(artifact.graph), artifact.weights)
    except ValueError as exc:
        return LatticeMLIRStatus(False, str(exc))
    return status


def validate_lattice_artifact(
    artifact: LatticeArtifact | str | os.PathLike[str],
    *,
    lattice_opt: str | os.PathLike[str] | None = None,
) -> None:
    """Raise :class:`LatticeValidationError` unless :func:`lattice_artifact_status` is valid."""
    status = lattice_artifact_status(artifact, lattice_opt=lattice_opt)
    if not status.valid:
        raise LatticeValidationError(
            "the lattice artifact does not verify:\n" + status.diagnostics, status.diagnostics
        )


def _device(device: str | torch.device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a torch device: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but torch sees no CUDA device")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {dev} is not supported; use 'cpu' or 'cuda'")
    return dev


class LatticeProgram(LatticeProgramBase):
    """An executable torch lowering of a verified lattice artifact.

    Call forms (the same as ``mlx_lattice``): ``program(x)`` with one
    SparseTensor per logical sparse input (positionally or by logical name),
    ``program(x.coords, x.feats, x.active_rows)`` with the ABI arrays
    positionally, or ``program(x_coords=..., x_features=..., x_active=...)``
    by ABI name.  Inputs on another device are copied to the program's
    device first.  One returned value is unwrapped; several come back as a
    tuple in ``output_names`` order.  Execution runs without autograd.  The
    ABI properties and call glue come from
    :class:`~lattice_contract.execute.LatticeProgramBase`.
    """

    def __init__(
        self,
        plan: RuntimePlan,
        weights: Mapping[str, torch.Tensor],
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        self._check_plan(plan)
        self.device = _device(device)
        moved = {key: value.to(self.device) for key, value in weights.items()}
        self.plan = plan
        self._compiled = compile_plan(plan, LOWERINGS, TORCH_BACKEND, moved)

    @classmethod
    def from_artifact(
        cls, artifact: LatticeArtifact, *, device: str | torch.device = "cpu"
    ) -> LatticeProgram:
        """Verify, import and compile a loaded artifact."""
        return cls(import_lattice_plan(artifact.graph), artifact.weights, device=device)

    def _to_device(self, value: Any) -> Any:
        if isinstance(value, SparseTensor) and value.device != self.device:
            return value.to(self.device)
        if isinstance(value, torch.Tensor) and value.device != self.device:
            return value.to(self.device)
        return value

    def _run(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, trusted: bool) -> Any:
        args = tuple(self._to_device(a) for a in args)
        kwargs = {k: self._to_device(v) for k, v in kwargs.items()}
        return super()._run(args, kwargs, trusted=trusted)

    def _execute(self, bound: Mapping[str, Any], *, trusted: bool) -> tuple[Any, ...]:
        with torch.no_grad():
            return super()._execute(bound, trusted=trusted)

    def _repr_extras(self) -> tuple[str, ...]:
        return (str(self.device),)


def compile_lattice_artifact(
    artifact: LatticeArtifact, *, device: str | torch.device = "cpu"
) -> LatticeProgram:
    """Compile a loaded artifact into an executable torch program."""
    require_native("compiling a lattice artifact")
    return LatticeProgram.from_artifact(artifact, device=device)


def load_lattice_program(
    path: str | os.PathLike[str], *, device: str | torch.device = "cpu"
) -> LatticeProgram:
    """Load an artifact directory and compile it for ``device`` (``cpu`` or ``cuda``).

    The capability check comes first, so a missing native module is reported
    as such rather than as a later bundle or graph error.
    """
    require_native("loading a lattice program")
    return compile_lattice_artifact(load_lattice_artifact(path), device=device)
