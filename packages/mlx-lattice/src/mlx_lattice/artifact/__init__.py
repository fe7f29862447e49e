"""The MLX consumer of lattice artifacts: bundle IO, validation, plans and programs.

``model.lattice/`` holds ``graph.mlir`` and ``weights.safetensors``.  Load and
save bundles with :func:`load_lattice_artifact` / :func:`save_lattice_artifact`;
verify them through real MLIR with :func:`validate_lattice_artifact`; execute
them with :func:`load_lattice_program` (or :func:`compile_lattice_artifact`),
which needs the native ``lattice_mlir`` module
(:func:`native_artifact_execution_available`).  The plan types are the shared
ones of :mod:`lattice_contract.plan`, re-exported here.
"""

from lattice_contract.runtime import ARTIFACT_NAMES
from lattice_contract.runtime import conv_weight as conv_weight

from mlx_lattice.artifact.io import BundleError as BundleError
from mlx_lattice.artifact.io import LatticeArtifact as LatticeArtifact
from mlx_lattice.artifact.io import load_lattice_artifact as load_lattice_artifact
from mlx_lattice.artifact.io import save_lattice_artifact as save_lattice_artifact
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS as MLX_LOWERINGS
from mlx_lattice.artifact.lowerings import artifact_lowering as artifact_lowering
from mlx_lattice.artifact.plan import PlanArgument as PlanArgument
from mlx_lattice.artifact.plan import PlanError as PlanError
from mlx_lattice.artifact.plan import PlanOperation as PlanOperation
from mlx_lattice.artifact.plan import PlanOutput as PlanOutput
from mlx_lattice.artifact.plan import PlanTypeError as PlanTypeError
from mlx_lattice.artifact.plan import RuntimePlan as RuntimePlan
from mlx_lattice.artifact.runtime import LatticeProgram as LatticeProgram
from mlx_lattice.artifact.runtime import ProgramCallError as ProgramCallError
from mlx_lattice.artifact.runtime import compile_lattice_artifact as compile_lattice_artifact
from mlx_lattice.artifact.runtime import load_lattice_program as load_lattice_program
from mlx_lattice.artifact.runtime import (
    native_artifact_execution_available as native_artifact_execution_available,
)
from mlx_lattice.artifact.runtime import (
    sparse_decompose_from_artifact as sparse_decompose_from_artifact,
)
from mlx_lattice.artifact.runtime import sparse_make_from_artifact as sparse_make_from_artifact
from mlx_lattice.artifact.runtime import weight_from_artifact as weight_from_artifact
from mlx_lattice.artifact.validation import ArtifactCapabilityError as ArtifactCapabilityError
from mlx_lattice.artifact.validation import LatticeMLIRStatus as LatticeMLIRStatus
from mlx_lattice.artifact.validation import LatticeValidationError as LatticeValidationError
from mlx_lattice.artifact.validation import import_lattice_plan as import_lattice_plan
from mlx_lattice.artifact.validation import lattice_artifact_status as lattice_artifact_status
from mlx_lattice.artifact.validation import (
    lattice_graph_operation_names as lattice_graph_operation_names,
)
from mlx_lattice.artifact.validation import lattice_graph_status as lattice_graph_status
from mlx_lattice.artifact.validation import validate_lattice_artifact as validate_lattice_artifact
from mlx_lattice.artifact.validation import validate_lattice_graph as validate_lattice_graph

EXTRA_NAMES = (
    "MLX_LOWERINGS",
    "artifact_lowering",
    "conv_weight",
    "sparse_decompose_from_artifact",
    "sparse_make_from_artifact",
    "weight_from_artifact",
)
"""What this package exports besides the artifact API every runtime shares: the MLX
lowering table, its registration decorator with the conv weight spec, and the
lowerings of the sparse ABI ops and ``lattice.weight`` by their artifact-API names."""

__all__ = [*ARTIFACT_NAMES, *EXTRA_NAMES]
