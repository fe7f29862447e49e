"""The MLX consumer of lattice artifacts: bundle IO, validation, plans and programs.

``model.lattice/`` holds ``graph.mlir`` and ``weights.safetensors``.  Load and
save bundles with :func:`load_lattice_artifact` / :func:`save_lattice_artifact`;
verify them through real MLIR with :func:`validate_lattice_artifact`; execute
them with :func:`load_lattice_program` (or :func:`compile_lattice_artifact`),
which needs the native ``lattice_mlir`` module
(:func:`native_artifact_execution_available`).  The plan types are the shared
ones of :mod:`lattice_contract.plan`, re-exported here.
"""

from mlx_lattice.artifact.io import (
    BundleError,
    LatticeArtifact,
    load_lattice_artifact,
    save_lattice_artifact,
)
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS, artifact_lowering
from mlx_lattice.artifact.plan import (
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    PlanTypeError,
    RuntimePlan,
)
from mlx_lattice.artifact.runtime import (
    LatticeProgram,
    ProgramCallError,
    compile_lattice_artifact,
    load_lattice_program,
    native_artifact_execution_available,
)
from mlx_lattice.artifact.validation import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    LatticeValidationError,
    import_lattice_plan,
    lattice_artifact_status,
    lattice_graph_operation_names,
    lattice_graph_status,
    validate_lattice_artifact,
    validate_lattice_graph,
)

__all__ = [
    "MLX_LOWERINGS",
    "ArtifactCapabilityError",
    "BundleError",
    "LatticeArtifact",
    "LatticeMLIRStatus",
    "LatticeProgram",
    "LatticeValidationError",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "PlanTypeError",
    "ProgramCallError",
    "RuntimePlan",
    "artifact_lowering",
    "compile_lattice_artifact",
    "import_lattice_plan",
    "lattice_artifact_status",
    "lattice_graph_operation_names",
    "lattice_graph_status",
    "load_lattice_artifact",
    "load_lattice_program",
    "native_artifact_execution_available",
    "save_lattice_artifact",
    "validate_lattice_artifact",
    "validate_lattice_graph",
]
