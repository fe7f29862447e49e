"""Graph and artifact verification through real MLIR, for MLX users.

The verification machinery is shared with every runtime
(:mod:`lattice_contract.plan.verify`, driven by
:class:`~lattice_contract.runtime.artifact_runtime.ArtifactRuntime`): the in-process
``lattice_mlir`` module, or a ``lattice-opt`` executable passed as
``lattice_opt=`` or named by ``$MLX_LATTICE_LATTICE_OPT`` (else found beside
Python or on ``PATH``).  Python never parses lattice MLIR; without any
verifier the functions raise :class:`ArtifactCapabilityError`.
Artifact-level checks add the weights: with the native module an artifact is
only valid if it compiles for MLX.
"""

from __future__ import annotations

from lattice_contract.plan import ArtifactCapabilityError as ArtifactCapabilityError
from lattice_contract.plan import LatticeMLIRStatus as LatticeMLIRStatus
from lattice_contract.plan import LatticeValidationError as LatticeValidationError
from lattice_contract.plan import native_module as native_module
from lattice_contract.runtime import ARTIFACT_VERIFY_NAMES
from lattice_contract.runtime import import_lattice_plan as import_lattice_plan
from lattice_contract.runtime import (
    lattice_graph_operation_names as lattice_graph_operation_names,
)

from mlx_lattice.artifact.runtime import RUNTIME

__all__ = list(ARTIFACT_VERIFY_NAMES)

LATTICE_OPT_ENV = RUNTIME.adapter.lattice_opt_env
"""Environment variable naming a ``lattice-opt`` executable."""

lattice_graph_status = RUNTIME.graph_status
validate_lattice_graph = RUNTIME.validate_graph
lattice_artifact_status = RUNTIME.artifact_status
validate_lattice_artifact = RUNTIME.validate_artifact
