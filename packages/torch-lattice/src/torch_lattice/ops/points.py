"""Points to voxels and back: ``voxelize`` and ``devoxelize``.

Both start from ``u = points / voxel_size`` computed in f32 by a true division
(not a multiplication by the reciprocal), so every runtime floors the same
values.

``voxelize`` puts each point in voxel ``floor(u)`` of its batch item and
reduces the features of points sharing a voxel (mean, sum or max, in f32).
The result is a stride-1 value with rows sorted by (batch, x, y, z).

``devoxelize`` reads a value at stride ``t`` back at points.  Nearest: the
voxel containing the point, logical ``floor(floor(u) / t)`` in integers (equal
to ``floor(u / t)``).  Trilinear: ``g = u / t - 0.5``, ``b = floor(g)``,
``f = g - b``; the eight voxels ``b + {0,1}^3`` weigh ``prod(f or 1 - f)``;
absent voxels are dropped and the remaining weights renormalised; a point
whose present corners carry no weight reads zeros.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.options import positive_float
from lattice_contract.schema import Interpolation, VoxelReduction

from torch_lattice._trace import traced
from torch_lattice.coords import Packing, bounds
from torch_lattice.ops._common import as_enum, compute_dtype, require_sparse
from torch_lattice.sparse import FLOAT_DTYPES, SparseTensor, Support

__all__ = ["devoxelize", "voxelize"]

_INT32_LIMIT = 2.0**31


def _points_and_batch(points: Any, batch: Any, op: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(points, torch.Tensor) or points.dtype != torch.float32:
        raise TypeError(f"{op}: points must be a float32 torch.Tensor of shape (P, 3)")
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"{op}: points must have shape (P, 3), got {tuple(points.shape)}")
    if not isinstance(batch, torch.Tensor) or batch.dtype != torch.int32:
        raise TypeError(f"{op}: batch must be an int32 torch.Tensor of shape (P,)")
    if tuple(batch.shape) != (points.shape[0],):
        raise ValueError(
            f"{op}: batch must have shape ({points.shape[0]},) (one index per point), "
            f"got {tuple(batch.shape)}"
        )
    if batch.device != points.device:
        raise ValueError(f"{op}: points are on {points.device} but batch on {batch.device}")
    if batch.numel() and bool((batch < 0).any()):
        raise ValueError(f"{op}: batch indices must be >= 0")
    if not bool(torch.isfinite(points).all()):
        raise ValueError(f"{op}: points must be finite (found NaN or inf)")
    return points, batch


def _scaled(points: torch.Tensor, size: float) -> torch.Tensor:
    return points / torch.tensor(size, dtype=torch.float32, device=points.device)


@traced("voxelize")
def voxelize(
    points: torch.Tensor,
    features: torch.Tensor,
    batch: torch.Tensor,
    *,
    voxel_size: float,
    reduction: VoxelReduction | str = VoxelReduction.mean,
) -> SparseTensor:
    """Merge points into stride-1 voxels ``floor(points / voxel_size)`` per batch item."""
    size = positive_float(voxel_size, "voxel_size", "voxelize")
    p, b = _points_and_batch(points, batch, "voxelize")
    if not isinstance(features, torch.Tensor) or features.dtype not in FLOAT_DTYPES:
        raise TypeError("voxelize: features must be a float torch.Tensor of shape (P, C)")
    if features.ndim != 2 or features.shape[0] != p.shape[0]:
        raise ValueError(
            f"voxelize: features must have shape ({p.shape[0]}, C), got {tuple(features.shape)}"
        )
    if features.device != p.device:
        raise ValueError("voxelize: features and points must be on one device")
    mode = as_enum(reduction, VoxelReduction, "reduction")
    channels = int(features.shape[1])
    if p.shape[0] == 0:
        empty = torch.empty(0, 4, dtype=torch.int64, device=p.device)
        return SparseTensor._make(
            Support.from_logical(empty, (1, 1, 1)),
            torch.zeros(0, channels, dtype=features.dtype, device=p.device),
        )
    cell = torch.floor(_scaled(p, size))
    if bool(((cell < -_INT32_LIMIT) | (cell >= _INT32_LIMIT)).any()):
        raise ValueError(
            "voxelize: points / voxel_size falls outside the int32 coordinate range; "
            "use a larger voxel_size or translate the points"
        )
    logical = torch.cat([b.to(torch.int64)[:, None], cell.to(torch.int64)], dim=1)
    lo, hi = bounds(logical)
    packing = Packing.covering(lo, hi, margin=0)
    keys, inverse = torch.unique(packing.pack(logical), sorted=True, return_inverse=True)
    count = int(keys.numel())
    dtype = compute_dtype(features.dtype)
    f = features.to(dtype)
    if mode is VoxelReduction.max:
        idx = inverse[:, None].expand(-1, channels)
        out = torch.zeros(count, channels, dtype=dtype, device=p.device).scatter_reduce(
            0, idx, f, "amax", include_self=False
        )
    else:
        out = torch.zeros(count, channels, dtype=dtype, device=p.device).index_add(0, inverse, f)
        if mode is VoxelReduction.mean:
            n = torch.bincount(inverse, minlength=count).to(dtype)
            out = out / n[:, None]
    support = Support.from_logical(packing.unpack(keys), (1, 1, 1))
    return SparseTensor._make(support, out.to(features.dtype))


_CORNERS = tuple((i >> 2 & 1, i >> 1 & 1, i & 1) for i in range(8))


@traced("devoxelize")
def devoxelize(
    input: SparseTensor,
    points: torch.Tensor,
    batch: torch.Tensor,
    *,
    voxel_size: float,
    interpolation: Interpolation | str = Interpolation.trilinear,
) -> torch.Tensor:
    """Read ``input``'s features at points: dense (P, C) in the input's dtype."""
    x = require_sparse(input, "devoxelize")
    size = positive_float(voxel_size, "voxel_size", "devoxelize")
    p, b = _points_and_batch(points, batch, "devoxelize")
    mode = as_enum(interpolation, Interpolation, "interpolation")
    if p.device != x.device:
        raise ValueError(f"devoxelize: points are on {p.device}, the input on {x.device}")
    n_points, channels = int(p.shape[0]), x.num_channels
    dtype = compute_dtype(x.dtype)
    if n_points == 0 or x.num_rows == 0:
        zeros = torch.zeros(n_points, channels, dtype=x.dtype, device=p.device)
        return zeros + 0 * x.feats.sum()  # keeps the graph connected for autograd
    u = _scaled(p, size)
    table = x.support.table
    feats = x.feats.to(dtype)
    b64 = b.to(torch.int64)[:, None]
    if mode is Interpolation.nearest:
        cell = torch.floor(u).clamp(-(2.0**32), 2.0**32).to(torch.int64)
        stride = torch.tensor(x.stride, dtype=torch.int64, device=p.device)
        logical = torch.div(cell, stride, rounding_mode="floor")
        row = table.find(torch.cat([b64, logical], dim=1))
        found = row >= 0
        gathered = feats.index_select(0, row.clamp(min=0))
        return torch.where(found[:, None], gathered, torch.zeros_like(gathered)).to(x.dtype)
    stride_f = torch.tensor(x.stride, dtype=torch.float32, device=p.device)
    g = u / stride_f - 0.5
    base_f = torch.floor(g)
    frac = g - base_f
    base = base_f.clamp(-(2.0**32), 2.0**32).to(torch.int64)
    weights = []
    rows = []
    for corner in _CORNERS:  # eight corners: a fixed loop, each step vectorised over points
        c = torch.tensor(corner, dtype=torch.int64, device=p.device)
        rows.append(table.find(torch.cat([b64, base + c], dim=1)))
        sel = torch.tensor(corner, dtype=torch.bool, device=p.device)
        weights.append(torch.where(sel, frac, 1.0 - frac).prod(dim=1))
    row = torch.stack(rows, dim=1)
    found = row >= 0
    w = torch.where(found, torch.stack(weights, dim=1), 0.0).to(dtype)
    total = w.sum(dim=1, keepdim=True)
    acc = torch.zeros(n_points, channels, dtype=dtype, device=p.device)
    for k in range(8):
        term = w[:, k : k + 1] * feats.index_select(0, row[:, k].clamp(min=0))
        acc = acc + torch.where(found[:, k : k + 1], term, torch.zeros_like(term))
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = torch.where(total > 0, acc / safe, torch.zeros_like(acc))
    return out.to(x.dtype)
