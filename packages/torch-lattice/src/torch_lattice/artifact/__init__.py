"""Lattice artifacts on torch: bundle IO, native verification and execution.

``load_lattice_program(path, device="cpu")`` runs the same verified, frozen,
type-checked :class:`~lattice_contract.plan.RuntimePlan` that ``mlx_lattice``
runs, with torch lowerings of every schema op.  The plan types are re-exported
here under the names the MLX runtime uses.
"""

from __future__ import annotations

from lattice_contract.plan import PlanArgument as PlanArgument
from lattice_contract.plan import PlanError as PlanError
from lattice_contract.plan import PlanOperation as PlanOperation
from lattice_contract.plan import PlanOutput as PlanOutput
from lattice_contract.plan import PlanTypeError as PlanTypeError
from lattice_contract.plan import RuntimePlan as RuntimePlan
from lattice_contract.runtime import ARTIFACT_NAMES

from torch_lattice.artifact.backend import TORCH_BACKEND as TORCH_BACKEND
from torch_lattice.artifact.backend import TorchBackend as TorchBackend
from torch_lattice.artifact.io import BundleError as BundleError
from torch_lattice.artifact.io import LatticeArtifact as LatticeArtifact
from torch_lattice.artifact.io import load_lattice_artifact as load_lattice_artifact
from torch_lattice.artifact.io import save_lattice_artifact as save_lattice_artifact
from torch_lattice.artifact.lowerings import LOWERINGS as LOWERINGS
from torch_lattice.artifact.runtime import ArtifactCapabilityError as ArtifactCapabilityError
from torch_lattice.artifact.runtime import LatticeMLIRStatus as LatticeMLIRStatus
from torch_lattice.artifact.runtime import LatticeProgram as LatticeProgram
from torch_lattice.artifact.runtime import LatticeValidationError as LatticeValidationError
from torch_lattice.artifact.runtime import ProgramCallError as ProgramCallError
from torch_lattice.artifact.runtime import compile_lattice_artifact as compile_lattice_artifact
from torch_lattice.artifact.runtime import import_lattice_plan as import_lattice_plan
from torch_lattice.artifact.runtime import lattice_artifact_status as lattice_artifact_status
from torch_lattice.artifact.runtime import (
    lattice_graph_operation_names as lattice_graph_operation_names,
)
from torch_lattice.artifact.runtime import lattice_graph_status as lattice_graph_status
from torch_lattice.artifact.runtime import load_lattice_program as load_lattice_program
from torch_lattice.artifact.runtime import (
    native_artifact_execution_available as native_artifact_execution_available,
)
from torch_lattice.artifact.runtime import validate_lattice_artifact as validate_lattice_artifact
from torch_lattice.artifact.runtime import validate_lattice_graph as validate_lattice_graph

artifact_lowering = LOWERINGS.artifact_lowering
"""Decorator registering a torch lowering (see ``LoweringRegistry.artifact_lowering``)."""

EXTRA_NAMES = ("LOWERINGS", "TORCH_BACKEND", "TorchBackend")
"""What this package exports besides the artifact API every runtime shares."""

__all__ = [*ARTIFACT_NAMES, *EXTRA_NAMES]
