"""Executable MLX programs from verified lattice artifacts.

``compile_lattice_artifact`` asks the native module for the verified plan of
an artifact's graph, freezes it (:meth:`RuntimePlan.from_native`), type-checks
it, resolves every weight against the safetensors entries and binds every op
to its MLX lowering.  The resulting :class:`LatticeProgram` is then called
like a function (see :func:`lattice_contract.execute.bind_call` for the call
forms).  Without the native module there is no way to execute an artifact:
the functions here raise :class:`ArtifactCapabilityError` instead of falling
back to any other graph runtime.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import mlx.core as mx
from lattice_contract.execute import LatticeProgramBase, ProgramCallError, compile_plan
from lattice_contract.plan import RuntimePlan
from lattice_contract.verify import (
    ArtifactCapabilityError,
    import_native_plan,
    native_module,
    require_native,
)

from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.io import LatticeArtifact, load_lattice_artifact
from mlx_lattice.artifact.lowerings import (
    MLX_LOWERINGS,
    sparse_decompose_from_artifact,
    sparse_make_from_artifact,
    weight_from_artifact,
)

__all__ = [
    "ArtifactCapabilityError",
    "LatticeProgram",
    "ProgramCallError",
    "compile_lattice_artifact",
    "load_lattice_program",
    "native_artifact_execution_available",
    "sparse_decompose_from_artifact",
    "sparse_make_from_artifact",
    "weight_from_artifact",
]


def native_artifact_execution_available() -> bool:
    """Whether this install has the native MLIR importer needed to execute artifacts."""
    return native_module() is not None


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
    :class:`~lattice_contract.execute.LatticeProgramBase`.
    """

    def __init__(self, plan: RuntimePlan, weights: Mapping[str, mx.array]) -> None:
        self.plan = self._check_plan(plan)
        self.weights = weights
        self._compiled = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, weights)

    @classmethod
    def from_artifact(cls, artifact: LatticeArtifact) -> LatticeProgram:
        """Verify ``artifact.graph`` natively, then compile the plan with its weights."""
        return cls(import_native_plan(artifact.graph), artifact.weights)


def compile_lattice_artifact(artifact: LatticeArtifact) -> LatticeProgram:
    """Compile a loaded artifact into an executable MLX program (needs the native module)."""
    return LatticeProgram.from_artifact(artifact)


def load_lattice_program(path: str | os.PathLike[str]) -> LatticeProgram:
    """Load an artifact directory and compile it (needs the native module).

    The capability check comes first, so a missing native module is reported as
    such rather than as a later bundle or graph error.
    """
    require_native()
    return compile_lattice_artifact(load_lattice_artifact(path))
