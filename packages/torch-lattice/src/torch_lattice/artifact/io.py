"""Artifact bundle IO with torch tensors: ``graph.mlir`` plus ``weights.safetensors``.

This layer moves exchange media only; verification and execution live in
:mod:`torch_lattice.artifact.runtime`.  Loading enforces the bundle rules of
:mod:`lattice_contract.artifact.bundle` and the shared safetensors reader policy (on
the CPU); saving is atomic and may carry ``__metadata__`` (the exporter's
quantization report).  Both are the shared
:class:`~lattice_contract.runtime.artifact_runtime.ArtifactRuntime`'s, bound to torch.
"""

from __future__ import annotations

from lattice_contract.artifact import BundleError as BundleError
from lattice_contract.artifact import WeightFileError as WeightFileError
from lattice_contract.runtime import ARTIFACT_IO_NAMES

from torch_lattice.artifact.runtime import RUNTIME
from torch_lattice.artifact.runtime import LatticeArtifact as LatticeArtifact

__all__ = [*ARTIFACT_IO_NAMES, "flatten_weights"]


save_lattice_artifact = RUNTIME.save_artifact
load_lattice_artifact = RUNTIME.load_artifact

flatten_weights = RUNTIME.flatten_weights
"""Packed weights as their safetensors triplets (what a save writes)."""
