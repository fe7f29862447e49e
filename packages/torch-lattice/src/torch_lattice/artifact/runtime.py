"""Executing a verified lattice artifact on torch (CPU or CUDA).

The path is the same as on MLX: the native module parses and verifies
``graph.mlir`` with real MLIR and returns the plan payload;
:meth:`~lattice_contract.plan.RuntimePlan.from_native` freezes it;
:func:`lattice_contract.runtime.execute.compile_plan` type-checks it, requires a
lowering for every schema op and resolves the weights; the shared
interpreter then runs the standard lowerings bound to torch
(:mod:`torch_lattice.artifact.lowerings`).  Python never reads MLIR text, and
there is no fallback interpreter: without the native module, compiling
raises :class:`ArtifactCapabilityError`.

Loading, saving, validation and compilation are the shared
:class:`~lattice_contract.runtime.artifact_runtime.ArtifactRuntime` bound to the
torch adapter (:data:`RUNTIME`); what this module adds is the device.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from lattice_contract.plan import ArtifactCapabilityError as ArtifactCapabilityError
from lattice_contract.plan import LatticeMLIRStatus as LatticeMLIRStatus
from lattice_contract.plan import LatticeValidationError as LatticeValidationError
from lattice_contract.plan import RuntimePlan
from lattice_contract.plan import native_module as native_module
from lattice_contract.runtime import (
    ARTIFACT_PROGRAM_NAMES,
    ARTIFACT_VERIFY_NAMES,
    ArtifactRuntime,
    LatticeArtifactBase,
    LatticeProgramBase,
    compile_plan,
)
from lattice_contract.runtime import ProgramCallError as ProgramCallError
from lattice_contract.runtime import import_lattice_plan as import_lattice_plan
from lattice_contract.runtime import (
    lattice_graph_operation_names as lattice_graph_operation_names,
)
from lattice_contract.runtime import (
    native_artifact_execution_available as native_artifact_execution_available,
)

from torch_lattice.artifact.backend import TORCH_BACKEND
from torch_lattice.artifact.lowerings import LOWERINGS
from torch_lattice.sparse import SparseTensor

__all__ = [*ARTIFACT_VERIFY_NAMES, *ARTIFACT_PROGRAM_NAMES]


LATTICE_OPT_ENV = TORCH_BACKEND.lattice_opt_env
"""Environment variable naming a ``lattice-opt`` executable (graph verification only)."""


class LatticeArtifact(LatticeArtifactBase[torch.Tensor]):
    """An artifact in memory: the MLIR text and its tensors by safetensors name.

    Packed weights appear as their three entries ``<key>.weight``,
    ``<key>.scales`` and ``<key>.biases``, exactly as stored.
    """


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
    :class:`~lattice_contract.runtime.execute.LatticeProgramBase`.
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
        return RUNTIME.compile(artifact, device=device)

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


RUNTIME: ArtifactRuntime[LatticeArtifact, LatticeProgram] = ArtifactRuntime(
    TORCH_BACKEND, LOWERINGS, artifact_type=LatticeArtifact, program=LatticeProgram
)
"""The shared artifact runtime bound to torch: the functions below are its public face."""

lattice_graph_status = RUNTIME.graph_status
validate_lattice_graph = RUNTIME.validate_graph
lattice_artifact_status = RUNTIME.artifact_status
validate_lattice_artifact = RUNTIME.validate_artifact


def compile_lattice_artifact(
    artifact: LatticeArtifact, *, device: str | torch.device = "cpu"
) -> LatticeProgram:
    """Compile a loaded artifact into an executable torch program for ``device``."""
    return RUNTIME.compile(artifact, device=device)


def load_lattice_program(
    path: str | os.PathLike[str], *, device: str | torch.device = "cpu"
) -> LatticeProgram:
    """Load an artifact directory and compile it for ``device`` (``cpu`` or ``cuda``).

    The capability check comes first, so a missing native module is reported
    as such rather than as a later bundle or graph error.
    """
    return RUNTIME.load_program(path, device=device)
