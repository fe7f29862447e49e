"""Running a verified plan on any backend: the ops a backend provides, lowerings, execution.

Above :mod:`lattice_contract.frontend`.  :mod:`.ops` says what a backend
provides (:class:`RuntimeOps`, :class:`RuntimeAdapter`), :mod:`.lowering` the
registry of schema-bound lowerings and weight resolution,
:mod:`.standard_lowerings` the one lowering of every op over an adapter,
:mod:`.execute` compiles and runs a plan, :mod:`.artifact_runtime` loads,
saves and validates bundles for a backend.
"""

from __future__ import annotations

from lattice_contract.runtime import artifact_runtime
from lattice_contract.runtime.artifact_runtime import (
    ARTIFACT_IO_NAMES,
    ARTIFACT_NAMES,
    ARTIFACT_PROGRAM_NAMES,
    ARTIFACT_VERIFY_NAMES,
    ArtifactRuntime,
    LatticeArtifactBase,
    import_lattice_plan,
    lattice_graph_operation_names,
    native_artifact_execution_available,
)
from lattice_contract.runtime.execute import (
    LatticeProgramBase,
    ProgramCallError,
    compile_plan,
    run_program,
)
from lattice_contract.runtime.lowering import (
    ExecutionContext,
    LoweringError,
    LoweringRegistry,
    ResolvedWeight,
    WeightContractError,
    bias_weight,
    channel_weight,
    conv_weight,
    linear_weight,
    resolve_weight,
)
from lattice_contract.runtime.ops import (
    RUNTIME_OP_NAMES,
    RuntimeAdapter,
    RuntimeOps,
    missing_runtime_ops,
    runtime_ops_problems,
)
from lattice_contract.runtime.standard_lowerings import (
    STANDARD_TABLE,
    StandardLowerings,
    lowering_needs,
    standard_lowerings,
)

__all__ = [
    "ARTIFACT_IO_NAMES",
    "ARTIFACT_NAMES",
    "ARTIFACT_PROGRAM_NAMES",
    "ARTIFACT_VERIFY_NAMES",
    "RUNTIME_OP_NAMES",
    "STANDARD_TABLE",
    "ArtifactRuntime",
    "ExecutionContext",
    "LatticeArtifactBase",
    "LatticeProgramBase",
    "LoweringError",
    "LoweringRegistry",
    "ProgramCallError",
    "ResolvedWeight",
    "RuntimeAdapter",
    "RuntimeOps",
    "StandardLowerings",
    "WeightContractError",
    "artifact_runtime",
    "bias_weight",
    "channel_weight",
    "compile_plan",
    "conv_weight",
    "import_lattice_plan",
    "lattice_graph_operation_names",
    "linear_weight",
    "lowering_needs",
    "missing_runtime_ops",
    "native_artifact_execution_available",
    "resolve_weight",
    "run_program",
    "runtime_ops_problems",
    "standard_lowerings",
]
