"""Artifact bundle IO with MLX arrays: ``graph.mlir`` plus ``weights.safetensors``.

This layer moves exchange media only: it neither verifies nor executes the
graph (see :mod:`mlx_lattice.artifact.validation` and
:mod:`mlx_lattice.artifact.runtime`).  It does enforce the bundle rules of
:mod:`lattice_contract.bundle` on load, and saves atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import mlx.core as mx
import numpy as np
from lattice_contract.bundle import (
    BundleError,
    atomic_bundle_write,
    check_bundle_dir,
    flatten_bundle_weights,
)
from lattice_contract.constants import GRAPH_FILE, WEIGHT_FILE
from lattice_contract.safetensors_header import (
    FLOAT_DTYPES,
    WeightFileError,
    check_safetensors_file,
    non_finite_error,
)

from mlx_lattice.ops.quant import QuantizedWeight

__all__ = [
    "BundleError",
    "LatticeArtifact",
    "WeightFileError",
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
    weights: dict[str, mx.array] = field(default_factory=dict)


def save_lattice_artifact(
    path: str | os.PathLike[str],
    graph: str,
    weights: Mapping[str, mx.array | QuantizedWeight] | None = None,
) -> None:
    """Write the artifact directory ``path`` atomically.

    ``weights`` maps storage keys to arrays; a ``QuantizedWeight`` value is
    written as its ``.weight``/``.scales``/``.biases`` triplet.  The bundle
    appears only once both files are complete; on any error nothing is left
    behind and an artifact already at ``path`` is kept.
    """
    if not isinstance(graph, str) or not graph.strip():
        raise TypeError("graph must be the non-empty MLIR text of the artifact")
    flat = flatten_bundle_weights(
        weights, array_type=mx.array, packed_type=QuantizedWeight, array_name="mlx.core.array"
    )

    def write(tmp: Path) -> None:
        (tmp / GRAPH_FILE).write_text(graph, encoding="utf-8")
        mx.save_safetensors(str(tmp / WEIGHT_FILE), flat)

    atomic_bundle_write(path, write)


def load_lattice_artifact(path: str | os.PathLike[str]) -> LatticeArtifact:
    """Read an artifact directory, enforcing the bundle rules.

    Rejects legacy JSON manifests, other weight files and missing files
    (:class:`~lattice_contract.bundle.BundleError`).  The weight file's header
    is checked against the shared reader policy first
    (:func:`lattice_contract.safetensors_header.check_safetensors_file`:
    ``mx.load`` alone accepts aliased, trailing, truncated-dimension and
    negative-dimension entries), then read with ``mx.load``, which maps the
    payload lazily; a float entry holding NaN or infinity is refused.
    """
    paths = check_bundle_dir(path)
    layout = check_safetensors_file(paths.weights)
    try:
        graph = paths.graph.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{paths.graph} is not UTF-8 text: {exc}") from None
    try:
        loaded = mx.load(str(paths.weights))
    except (RuntimeError, ValueError) as exc:
        raise BundleError(
            f"{paths.weights} is not a readable safetensors file ({exc}); re-save the artifact"
        ) from None
    if not isinstance(loaded, dict):  # pragma: no cover - mx.load of .safetensors is a dict
        raise BundleError(f"{paths.weights} did not load as a safetensors mapping")
    for name, entry in layout.entries.items():
        got = tuple(loaded[name].shape) if name in loaded else None
        if got != entry.shape:
            raise WeightFileError(
                str(paths.weights),
                name,
                f"has shape {list(entry.shape)} but MLX read it as {got}; MLX dimensions are "
                "32-bit, so this weight cannot be loaded here",
            )
    floats = [name for name, entry in layout.entries.items() if entry.dtype in FLOAT_DTYPES]
    if floats:
        counts = np.asarray(mx.stack([mx.sum(~mx.isfinite(loaded[name])) for name in floats]))
        for name, count in zip(floats, counts.tolist(), strict=True):
            if count:
                raise non_finite_error(str(paths.weights), name, int(count))
    return LatticeArtifact(graph=graph, weights=dict(loaded))
