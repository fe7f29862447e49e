"""Points to voxels and back: ``voxelize`` and ``devoxelize`` (upstream's forms).

Both start from ``u = (points - origin) / voxel_size`` per axis, computed in
f32 by a true division (not a multiplication by the reciprocal), so every
runtime floors the same values.  Only the first ``active_rows`` points take
part; devoxelize gives zeros for the points past its active count.

``voxelize`` puts each point in the cell ``floor(u)`` of its batch item and
reduces the features of points sharing a cell (mean, sum or max, in f32).
The result has stride ``stride``, physical coordinates ``floor(u) * stride``,
and its rows in first-occurrence order (the order in which the points first
reach each cell).

``devoxelize`` reads a value back at points, ``u`` being in units of the
value's cells (logical coordinates):

- ``nearest``: the cell ``floor(u + 0.5)``;
- ``linear``: the eight cells ``floor(u) + {0,1}^3`` weighted by
  ``prod(f or 1 - f)`` with ``f = u - floor(u)``; absent cells are dropped and
  the weights are **not** renormalised;
- ``trilinear`` (Lattice's extra): cell-centred corners, ``g = u - 0.5``,
  ``b = floor(g)``, the eight cells ``b + {0,1}^3`` weighted from
  ``g - b``, renormalised over the present cells; a point whose present
  corners carry no weight reads zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import torch
from lattice_contract import api_ops as api
from lattice_contract import shared_errors
from lattice_contract.api_checks import active_count, check_point_values
from lattice_contract.options import voxel_grid
from lattice_contract.schema import Interpolation, VoxelReduction

from torch_lattice._trace import traced
from torch_lattice.coords import Packing, bounds
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.sparse import FLOAT_DTYPES, SparseTensor, Support

__all__ = ["devoxelize", "voxelize"]

_INT32_LIMIT = 2.0**31


def _points_and_batch(points: Any, batch: Any, op: str) -> tuple[torch.Tensor, torch.Tensor]:
    shared_errors.check_points_and_batch(op, points, batch, torch.Tensor)
    assert isinstance(points, torch.Tensor) and isinstance(batch, torch.Tensor)
    if batch.device != points.device:
        raise ValueError(f"{op}: points are on {points.device} but batch on {batch.device}")
    check_point_values(
        op,
        batch_negative=bool(batch.numel()) and bool((batch < 0).any()),
        points_finite=bool(torch.isfinite(points).all()),
    )
    return points, batch


def _cells(points: torch.Tensor, size: Sequence[float], origin: Sequence[float]) -> torch.Tensor:
    """``(p - origin) / voxel_size`` in f32, per axis."""
    o = torch.tensor(origin, dtype=torch.float32, device=points.device)
    v = torch.tensor(size, dtype=torch.float32, device=points.device)
    return (points - o) / v


@traced("voxelize")
@api.declare("voxelize")
def voxelize(
    points: torch.Tensor,
    features: torch.Tensor,
    batch_indices: torch.Tensor,
    active_rows: torch.Tensor | int | None = None,
    **attrs: Unpack[api.VoxelizeAttrs],
) -> SparseTensor:
    a = api.normalise("voxelize", attrs)
    size, org = voxel_grid(a["voxel_size"], a["origin"], "voxelize")
    out_stride = a["stride"]
    p, b = _points_and_batch(points, batch_indices, "voxelize")
    if not isinstance(features, torch.Tensor) or features.dtype not in FLOAT_DTYPES:
        raise TypeError("voxelize: features must be a float torch.Tensor of shape (P, C)")
    if features.ndim != 2 or features.shape[0] != p.shape[0]:
        raise shared_errors.point_features_shape(features.shape, int(p.shape[0]))
    if features.device != p.device:
        raise ValueError("voxelize: features and points must be on one device")
    mode = a["reduction"]
    n = active_count(
        active_rows,
        int(p.shape[0]),
        "voxelize",
        "active_rows",
        array_type=torch.Tensor,
        int32=torch.int32,
    )
    p, b, features = p[:n], b[:n], features[:n]
    channels = int(features.shape[1])
    if n == 0:
        empty = torch.empty(0, 4, dtype=torch.int64, device=p.device)
        return SparseTensor._make(
            Support.from_logical(empty, out_stride),
            torch.zeros(0, channels, dtype=features.dtype, device=p.device),
        )
    cell = torch.floor(_cells(p, size, org))
    scale = torch.tensor(out_stride, dtype=torch.float32, device=p.device)
    if bool(((cell * scale < -_INT32_LIMIT) | (cell * scale >= _INT32_LIMIT)).any()):
        raise ValueError(
            "voxelize: (points - origin) / voxel_size * stride falls outside the int32 "
            "coordinate range; use a larger voxel_size or move the origin"
        )
    logical = torch.cat([b.to(torch.int64)[:, None], cell.to(torch.int64)], dim=1)
    lo, hi = bounds(logical)
    packing = Packing.covering(lo, hi, margin=0)
    keys, inverse = torch.unique(packing.pack(logical), sorted=True, return_inverse=True)
    count = int(keys.numel())
    # First-occurrence order: rank the distinct cells by the first point that reaches them.
    first = torch.full((count,), n, dtype=torch.int64, device=p.device)
    first = first.scatter_reduce(0, inverse, torch.arange(n, device=p.device), "amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(count, device=p.device)
    inverse = rank[inverse]
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
            n_per = torch.bincount(inverse, minlength=count).to(dtype)
            out = out / n_per[:, None]
    support = Support.from_logical(packing.unpack(keys[order]), out_stride)
    return SparseTensor._make(support, out.to(features.dtype))


_CORNERS = tuple((i >> 2 & 1, i >> 1 & 1, i & 1) for i in range(8))


@traced("devoxelize")
@api.declare("devoxelize")
def devoxelize(
    points: torch.Tensor,
    voxels: SparseTensor,
    batch_indices: torch.Tensor,
    point_active_rows: torch.Tensor | int | None = None,
    **attrs: Unpack[api.DevoxelizeAttrs],
) -> torch.Tensor:
    a = api.normalise("devoxelize", attrs)
    x = require_sparse(voxels, "devoxelize", "voxels")
    size, org = voxel_grid(a["voxel_size"], a["origin"], "devoxelize")
    p, b = _points_and_batch(points, batch_indices, "devoxelize")
    mode = a["interpolation"]
    if p.device != x.device:
        raise ValueError(f"devoxelize: points are on {p.device}, the voxels on {x.device}")
    n_points, channels = int(p.shape[0]), x.num_channels
    n = active_count(
        point_active_rows,
        n_points,
        "devoxelize",
        "point_active_rows",
        array_type=torch.Tensor,
        int32=torch.int32,
    )
    dtype = compute_dtype(x.dtype)
    if n == 0 or x.num_rows == 0:
        zeros = torch.zeros(n_points, channels, dtype=x.dtype, device=p.device)
        return zeros + 0 * x.feats.sum()  # keeps the graph connected for autograd
    u = _cells(p[:n], size, org)
    table = x.support.table
    feats = x.feats.to(dtype)
    b64 = b[:n].to(torch.int64)[:, None]
    if mode is Interpolation.nearest:
        cell = torch.floor(u + 0.5).clamp(-(2.0**32), 2.0**32).to(torch.int64)
        row = table.find(torch.cat([b64, cell], dim=1))
        found = row >= 0
        gathered = feats.index_select(0, row.clamp(min=0))
        out = torch.where(found[:, None], gathered, torch.zeros_like(gathered))
    else:
        g = u - 0.5 if mode is Interpolation.trilinear else u
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
        acc = torch.zeros(n, channels, dtype=dtype, device=p.device)
        for k in range(8):
            term = w[:, k : k + 1] * feats.index_select(0, row[:, k].clamp(min=0))
            acc = acc + torch.where(found[:, k : k + 1], term, torch.zeros_like(term))
        if mode is Interpolation.trilinear:
            total = w.sum(dim=1, keepdim=True)
            safe = torch.where(total > 0, total, torch.ones_like(total))
            out = torch.where(total > 0, acc / safe, torch.zeros_like(acc))
        else:
            out = acc
    if n < n_points:
        out = torch.cat([out, out.new_zeros(n_points - n, channels)])
    return out.to(x.dtype)
