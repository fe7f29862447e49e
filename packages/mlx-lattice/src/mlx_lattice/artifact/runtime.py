"""Executable MLX programs from verified lattice artifacts.

``compile_lattice_artifact`` asks the native module for the verified plan of
an artifact's graph, freezes it (:meth:`RuntimePlan.from_native`), type-checks
it, resolves every weight against the safetensors entries and binds every op
to its MLX lowering.  The resulting :class:`LatticeProgram` is then called
like a function (see :func:`lattice_contract.runtime.execute.bind_call` for the call
forms).  Without the native module there is no way to execute an artifact:
the functions here raise :class:`ArtifactCapabilityError` instead of falling
back to any other graph runtime.

Loading, saving, validation and compilation are the shared
:class:`~lattice_contract.runtime.artifact_runtime.ArtifactRuntime` bound to the MLX
adapter (:data:`RUNTIME`); this module publishes its methods under the names
``mlx_lattice.artifact`` has always used.
"""

from __future__ import annotations

from collections.abc import Mapping

import mlx.core as mx
from lattice_contract.plan import ArtifactCapabilityError as ArtifactCapabilityError
from lattice_contract.plan import RuntimePlan
from lattice_contract.runtime import (
    ARTIFACT_PROGRAM_NAMES,
    ArtifactRuntime,
    LatticeArtifactBase,
    LatticeProgramBase,
    compile_plan,
)
from lattice_contract.runtime import ProgramCallError as ProgramCallError
from lattice_contract.runtime import (
    native_artifact_execution_available as native_artifact_execution_available,
)

from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS

__all__ = [*ARTIFACT_PROGRAM_NAMES, "ArtifactCapabilityError"]


class LatticeArtifact(LatticeArtifactBase[mx.array]):
    """An artifact in memory: the MLIR text and its MLX arrays by safetensors name.

    Packed weights appear as their three entries ``<key>.weight``,
    ``<key>.scales`` and ``<key>.biases``, exactly as stored.
    """


class LatticeProgram(LatticeProgramBase):
    """An artifact compiled for MLX: call it with sparse values or ABI arrays.

    Call forms (nothing runs unless the call matches one exactly):

    * ``program(x)`` / ``program(x, target)`` / ``program(x=x, target=target)``:
      one ``SparseTensor`` per logical sparse input (arrays for tensor inputs);
    * ``program(coords, feats, active)``: the ABI arrays positionally;
    * ``program(x_coords=..., x_features=..., x_active=...)``: by ABI name (a
      program with one sparse input also takes ``coords=``, ``features=``,
      ``active=``).

    One output is returned as itself, several as a tuple in output order.  The
    ABI properties and call glue come from
    :class:`~lattice_contract.runtime.execute.LatticeProgramBase`.
    """

    def __init__(self, plan: RuntimePlan, weights: Mapping[str, mx.array]) -> None:
        self.plan = self._check_plan(plan)
        self.weights = weights
        self._compiled = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, weights)

    @classmethod
    def from_artifact(cls, artifact: LatticeArtifact) -> LatticeProgram:
        """Verify ``artifact.graph`` natively, then compile the plan with its weights."""
        return RUNTIME.compile(artifact)


RUNTIME: ArtifactRuntime[LatticeArtifact, LatticeProgram] = ArtifactRuntime(
    MLX_BACKEND, MLX_LOWERINGS, artifact_type=LatticeArtifact, program=LatticeProgram
)
"""The shared artifact runtime bound to MLX: the methods below are its public face."""

compile_lattice_artifact = RUNTIME.compile
load_lattice_program = RUNTIME.load_program
