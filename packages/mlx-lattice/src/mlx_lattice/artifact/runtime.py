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
from typing import Any

import mlx.core as mx
from lattice_contract.dialect import Triple
from lattice_contract.plan import ArtifactCapabilityError as ArtifactCapabilityError
from lattice_contract.plan import RuntimePlan
from lattice_contract.runtime import (
    ARTIFACT_PROGRAM_NAMES,
    ArtifactRuntime,
    ExecutionContext,
    LatticeArtifactBase,
    LatticeProgramBase,
    StandardLowerings,
    compile_plan,
)
from lattice_contract.runtime import ProgramCallError as ProgramCallError
from lattice_contract.runtime import (
    native_artifact_execution_available as native_artifact_execution_available,
)

from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.ops import QuantizedWeight
from mlx_lattice.sparse import SparseTensor

__all__ = [
    *ARTIFACT_PROGRAM_NAMES,
    "ArtifactCapabilityError",
    "sparse_decompose_from_artifact",
    "sparse_make_from_artifact",
    "weight_from_artifact",
]


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


_STANDARD = StandardLowerings(MLX_BACKEND)

RUNTIME: ArtifactRuntime[LatticeArtifact, LatticeProgram] = ArtifactRuntime(
    MLX_BACKEND, MLX_LOWERINGS, artifact_type=LatticeArtifact, program=LatticeProgram
)
"""The shared artifact runtime bound to MLX: the methods below are its public face."""

compile_lattice_artifact = RUNTIME.compile
load_lattice_program = RUNTIME.load_program


# -- the lowerings of the sparse ABI ops and lattice.weight, by their artifact-API names ----
# (the standard table's functions bound to MLX, callable from a user's own lowering)


def weight_from_artifact(
    program: ExecutionContext,
    storage_key: str,
    layout: str,
    packing: Mapping[str, Any] | None,
) -> mx.array | QuantizedWeight:
    """``lattice.weight``: the payload stored under ``storage_key`` (dense or packed).

    Resolved and checked against ``layout``/``packing`` when the program was
    compiled; an unknown key is a :class:`~lattice_contract.runtime.WeightContractError`.
    """
    resolved: mx.array | QuantizedWeight = _STANDARD.weight(
        program, sym_name=storage_key, storage_key=storage_key, layout=layout, packing=packing
    )
    return resolved


def sparse_make_from_artifact(
    program: ExecutionContext,
    coords: mx.array,
    features: mx.array,
    active: mx.array,
    *,
    stride: Triple,
    coord_order: str,
) -> SparseTensor:
    """``lattice.sparse.make``: the ABI arrays as a SparseTensor at ``stride``.

    Coordinates are physical and checked (divisible by ``stride``, no
    duplicate row) unless the program runs with trusted sparse inputs.
    """
    made: SparseTensor = _STANDARD.sparse_make(
        program, coords, features, active, stride=stride, coord_order=coord_order
    )
    return made


def sparse_decompose_from_artifact(input: SparseTensor) -> tuple[mx.array, mx.array, mx.array]:
    """``lattice.sparse.decompose``: ``(coords, features, active)`` of a sparse value."""
    return input.coords, input.feats, input.active_rows
