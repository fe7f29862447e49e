"""Artifact bundle IO with torch tensors: ``graph.mlir`` plus ``weights.safetensors``.

This layer moves exchange media only; verification and execution live in
:mod:`torch_lattice.artifact.runtime`.  Loading enforces the bundle rules of
:mod:`lattice_contract.bundle`; saving is atomic.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from lattice_contract.bundle import (
    BundleError,
    atomic_bundle_write,
    check_bundle_dir,
    flatten_bundle_weights,
)
from lattice_contract.constants import GRAPH_FILE, WEIGHT_FILE
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from torch_lattice.ops.quant import QuantizedWeight

__all__ = [
    "BundleError",
    "LatticeArtifact",
    "flatten_weights",
    "load_lattice_artifact",
    "save_lattice_artifact",
]


@dataclass
class LatticeArtifact:
    """An artifact in memory: the MLIR text and the safetensors entries by name.

    Packed weights appear as their three entries ``<key>.weight``,
    ``<key>.scales`` and ``<key>.biases``, exactly as stored.
    """

    graph: str
    weights: dict[str, torch.Tensor] = field(default_factory=dict)


def flatten_weights(
    weights: Mapping[str, torch.Tensor | QuantizedWeight] | None,
) -> dict[str, torch.Tensor]:
    """Storage keys to safetensors entries: a ``QuantizedWeight`` becomes its triplet.

    Entries are detached, moved to the CPU and made contiguous (safetensors
    stores plain buffers); a name produced twice is an error.
    """
    return flatten_bundle_weights(
        weights,
        array_type=torch.Tensor,
        packed_type=QuantizedWeight,
        array_name="torch.Tensor",
        convert=_to_cpu_buffer,
    )


def _to_cpu_buffer(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu").contiguous()


def save_lattice_artifact(
    path: str | os.PathLike[str],
    graph: str,
    weights: Mapping[str, torch.Tensor | QuantizedWeight] | None = None,
    *,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write the artifact directory ``path`` atomically.

    ``metadata`` goes into the safetensors ``__metadata__`` header (string to
    string), where reports about the weights travel with them (the exporter's
    quantization report); it never changes what the artifact computes.

    The bundle appears only once both files are complete; on any error
    nothing is left behind and an artifact already at ``path`` is kept.
    """
    if not isinstance(graph, str) or not graph.strip():
        raise TypeError("graph must be the non-empty MLIR text of the artifact")
    flat = flatten_weights(weights)

    def write(tmp: Path) -> None:
        (tmp / GRAPH_FILE).write_text(graph, encoding="utf-8")
        save_file(flat, str(tmp / WEIGHT_FILE), metadata=dict(metadata) if metadata else None)

    atomic_bundle_write(path, write)


def load_lattice_artifact(path: str | os.PathLike[str]) -> LatticeArtifact:
    """Read an artifact directory, enforcing the bundle rules (on the CPU)."""
    paths = check_bundle_dir(path)
    try:
        graph = paths.graph.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{paths.graph} is not UTF-8 text: {exc}") from None
    try:
        weights = load_file(str(paths.weights), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise BundleError(
            f"{paths.weights} is not a readable safetensors file ({exc}); re-save the artifact"
        ) from None
    return LatticeArtifact(graph=graph, weights=dict(weights))
