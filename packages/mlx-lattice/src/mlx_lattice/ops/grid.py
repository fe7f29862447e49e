"""``sparse_crop`` and ``sparse_to_dense`` on MLX: spconv's grid bounds and ``dense()``.

Both are vectorised over all rows.  The crop is a compare and a compaction;
MLX has no compaction primitive, so the kept positions come from
:func:`mlx_lattice.coords.flat_nonzero` (one host synchronisation for the row
count, as every support-changing op has).  The dense hand-off is one scatter
into zeros.  The same code runs on every MLX device; there is no separate
CUDA kernel for either (see docs/semantics.md for the cost).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from lattice_contract.frontend import Attrs, check_crop_box, dense_axes, implement
from lattice_contract.frontend import signatures as sig

from mlx_lattice.coords import flat_nonzero
from mlx_lattice.sparse import SparseTensor

__all__ = ["sparse_crop", "sparse_to_dense"]


def _require_sparse(value: Any, op: str) -> SparseTensor:
    if not isinstance(value, SparseTensor):
        raise TypeError(
            f"{op}: input must be an mlx_lattice.SparseTensor, got {type(value).__name__}"
        )
    return value


def _sparse_crop(input: Any, attrs: Attrs) -> SparseTensor:
    x = _require_sparse(input, "sparse_crop")
    lower, upper = attrs["lower"], attrs["upper"]
    check_crop_box(lower, upper, x.stride)
    space = x.coords[:, 1:]
    lo = mx.array(lower, dtype=mx.int32)
    hi = mx.array(upper, dtype=mx.int32)
    keep = mx.all(mx.logical_and(space >= lo, space < hi), axis=1)
    if bool(mx.all(keep).item()):
        return x  # every row inside: the same value (and its map cache)
    rows = flat_nonzero(keep)
    return SparseTensor._from_parts(x.coords[rows], x.feats[rows], x.stride)


sparse_crop: sig.SparseCrop[SparseTensor] = implement("sparse_crop", _sparse_crop)


def _sparse_to_dense(input: Any, attrs: Attrs) -> mx.array:
    x = _require_sparse(input, "sparse_to_dense")
    shape = attrs["spatial_shape"]
    batch, layout = attrs["batch_size"], attrs["layout"]
    cells = x.logical_coords  # (N, 4) int32: batch, x/sx, y/sy, z/sz
    limit = mx.array((batch, *shape), dtype=mx.int32)
    outside = mx.any(mx.logical_or(cells < 0, cells >= limit), axis=1)
    if bool(mx.any(outside).item()):
        row = int(np.flatnonzero(np.asarray(outside))[0])
        raise ValueError(
            f"sparse_to_dense: row {row} at {np.asarray(x.coords[row]).tolist()} (stride "
            f"{x.stride}) lies outside batch_size {batch} x spatial_shape {shape} (x, y, z); "
            "crop the value to the grid first (sparse_crop) or declare the grid it lives on"
        )
    feats = x.feats
    channels = int(feats.shape[1])
    grid = mx.zeros((batch, *shape, channels), dtype=feats.dtype)
    grid[cells[:, 0], cells[:, 1], cells[:, 2], cells[:, 3]] = feats  # (B, X, Y, Z, C)
    position = {"b": 0, "x": 1, "y": 2, "z": 3, "c": 4}
    axes = dense_axes(layout)
    if "cz" in axes:  # b_cz_y_x: (B, C, Z, Y, X) with channel and depth merged
        out = mx.transpose(grid, (0, 4, 3, 2, 1))
        return mx.reshape(out, (batch, channels * shape[2], shape[1], shape[0]))
    return mx.transpose(grid, tuple(position[a] for a in axes))


sparse_to_dense: sig.SparseToDense[SparseTensor, mx.array] = implement(
    "sparse_to_dense", _sparse_to_dense
)
