"""MLX array code of ``voxelize`` and ``devoxelize`` (upstream's points-to-voxels forms).

What they compute, and their keywords, are declared with torch's in
:mod:`lattice_contract.frontend.ops` (``help(mlx_lattice.ops.voxelize)``).  Occupied
cells are deduplicated by sorting packed keys (:class:`mlx_lattice.coords.KeySpace`).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import Interpolation, VoxelReduction
from lattice_contract.frontend import DevoxelizeInputs, PointPrologue, VoxelizeInputs, implement
from lattice_contract.frontend import signatures as sig

from mlx_lattice.coords import CoordinateRangeError, KeySpace, scalar_int
from mlx_lattice.ops.algebra import lookup_rows
from mlx_lattice.sparse import FEATURE_DTYPES, SparseTensor

__all__ = ["devoxelize", "voxelize"]


class _Points(PointPrologue[mx.array, SparseTensor]):
    """The shared point prologue over MLX arrays (one memory: no device check)."""

    def single_batch(self, points: mx.array) -> mx.array:
        """Batch index 0 for every point."""
        return mx.zeros((int(points.shape[0]),), dtype=mx.int32)

    def value_facts(self, points: mx.array, batch: mx.array) -> tuple[bool, bool]:
        """Negative batch and finite points, read back in one host sync."""
        if points.shape[0] == 0:
            return False, True
        negative, finite = np.asarray(
            mx.stack([mx.min(batch) < 0, mx.all(mx.isfinite(points))])
        ).tolist()
        return bool(negative), bool(finite)


_POINTS = _Points(mx.array, mx.int32, SparseTensor, FEATURE_DTYPES)


def _cells(points: mx.array, size: tuple[float, ...], origin: tuple[float, ...]) -> mx.array:
    """``(p - origin) / voxel_size`` in f32, per axis."""
    return (points - mx.array(origin, dtype=mx.float32)) / mx.array(size, dtype=mx.float32)


def _voxelize(args: VoxelizeInputs[mx.array]) -> SparseTensor:
    p, b, feats, (size, org), out_stride, mode = args
    n, channels = int(p.shape[0]), feats.shape[1]
    if n == 0:
        return SparseTensor._from_parts(
            mx.zeros((0, 4), dtype=mx.int32), mx.zeros((0, channels), dtype=feats.dtype), out_stride
        )
    cell = mx.floor(_cells(p, size, org))
    scaled = cell * mx.array(out_stride, dtype=mx.float32)
    limit = _POINTS.rules.cell_limit
    _POINTS.rules.check_cells(bool(mx.all((scaled >= -limit) & (scaled < limit)).item()))
    coords = mx.concatenate([b[:, None], cell.astype(mx.int32)], axis=1)
    unique, inverse = _unique_rows(coords)
    count = unique.shape[0]
    # First-occurrence order: rank the distinct cells by the first point reaching them.
    first = mx.full((count,), n, dtype=mx.int32).at[inverse].minimum(mx.arange(n, dtype=mx.int32))
    order = mx.argsort(first)
    rank = mx.zeros((count,), dtype=mx.int32).at[order].add(mx.arange(count, dtype=mx.int32))
    inverse = rank[inverse]
    unique = unique[order]
    f32 = feats.astype(mx.float32)
    if mode is VoxelReduction.max:
        out = mx.full((count, channels), -mx.inf, dtype=mx.float32).at[inverse].maximum(f32)
    else:
        out = mx.zeros((count, channels), dtype=mx.float32).at[inverse].add(f32)
        if mode is VoxelReduction.mean:
            ones = mx.ones((n,), dtype=mx.float32)
            per = mx.zeros((count,), dtype=mx.float32).at[inverse].add(ones)
            out = out / per[:, None]
    physical = unique * mx.array((1, *out_stride), dtype=mx.int32)
    return SparseTensor._from_parts(physical, out.astype(feats.dtype), out_stride)


voxelize: sig.Voxelize[SparseTensor, mx.array] = implement("voxelize", _POINTS.voxelize(_voxelize))


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
    # One sorted position per segment, then its key: MLX's CUDA scatter takes no int64.
    rows = mx.arange(int(srt.shape[0]), dtype=mx.int32)
    last = mx.zeros((count,), dtype=mx.int32).at[segment].maximum(rows)
    unique_keys = srt[last]
    inverse = mx.zeros((coords.shape[0],), dtype=mx.int32).at[order].add(segment)
    return space.unpack(unique_keys), inverse


def _devoxelize(args: DevoxelizeInputs[mx.array, SparseTensor]) -> mx.array:
    p, b, voxels, n, (size, org), mode = args
    n_points, channels = int(p.shape[0]), voxels.num_channels
    if n == 0 or voxels.num_rows == 0:
        return mx.zeros((n_points, channels), dtype=voxels.dtype)
    u = _cells(p[:n], size, org)
    b = b[:n]
    feats = voxels.feats.astype(mx.float32)
    if mode is Interpolation.nearest:
        cell = _to_int(mx.floor(u + 0.5))
        found, row = lookup_rows(voxels, _with_batch(b, cell))
        gathered = feats[row]
        out = mx.where(found[:, None], gathered, mx.zeros_like(gathered))
    else:
        g = u - 0.5 if mode is Interpolation.trilinear else u
        base_f = mx.floor(g)
        frac = g - base_f
        base = _to_int(base_f)
        corners = mx.array([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)], dtype=mx.int64)
        logical = base[:, None, :] + corners[None, :, :]  # (P, 8, 3)
        batch8 = b[:, None] * mx.ones((1, 8), mx.int32)
        found, row = lookup_rows(voxels, _with_batch(batch8, logical))
        bits = corners.astype(mx.bool_)
        weights = mx.prod(mx.where(bits[None], frac[:, None, :], 1.0 - frac[:, None, :]), axis=-1)
        weights = mx.where(found, weights, 0.0)  # (P, 8)
        acc = mx.zeros((n, channels), dtype=mx.float32)
        for k in range(8):  # eight corners: a fixed loop, each step vectorised over points
            term = weights[:, k : k + 1] * feats[row[:, k]]
            acc = acc + mx.where(found[:, k : k + 1], term, 0.0)  # absent rows never leak
        if mode is Interpolation.trilinear:
            total = mx.sum(weights, axis=1, keepdims=True)
            out = mx.where(total > 0, acc / mx.where(total > 0, total, 1.0), 0.0)
        else:
            out = acc
    if n < n_points:
        out = mx.concatenate([out, mx.zeros((n_points - n, channels), dtype=out.dtype)], axis=0)
    return out.astype(voxels.dtype)


devoxelize: sig.Devoxelize[SparseTensor, mx.array] = implement(
    "devoxelize", _POINTS.devoxelize(_devoxelize)
)


def _to_int(values: mx.array) -> mx.array:
    """Integral f32 values as int64; beyond int32 they are clamped (they can match no row)."""
    limit = 2.0**32
    return mx.clip(values, -limit, limit).astype(mx.int64)


def _with_batch(batch: mx.array, logical: mx.array) -> mx.array:
    """Rows ``(batch, x, y, z)`` from a batch column and logical spatial coordinates."""
    return mx.concatenate([batch.astype(mx.int64)[..., None], logical], axis=-1)
