"""``voxelize`` and ``devoxelize`` on torch tensors; rules: :mod:`lattice_contract.frontend.ops`.

Cells are found through packed int64 keys (:class:`torch_lattice.coords.Packing`)
and one ``torch.unique``; interpolation weights are gathered per corner.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from lattice_contract.dialect import Interpolation, VoxelReduction
from lattice_contract.frontend import DevoxelizeInputs, PointPrologue, VoxelizeInputs, implement
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.coords import Packing, bounds
from torch_lattice.ops._common import compute_dtype
from torch_lattice.sparse import FLOAT_DTYPES, SparseTensor, Support

__all__ = ["devoxelize", "voxelize"]


class _Points(PointPrologue[torch.Tensor, SparseTensor]):
    """The shared point prologue over torch tensors, which live on devices."""

    def single_batch(self, points: torch.Tensor) -> torch.Tensor:
        """Batch index 0 for every point, on the points' device."""
        return torch.zeros((int(points.shape[0]),), dtype=torch.int32, device=points.device)

    def value_facts(self, points: torch.Tensor, batch: torch.Tensor) -> tuple[bool, bool]:
        """Negative batch and finite points (an empty set has neither problem)."""
        negative = bool(batch.numel()) and bool((batch < 0).any())
        return negative, bool(torch.isfinite(points).all())

    def device(self, array: torch.Tensor) -> object:
        """The tensor's device."""
        return array.device


_POINTS = _Points(torch.Tensor, torch.int32, SparseTensor, FLOAT_DTYPES)


def _cells(points: torch.Tensor, size: Sequence[float], origin: Sequence[float]) -> torch.Tensor:
    """``(p - origin) / voxel_size`` in f32, per axis."""
    o = torch.tensor(origin, dtype=torch.float32, device=points.device)
    v = torch.tensor(size, dtype=torch.float32, device=points.device)
    return (points - o) / v


def _voxelize(args: VoxelizeInputs[torch.Tensor]) -> SparseTensor:
    p, b, features, (size, org), out_stride, mode = args
    n, channels = int(p.shape[0]), int(features.shape[1])
    if n == 0:
        empty = torch.empty(0, 4, dtype=torch.int64, device=p.device)
        return SparseTensor._make(
            Support.from_logical(empty, out_stride),
            torch.zeros(0, channels, dtype=features.dtype, device=p.device),
        )
    cell = torch.floor(_cells(p, size, org))
    scale = torch.tensor(out_stride, dtype=torch.float32, device=p.device)
    limit = _POINTS.rules.cell_limit
    _POINTS.rules.check_cells(not bool(((cell * scale < -limit) | (cell * scale >= limit)).any()))
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
    "voxelize", _POINTS.voxelize(_voxelize), around=traced("voxelize")
)


_CORNERS = tuple((i >> 2 & 1, i >> 1 & 1, i & 1) for i in range(8))


def _devoxelize(args: DevoxelizeInputs[torch.Tensor, SparseTensor]) -> torch.Tensor:
    p, b, x, n, (size, org), mode = args
    n_points, channels = int(p.shape[0]), x.num_channels
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
    "devoxelize", _POINTS.devoxelize(_devoxelize), around=traced("devoxelize")
)
