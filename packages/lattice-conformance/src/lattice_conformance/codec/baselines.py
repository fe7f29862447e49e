"""What a user has without this codec, on the same voxel set: LZMA, order-0, Draco.

* LZMA: ``xz -9e`` (the .xz container, preset 9 | extreme) of the octree byte stream;
* order-0: the empirical entropy of that byte stream (a bound, not a file);
* Draco: DracoPy's point-cloud encoder at the level's quantisation bits, compression
  level 10 (``None`` when DracoPy is not installed; ``draco_lossless`` says whether
  its decode gave back the identical voxel set).
"""

from __future__ import annotations

import lzma
from typing import Any

import numpy as np

from lattice_conformance.codec.octree import build_octree, octree_stream

__all__ = ["baselines"]


def _order0_bits(stream: bytes) -> float:
    h = np.bincount(np.frombuffer(stream, np.uint8), minlength=256)
    nz = h[h > 0]
    return float(-(nz * np.log2(nz / nz.sum())).sum()) if len(nz) else 0.0


def _draco(voxels: np.ndarray, levels: int) -> tuple[int | None, bool]:
    try:
        import DracoPy
    except ImportError:
        return None, False
    if len(voxels) == 0:
        return None, False
    blob = DracoPy.encode(
        voxels.astype(np.float32),
        quantization_bits=levels,
        compression_level=10,
        quantization_range=float((1 << levels) - 1),
        quantization_origin=[0.0, 0.0, 0.0],
    )
    back = np.asarray(DracoPy.decode(blob).points)
    got = np.unique(np.rint(back).astype(np.int64), axis=0)
    want = np.unique(voxels.astype(np.int64), axis=0)
    return len(blob), bool(got.shape == want.shape and np.array_equal(got, want))


def baselines(voxels: np.ndarray, levels: int) -> dict[str, Any]:
    """Bytes (bits for order-0) of every baseline for ``voxels`` at ``levels``."""
    _, codes = build_octree(np.asarray(voxels, dtype=np.int64), levels)
    stream = octree_stream(codes)
    xz = len(lzma.compress(stream, format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME))
    draco, lossless = _draco(np.asarray(voxels), levels)
    return {
        "octree_bytes": len(stream),
        "xz_bytes": xz,
        "order0_bits": _order0_bits(stream),
        "draco_bytes": draco,
        "draco_lossless": lossless,
    }
