"""What a user has without this codec, on the same voxel set: LZMA, order-0, Draco.

* LZMA: ``xz -9e`` (the .xz container, preset 9 | extreme) of the octree byte stream;
* order-0: the empirical entropy of that byte stream (a bound, not a file);
* Draco: DracoPy's point-cloud encoder at the level's quantisation bits, compression
  level 10 (``None`` when DracoPy is not installed; ``draco_lossless`` says whether
  its decode gave back the identical voxel set).
"""

from __future__ import annotations

import lzma
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from lattice_conformance.codec.octree import build_octree, octree_stream

if TYPE_CHECKING:
    from lattice_conformance.codec.neural import NeuralModel

__all__ = ["DRACO_MISSING", "baselines", "codec_measurement", "format_bits_per_voxel"]

DRACO_MISSING = "n/a (DracoPy not installed: pip install DracoPy)"


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


def codec_measurement(
    voxels: np.ndarray,
    levels: int,
    model: NeuralModel | None = None,
    *,
    cross_check: NeuralModel | None = None,
) -> dict[str, Any]:
    """Encode, decode (checked) and time the codec, with every baseline, in bits per voxel.

    The one place both commands (``geometry-codec encode`` and
    ``geometry-profile``) get the numbers they print next to each other.
    The codec's torch model runs with one thread (see :class:`NeuralModel`).
    """
    from lattice_conformance.codec.codec import decode_voxels, encode_voxels

    vox = np.unique(np.asarray(voxels, dtype=np.int64).reshape(-1, 3), axis=0)
    start = time.perf_counter()
    result = encode_voxels(vox, levels, model, cross_check=cross_check)
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    back, _ = decode_voxels(result.data, model)
    decode_s = time.perf_counter() - start
    if not np.array_equal(np.unique(back, axis=0), vox):
        raise RuntimeError("the codec did not decode the voxel set it encoded (a codec bug)")
    base = baselines(vox, levels)
    n = max(len(vox), 1)
    draco = base["draco_bytes"]
    return {
        "voxels": len(vox),
        "bytes": len(result.data),
        "mode": result.mode,
        "methods": result.methods,
        "logit_fixes": result.fixes,
        "bits_per_voxel": 8 * len(result.data) / n,
        "xz_bits_per_voxel": 8 * base["xz_bytes"] / n,
        "order0_bits_per_voxel": base["order0_bits"] / n,
        "octree_bits_per_voxel": 8 * base["octree_bytes"] / n,
        "draco_bits_per_voxel": None if draco is None else 8 * draco / n,
        "draco_lossless": base["draco_lossless"],
        "encode_s": encode_s,
        "decode_s": decode_s,
        "encode_voxels_per_s": len(vox) / encode_s if encode_s else None,
        "decode_voxels_per_s": len(vox) / decode_s if decode_s else None,
        "data": result.data,
    }


def format_bits_per_voxel(m: dict[str, Any]) -> str:
    """The comparison line(s) of a :func:`codec_measurement`."""
    draco = m["draco_bits_per_voxel"]
    return (
        f"bits per occupied voxel: coded {m['bits_per_voxel']:.3f}  "
        f"xz -9e {m['xz_bits_per_voxel']:.3f}  order-0 {m['order0_bits_per_voxel']:.3f}  "
        f"octree {m['octree_bits_per_voxel']:.3f}  draco "
        + (DRACO_MISSING if draco is None else f"{draco:.3f}")
        + f"\nencode {m['encode_s']:.2f} s ({m['encode_voxels_per_s'] or 0:.0f} voxels/s), "
        f"decode {m['decode_s']:.2f} s ({m['decode_voxels_per_s'] or 0:.0f} voxels/s)"
    )
