"""``sparse_crop`` and ``sparse_to_dense`` on torch: spconv's grid bounds and ``dense()``.

Both are one vectorised mask or scatter over all rows (no loop over rows), on
whatever device the value lives, so the generic path is also the CUDA path:
a crop is a compare, a ``nonzero`` compaction (one device-to-host sync for the
row count) and two gathers; the dense hand-off is one ``index_put`` into
zeros.  Gradients flow through both (the crop's backward scatters into the
kept rows, the dense op's gathers the occupied cells).
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.frontend import Attrs, check_crop_box, dense_axes, implement
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.ops._common import require_sparse
from torch_lattice.sparse import SparseTensor, Support

__all__ = ["sparse_crop", "sparse_to_dense"]


def _sparse_crop(input: Any, attrs: Attrs) -> SparseTensor:
    x = require_sparse(input, "sparse_crop")
    lower, upper = attrs["lower"], attrs["upper"]
    check_crop_box(lower, upper, x.stride)
    coords = x.coords
    lo = torch.tensor(lower, dtype=coords.dtype, device=coords.device)
    hi = torch.tensor(upper, dtype=coords.dtype, device=coords.device)
    space = coords[:, 1:]
    keep = ((space >= lo) & (space < hi)).all(dim=1)
    if bool(keep.all()):
        return x  # every row inside: the same value (and its kernel-map cache)
    rows = keep.nonzero().squeeze(1)
    support = Support(coords.index_select(0, rows).contiguous(), x.stride)
    return SparseTensor._make(support, x.feats.index_select(0, rows))


sparse_crop: sig.SparseCrop[SparseTensor] = implement(
    "sparse_crop", _sparse_crop, around=traced("sparse_crop")
)


def _sparse_to_dense(input: Any, attrs: Attrs) -> torch.Tensor:
    x = require_sparse(input, "sparse_to_dense")
    shape = attrs["spatial_shape"]
    batch, layout = attrs["batch_size"], attrs["layout"]
    feats = x.feats
    cells = x.support.logical  # (N, 4) int64: batch, x/sx, y/sy, z/sz
    limit = torch.tensor((batch, *shape), dtype=cells.dtype, device=cells.device)
    outside = ((cells < 0) | (cells >= limit)).any(dim=1)
    if bool(outside.any()):
        row = int(outside.nonzero()[0].item())
        raise ValueError(
            f"sparse_to_dense: row {row} at {x.coords[row].tolist()} (stride {x.stride}) lies "
            f"outside batch_size {batch} x spatial_shape {shape} (x, y, z); crop the value to "
            "the grid first (sparse_crop) or declare the grid it lives on"
        )
    channels = int(feats.shape[1])
    grid = feats.new_zeros((batch, *shape, channels))
    index = (cells[:, 0], cells[:, 1], cells[:, 2], cells[:, 3])
    grid = grid.index_put(index, feats)  # (B, X, Y, Z, C)
    position = {"b": 0, "x": 1, "y": 2, "z": 3, "c": 4}
    axes = dense_axes(layout)
    if "cz" in axes:  # b_cz_y_x: (B, C, Z, Y, X) with channel and depth merged
        out = grid.permute(0, 4, 3, 2, 1)
        return out.reshape(batch, channels * shape[2], shape[1], shape[0])
    return grid.permute(*(position[a] for a in axes)).contiguous()


sparse_to_dense: sig.SparseToDense[SparseTensor, torch.Tensor] = implement(
    "sparse_to_dense", _sparse_to_dense, around=traced("sparse_to_dense")
)
