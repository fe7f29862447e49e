"""Artifact bundle IO with MLX arrays: ``graph.mlir`` plus ``weights.safetensors``.

This layer moves exchange media only: it neither verifies nor executes the
graph (see :mod:`mlx_lattice.artifact.validation` and
:mod:`mlx_lattice.artifact.runtime`).  Loading enforces the bundle rules of
:mod:`lattice_contract.artifact.bundle` and the shared safetensors reader policy
before ``mx.load`` maps the payload; saving is atomic.  Both are the shared
:class:`~lattice_contract.runtime.artifact_runtime.ArtifactRuntime`'s, bound to MLX.
"""

from __future__ import annotations

from lattice_contract.artifact import BundleError as BundleError
from lattice_contract.artifact import WeightFileError as WeightFileError
from lattice_contract.runtime import ARTIFACT_IO_NAMES

from mlx_lattice.artifact.runtime import RUNTIME
from mlx_lattice.artifact.runtime import LatticeArtifact as LatticeArtifact

__all__ = [*ARTIFACT_IO_NAMES]


save_lattice_artifact = RUNTIME.save_artifact
load_lattice_artifact = RUNTIME.load_artifact
