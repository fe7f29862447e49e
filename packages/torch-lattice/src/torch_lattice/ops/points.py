"""``voxelize`` and ``devoxelize`` on torch tensors; their rules: :mod:`lattice_contract.api_ops`.

Cells are found through packed int64 keys (:class:`torch_lattice.coords.Packing`)
and one ``torch.unique``; interpolation weights are gathered per corner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lattice_contract import api_signatures as sig
from lattice_contract import shared_errors
from lattice_contract.api_checks import PointRules
from lattice_contract.api_signatures import Attrs, implement
from lattice_contract.schema import Interpolation, VoxelReduction

from torch_lattice._trace import traced
from torch_lattice.coords import Packing, bounds
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.sparse import FLOAT_DTYPES, SparseTensor, Support

__all__ = ["devoxelize", "voxelize"]

_POINTS = PointRules(torch.Tensor, torch.int32)


def _points_and_batch(points: Any, batch: Any, op: str) -> tuple[torch.Tensor, torch.Tensor]:
    shared_errors.check_points_and_batch(op, points, batch, torch.Tensor)
    assert isinstance(points, torch.Tensor) and isinstance(batch, torch.Tensor)
    if batch.device != points.device:
        raise ValueError(f"{op}: points are on {points.device} but batch on {batch.device}")
    _POINTS.check_values(
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


def _voxelize(
    points: Any, features: Any, batch_indices: Any, active_rows: Any, attrs: Attrs
) -> SparseTensor:
    size, org = attrs["voxel_size"], attrs["origin"]
    out_stride = attrs["stride"]
    p, b = _points_and_batch(points, batch_indices, "voxelize")
    if not isinstance(features, torch.Tensor) or features.dtype not in FLOAT_DTYPES:
        raise TypeError("voxelize: features must be a float torch.Tensor of shape (P, C)")
    if features.ndim != 2 or features.shape[0] != p.shape[0]:
        raise shared_errors.point_features_shape(features.shape, int(p.shape[0]))
    if features.device != p.device:
        raise ValueError("voxelize: features and points must be on one device")
    mode = attrs["reduction"]
    n = _POINTS.active_count(active_rows, int(p.shape[0]), "voxelize", "active_rows")
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
    _POINTS.check_cells(
        not bool(
            ((cell * scale < -_POINTS.cell_limit) | (cell * scale >= _POINTS.cell_limit)).any()
        )
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
        # Every voxel holds a point; a -inf start keeps the start value out of
        # the gradient's tie split (a zero start would share it at a 0 maximum).
        out = torch.full((count, channels), -torch.inf, dtype=dtype, device=p.device)
        out = out.scatter_reduce(0, idx, f, "amax", include_self=False)
    else:
        out = torch.zeros(count, channels, dtype=dtype, device=p.device).index_add(0, inverse, f)
        if mode is VoxelReduction.mean:
            n_per = torch.bincount(inverse, minlength=count).to(dtype)
            out = out / n_per[:, None]
    support = Support.from_logical(packing.unpack(keys[order]), out_stride)
    return SparseTensor._make(support, out.to(features.dtype))


voxelize: sig.Voxelize[SparseTensor, torch.Tensor] = implement(
    "voxelize", _voxelize, around=traced("voxelize")
)


_CORNERS = tuple((i >> 2 & 1, i >> 1 & 1, i & 1) for i in range(8))


def _devoxelize(
    points: Any, voxels: Any, batch_indices: Any, point_active_rows: Any, attrs: Attrs
) -> torch.Tensor:
    x = require_sparse(voxels, "devoxelize", "voxels")
    size, org = attrs["voxel_size"], attrs["origin"]
    p, b = _points_and_batch(points, batch_indices, "devoxelize")
    mode = attrs["interpolation"]
    if p.device != x.device:
        raise ValueError(f"devoxelize: points are on {p.device}, the voxels on {x.device}")
    n_points, channels = int(p.shape[0]), x.num_channels
    n = _POINTS.active_count(point_active_rows, n_points, "devoxelize", "point_active_rows")
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


devoxelize: sig.Devoxelize[SparseTensor, torch.Tensor] = implement(
    "devoxelize", _devoxelize, around=traced("devoxelize")
)
