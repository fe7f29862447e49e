"""Lattice artifacts on torch: bundle IO, native verification and execution.

``load_lattice_program(path, device="cpu")`` runs the same verified, frozen,
type-checked :class:`~lattice_contract.plan.RuntimePlan` that ``mlx_lattice``
runs, with torch lowerings of every schema op.  The plan types are re-exported
here under the names the MLX runtime uses.
"""

from __future__ import annotations

from lattice_contract.plan import PlanArgument, PlanError, PlanOperation, PlanOutput, RuntimePlan
from lattice_contract.typecheck import PlanTypeError

from torch_lattice.artifact.backend import TORCH_BACKEND, TorchBackend
from torch_lattice.artifact.io import (
    BundleError,
    LatticeArtifact,
    load_lattice_artifact,
    save_lattice_artifact,
)
from torch_lattice.artifact.lowerings import LOWERINGS
from torch_lattice.artifact.runtime import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    LatticeProgram,
    LatticeValidationError,
    ProgramCallError,
    compile_lattice_artifact,
    import_lattice_plan,
    lattice_artifact_status,
    lattice_graph_operation_names,
    lattice_graph_status,
    load_lattice_program,
    native_artifact_execution_available,
    validate_lattice_artifact,
    validate_lattice_graph,
)

artifact_lowering = LOWERINGS.artifact_lowering
"""Decorator registering a torch lowering (see ``LoweringRegistry.artifact_lowering``)."""

__all__ = [
    "LOWERINGS",
    "TORCH_BACKEND",
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
    "TorchBackend",
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
