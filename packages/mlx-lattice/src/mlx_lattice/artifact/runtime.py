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
from typing import Any

import mlx.core as mx
from lattice_contract.execute import (
    CompiledProgram,
    ProgramCallError,
    bind_call,
    compile_plan,
    run_program,
    unwrap_results,
)
from lattice_contract.plan import LogicalInput, PlanArgument, PlanOutput, RuntimePlan
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


class LatticeProgram:
    """An artifact compiled for MLX: call it with sparse values or ABI arrays.

    Call forms (nothing runs unless the call matches one exactly):

    * ``program(x)`` / ``program(x, target)`` / ``program(x=x, target=target)``:
      one ``SparseTensor`` per logical sparse input (arrays for tensor inputs);
    * ``program(coords, feats, active)``: the ABI arrays positionally;
    * ``program(x_coords=..., x_features=..., x_active=...)``: by ABI name (a
      program with one sparse input also takes ``coords=``, ``features=``,
      ``active=``).

    One output is returned as itself, several as a tuple in output order.
    """

    def __init__(self, plan: RuntimePlan, weights: Mapping[str, mx.array]) -> None:
        if not isinstance(plan, RuntimePlan):
            raise TypeError(
                f"LatticeProgram needs a RuntimePlan (from RuntimePlan.from_native), got "
                f"{type(plan).__name__}"
            )
        self.plan = plan
        self.weights = weights
        self._compiled: CompiledProgram = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, weights)

    @classmethod
    def from_artifact(cls, artifact: LatticeArtifact) -> LatticeProgram:
        """Verify ``artifact.graph`` natively, then compile the plan with its weights."""
        return cls(import_native_plan(artifact.graph), artifact.weights)

    # -- ABI ------------------------------------------------------------------

    @property
    def inputs(self) -> tuple[PlanArgument, ...]:
        """The entry arguments (ABI names, types, roles) in order."""
        return self.plan.args

    @property
    def logical_inputs(self) -> tuple[LogicalInput, ...]:
        """The public inputs, sparse triples grouped under their logical names."""
        return self.plan.logical_inputs

    @property
    def outputs(self) -> tuple[PlanOutput, ...]:
        """The entry results (ABI names, types, roles) in order."""
        return self.plan.outputs

    @property
    def compiled(self) -> CompiledProgram:
        """The type-checked, weight-resolved, lowering-bound program."""
        return self._compiled

    # -- execution ------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program; see the class docstring for the call forms."""
        return self._run(args, kwargs, trusted=False)

    def call_with_trusted_sparse_inputs(self, *args: Any, **kwargs: Any) -> Any:
        """Run without the divisibility and duplicate-row checks of sparse inputs.

        For callers that already guarantee both (for example, inputs produced by
        this runtime); every other check still runs.
        """
        return self._run(args, kwargs, trusted=True)

    def _run(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, trusted: bool) -> Any:
        bound = bind_call(self.plan, MLX_BACKEND, args, kwargs)
        results = run_program(self._compiled, bound, trusted_sparse_inputs=trusted)
        return unwrap_results(results)

    def __repr__(self) -> str:
        ins = ", ".join(i.name for i in self.logical_inputs)
        outs = ", ".join(o.abi_name for o in self.outputs)
        return f"LatticeProgram(({ins}) -> ({outs}), {len(self.plan.ops)} ops)"


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
