"""Points to voxels and back: ``voxelize`` and ``devoxelize``.

Both start from ``u = points / voxel_size`` computed in f32 (a true division,
not a multiplication by the reciprocal, so every runtime gets the same
``floor``), in continuous voxel units.

``voxelize`` puts each point in voxel ``floor(u)`` of its batch item and merges
the features of the points that share a voxel (mean, sum or max, in f32).  The
result is a stride-1 sparse value with one row per occupied voxel, rows sorted
by (batch, x, y, z).

``devoxelize`` reads a sparse value at stride ``t`` back at points.  Nearest:
the voxel containing the point, logical ``floor(u / t)`` (evaluated exactly as
``floor(floor(u) / t)`` in integers).  Trilinear: with ``g = u / t - 0.5``,
``b = floor(g)`` and ``f = g - b``, the eight voxels ``b + {0, 1}^3`` weigh
``prod(f or 1 - f)``; voxels the value lacks are dropped and the remaining
weights renormalised.  A point whose present corners carry no weight at all
reads zeros.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from lattice_contract.options import as_enum, positive_float
from lattice_contract.schema import Interpolation, VoxelReduction

from mlx_lattice.coords import CoordinateRangeError, KeySpace, scalar_int
from mlx_lattice.ops.algebra import lookup_rows
from mlx_lattice.ops.feature import features_array
from mlx_lattice.sparse import SparseTensor

__all__ = ["devoxelize", "voxelize"]

_INT32_RANGE = 2.0**31


def _points_and_batch(points: object, batch: object, op: str) -> tuple[mx.array, mx.array]:
    """Validate ``points`` (P, 3) float and ``batch`` (P,) int32 >= 0; points in f32."""
    if not isinstance(points, mx.array) or points.dtype not in (
        mx.float32,
        mx.float16,
        mx.bfloat16,
    ):
        raise TypeError(f"{op}: points must be a float mx.array of shape (P, 3)")
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"{op}: points must have shape (P, 3), got {tuple(points.shape)}")
    if not isinstance(batch, mx.array) or batch.dtype != mx.int32:
        raise TypeError(
            f"{op}: batch must be an int32 mx.array of shape (P,) (one batch index per point)"
        )
    if tuple(batch.shape) != (points.shape[0],):
        raise ValueError(
            f"{op}: batch has shape {tuple(batch.shape)} but there are {points.shape[0]} "
            f"points; it must be ({points.shape[0]},)"
        )
    if points.shape[0] and scalar_int(mx.min(batch)) < 0:
        raise ValueError(f"{op}: batch indices must be >= 0")
    p = points.astype(mx.float32)
    if points.shape[0] and not bool(mx.all(mx.isfinite(p)).item()):
        raise ValueError(f"{op}: points contain NaN or infinity; every point must be finite")
    return p, batch


def voxelize(
    points: mx.array,
    features: mx.array,
    batch: mx.array,
    *,
    voxel_size: float,
    reduction: VoxelReduction | str = VoxelReduction.mean,
) -> SparseTensor:
    """Merge points into stride-1 voxels ``floor(points / voxel_size)`` per batch item.

    ``points`` (P, 3) f32, ``features`` (P, C) float, ``batch`` (P,) int32.
    The features of points sharing a voxel are reduced in f32 and stored in the
    features' dtype.
    """
    size = positive_float(voxel_size, "voxel_size", "voxelize")
    p, b = _points_and_batch(points, batch, "voxelize")
    feats = features_array(features, "voxelize", min_ndim=2)
    if feats.ndim != 2 or feats.shape[0] != p.shape[0]:
        raise ValueError(
            f"voxelize: features must have shape ({p.shape[0]}, C) (one row per point), "
            f"got {tuple(feats.shape)}"
        )
    mode = as_enum(reduction, VoxelReduction, "reduction")
    channels = feats.shape[1]
    if p.shape[0] == 0:
        return SparseTensor._from_parts(
            mx.zeros((0, 4), dtype=mx.int32), mx.zeros((0, channels), dtype=feats.dtype), (1, 1, 1)
        )
    cell = mx.floor(p / size)
    if not bool(mx.all((cell >= -_INT32_RANGE) & (cell < _INT32_RANGE)).item()):
        raise ValueError(
            "voxelize: points / voxel_size falls outside the int32 coordinate range; "
            "use a larger voxel_size or translate the points"
        )
    coords = mx.concatenate([b[:, None], cell.astype(mx.int32)], axis=1)
    unique, inverse = _unique_rows(coords)
    count = unique.shape[0]
    f32 = feats.astype(mx.float32)
    if mode is VoxelReduction.max:
        out = mx.full((count, channels), -mx.inf, dtype=mx.float32).at[inverse].maximum(f32)
    else:
        out = mx.zeros((count, channels), dtype=mx.float32).at[inverse].add(f32)
        if mode is VoxelReduction.mean:
            ones = mx.ones((p.shape[0],), dtype=mx.float32)
            n = mx.zeros((count,), dtype=mx.float32).at[inverse].add(ones)
            out = out / n[:, None]
    return SparseTensor._from_parts(unique, out.astype(feats.dtype), (1, 1, 1))


def _unique_rows(coords: mx.array) -> tuple[mx.array, mx.array]:
    """Distinct rows sorted by (batch, x, y, z), and each input row's index among them."""
    try:
        space = KeySpace.of(coords)
    except CoordinateRangeError:
        host, inv = np.unique(np.asarray(coords), axis=0, return_inverse=True)
        return mx.array(host.astype(np.int32)), mx.array(inv.reshape(-1).astype(np.int32))
    keys = space.pack(coords)
    order = mx.argsort(keys)
    srt = keys[order]
    starts = mx.concatenate([mx.array([True]), srt[1:] != srt[:-1]])
    segment = mx.cumsum(starts.astype(mx.int32)) - 1
    count = scalar_int(segment[-1]) + 1
    unique_keys = mx.zeros((count,), dtype=mx.int64).at[segment].maximum(srt)
    inverse = mx.zeros((coords.shape[0],), dtype=mx.int32).at[order].add(segment)
    return space.unpack(unique_keys), inverse


def devoxelize(
    input: SparseTensor,
    points: mx.array,
    batch: mx.array,
    *,
    voxel_size: float,
    interpolation: Interpolation | str = Interpolation.trilinear,
) -> mx.array:
    """Read ``input``'s features at points: dense ``(P, C)`` in the input's dtype.

    ``input`` may sit at any stride ``t``; its voxels are ``t * voxel_size`` wide.
    See the module note for the nearest and trilinear rules.
    """
    if not isinstance(input, SparseTensor):
        raise TypeError(f"devoxelize: input must be a SparseTensor, got {type(input).__name__}")
    size = positive_float(voxel_size, "voxel_size", "devoxelize")
    p, b = _points_and_batch(points, batch, "devoxelize")
    mode = as_enum(interpolation, Interpolation, "interpolation")
    n_points, channels = p.shape[0], input.num_channels
    if n_points == 0 or input.num_rows == 0:
        return mx.zeros((n_points, channels), dtype=input.dtype)
    u = p / size
    stride = mx.array(input.stride, dtype=mx.float32)
    feats = input.feats.astype(mx.float32)
    if mode is Interpolation.nearest:
        cell = _to_int(mx.floor(u))
        logical = mx.floor_divide(cell, mx.array(input.stride, dtype=mx.int64))
        found, row = lookup_rows(input, _with_batch(b, logical))
        gathered = feats[row]
        out = mx.where(found[:, None], gathered, mx.zeros_like(gathered))
        return out.astype(input.dtype)
    g = u / stride - 0.5
    base_f = mx.floor(g)
    frac = g - base_f
    base = _to_int(base_f)
    corners = mx.array([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)], dtype=mx.int64)
    logical = base[:, None, :] + corners[None, :, :]  # (P, 8, 3)
    found, row = lookup_rows(input, _with_batch(b[:, None] * mx.ones((1, 8), mx.int32), logical))
    bits = corners.astype(mx.bool_)
    weights = mx.prod(mx.where(bits[None], frac[:, None, :], 1.0 - frac[:, None, :]), axis=-1)
    weights = mx.where(found, weights, 0.0)  # (P, 8)
    total = mx.sum(weights, axis=1, keepdims=True)
    acc = mx.zeros((n_points, channels), dtype=mx.float32)
    for k in range(8):  # eight corners: a fixed loop, each step vectorised over points
        term = weights[:, k : k + 1] * feats[row[:, k]]
        acc = acc + mx.where(found[:, k : k + 1], term, 0.0)  # absent rows never leak
    safe = mx.where(total > 0, total, 1.0)
    out = mx.where(total > 0, acc / safe, 0.0)
    return out.astype(input.dtype)


def _to_int(values: mx.array) -> mx.array:
    """Integral f32 values as int64; beyond int32 they are clamped (they can match no row)."""
    limit = 2.0**32
    return mx.clip(values, -limit, limit).astype(mx.int64)


def _with_batch(batch: mx.array, logical: mx.array) -> mx.array:
    """Rows ``(batch, x, y, z)`` from a batch column and logical spatial coordinates."""
    return mx.concatenate([batch.astype(mx.int64)[..., None], logical], axis=-1)
