"""Dense reference implementations on small grids: the independent oracles of the tests.

These scatter a sparse value into a dense float64 grid, run PyTorch's dense
``conv3d`` / ``conv_transpose3d`` (or an explicit per-tap window for pooling)
and read the result back at every output position some active input reaches.
They share no code with the sparse kernels or kernel maps, only the index
relations of docs/semantics.md and the dialect's one statement of the output
stride (:func:`lattice_contract.dialect.forward_stride` /
:func:`~lattice_contract.dialect.transposed_stride`, itself checked against the
C++ verifier), and they are meant for grids of a few thousand cells.  The
centred ops (``conv3d``, ``pool3d``) are the dense ops with padding
``centred_padding`` (``K//2*d + p`` on odd axes, ``p`` on even ones) read at
the coarsened support (every ``floor(c / s)``), where rows no tap reaches read 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from lattice_contract.dialect import forward_stride, transposed_stride

from torch_lattice.coords import canonical_order
from torch_lattice.sparse import SparseTensor

__all__ = [
    "DenseResult",
    "available_devices",
    "centred_padding",
    "coarsened_rows",
    "dense_centred_conv3d",
    "dense_centred_pool3d",
    "dense_conv3d",
    "dense_conv_transpose3d",
    "dense_pool3d",
    "random_sparse",
    "sorted_rows",
]

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class DenseResult:
    """Output rows (physical int32 coords, canonical order), features and pair counts, on CPU."""

    coords: torch.Tensor
    feats: torch.Tensor
    counts: torch.Tensor


def sorted_rows(coords: torch.Tensor, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows in canonical order (how conformance aligns two results)."""
    perm = canonical_order(coords)
    return coords[perm], feats[perm]


def _logical(x: SparseTensor) -> torch.Tensor:
    s = torch.tensor((1, *x.stride), dtype=torch.int64, device=x.device)
    return x.coords.to(torch.int64) // s


def _scatter_dense(
    logical: torch.Tensor, feats: torch.Tensor, origin: Sequence[int], size: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    batch = int(logical[:, 0].max().item()) + 1 if logical.shape[0] else 1
    c = feats.shape[1]
    grid = torch.zeros(batch, c, *size, dtype=torch.float64, device=feats.device)
    occ = torch.zeros(batch, 1, *size, dtype=torch.float64, device=feats.device)
    i = [logical[:, a + 1] - origin[a] for a in range(3)]
    grid[logical[:, 0], :, i[0], i[1], i[2]] = feats.to(torch.float64)
    occ[logical[:, 0], 0, i[0], i[1], i[2]] = 1.0
    return grid, occ


def _read_back(
    values: torch.Tensor, counts: torch.Tensor, shift: Sequence[int], stride: Triple
) -> DenseResult:
    where = (counts[:, 0] > 0.5).nonzero()
    b, j = where[:, 0], where[:, 1:]
    logical = j + torch.tensor(shift, dtype=torch.int64, device=j.device)
    phys = logical * torch.tensor(stride, dtype=torch.int64, device=j.device)
    coords = torch.cat([b[:, None], phys], dim=1).to(torch.int32)
    feats = values[b, :, j[:, 0], j[:, 1], j[:, 2]]
    cnt = counts[b, 0, j[:, 0], j[:, 1], j[:, 2]]
    perm = canonical_order(coords)
    return DenseResult(coords[perm].cpu(), feats[perm].cpu(), cnt[perm].cpu())


def _conv_grid(
    logical: torch.Tensor, k: Triple, s: Triple, d: Triple
) -> tuple[list[int], list[int], list[int]]:
    lo = logical[:, 1:].min(dim=0).values.tolist()
    hi = logical[:, 1:].max(dim=0).values.tolist()
    m = [(lo[a] - (k[a] - 1) * d[a] - 2 * s[a]) // s[a] for a in range(3)]
    origin = [m[a] * s[a] for a in range(3)]
    size = [hi[a] - origin[a] + (k[a] - 1) * d[a] + 2 * s[a] + 1 for a in range(3)]
    return m, origin, size


def dense_conv3d(
    x: SparseTensor, weight: torch.Tensor, k: Triple, s: Triple, p: Triple, d: Triple
) -> DenseResult:
    """``full_conv3d`` by dense ``F.conv3d`` on a grid whose origin is a multiple of the stride."""
    logical = _logical(x)
    m, origin, size = _conv_grid(logical, k, s, d)
    grid, occ = _scatter_dense(logical, x.feats, origin, size)
    w = weight.to(torch.float64).permute(0, 4, 1, 2, 3)
    out = F.conv3d(grid, w, stride=s, padding=p, dilation=d)
    ones = torch.ones(1, 1, *k, dtype=torch.float64, device=grid.device)
    counts = F.conv3d(occ, ones, stride=s, padding=p, dilation=d)
    out_stride = forward_stride(x.stride, s)
    return _read_back(out, counts, m, out_stride)


def dense_conv_transpose3d(
    x: SparseTensor, weight: torch.Tensor, k: Triple, s: Triple, p: Triple, d: Triple
) -> DenseResult:
    """``conv_transpose3d`` by dense ``F.conv_transpose3d``; full index ``f = o - g*s + p``."""
    logical = _logical(x)
    origin = logical[:, 1:].min(dim=0).values.tolist()
    size = [int(v) - origin[a] + 1 for a, v in enumerate(logical[:, 1:].max(dim=0).values.tolist())]
    grid, occ = _scatter_dense(logical, x.feats, origin, size)
    w = weight.to(torch.float64).permute(4, 0, 1, 2, 3)
    out = F.conv_transpose3d(grid, w, stride=s, dilation=d)
    ones = torch.ones(1, 1, *k, dtype=torch.float64, device=grid.device)
    counts = F.conv_transpose3d(occ, ones, stride=s, dilation=d)
    shift = [origin[a] * s[a] - p[a] for a in range(3)]
    out_stride = transposed_stride(x.stride, s, "conv_transpose3d")
    return _read_back(out, counts, shift, out_stride)


def _pool_grid(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense window reduction (max / avg / sum) by an explicit loop over taps, and counts."""
    logical = _logical(x)
    _, origin, size = _conv_grid(logical, k, s, d)
    grid, occ = _scatter_dense(logical, x.feats, origin, size)
    out_size = [(size[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(3)]
    b, c = grid.shape[:2]
    total = torch.zeros(b, c, *out_size, dtype=torch.float64, device=grid.device)
    best = torch.full_like(total, -torch.inf)
    count = torch.zeros(b, 1, *out_size, dtype=torch.float64, device=grid.device)
    axes = [torch.arange(out_size[a], device=grid.device) * s[a] - p[a] for a in range(3)]
    for kx in range(k[0]):
        for ky in range(k[1]):
            for kz in range(k[2]):
                idx = [axes[0] + kx * d[0], axes[1] + ky * d[1], axes[2] + kz * d[2]]
                ok = [(idx[a] >= 0) & (idx[a] < size[a]) for a in range(3)]
                cl = [idx[a].clamp(0, size[a] - 1) for a in range(3)]
                mask = ok[0][:, None, None] & ok[1][None, :, None] & ok[2][None, None, :]
                vals = grid[:, :, cl[0]][:, :, :, cl[1]][:, :, :, :, cl[2]]
                o = occ[:, :, cl[0]][:, :, :, cl[1]][:, :, :, :, cl[2]] * mask
                total += vals * o
                count += o
                best = torch.where(o > 0, torch.maximum(best, vals), best)
    if mode == "max":
        return best, count
    if mode == "avg":
        return total / count.clamp(min=1), count
    return total, count


def dense_pool3d(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> DenseResult:
    """``full_pool3d``: the dense window reduction at every output some active input reaches."""
    m, _, _ = _conv_grid(_logical(x), k, s, d)
    out, count = _pool_grid(x, mode, k, s, p, d)
    out_stride = forward_stride(x.stride, s)
    return _read_back(out, count, m, out_stride)


def centred_padding(k: Triple, p: Triple, d: Triple) -> Triple:
    """Dense padding that realises the centred rule: ``K//2*d + p`` (odd K) or ``p`` (even K)."""
    return (
        k[0] // 2 * d[0] + p[0] if k[0] % 2 else p[0],
        k[1] // 2 * d[1] + p[1] if k[1] % 2 else p[1],
        k[2] // 2 * d[2] + p[2] if k[2] % 2 else p[2],
    )


def coarsened_rows(x: SparseTensor, s: Triple) -> torch.Tensor:
    """Logical rows ``(b, floor(c / s))`` of the active rows, distinct (lexicographic order)."""
    logical = _logical(x)
    div = torch.tensor((1, *s), dtype=torch.int64, device=logical.device)
    rows: torch.Tensor = torch.unique(torch.div(logical, div, rounding_mode="floor"), dim=0)
    return rows.cpu()


def _read_at(
    values: torch.Tensor,
    counts: torch.Tensor,
    shift: Sequence[int],
    rows: torch.Tensor,
    stride: Triple,
) -> DenseResult:
    j = rows[:, 1:].to(values.device) - torch.tensor(shift, dtype=torch.int64, device=values.device)
    b = rows[:, 0].to(values.device)
    feats = values[b, :, j[:, 0], j[:, 1], j[:, 2]]
    cnt = counts[b, 0, j[:, 0], j[:, 1], j[:, 2]]
    phys = (rows * torch.tensor((1, *stride), dtype=torch.int64)).to(torch.int32)
    perm = canonical_order(phys)
    return DenseResult(phys[perm], feats.cpu()[perm], cnt.cpu()[perm])


def dense_centred_conv3d(
    x: SparseTensor, weight: torch.Tensor, k: Triple, s: Triple, p: Triple, d: Triple
) -> DenseResult:
    """``conv3d``: dense ``F.conv3d`` with :func:`centred_padding`, at the coarsened support."""
    logical = _logical(x)
    m, origin, size = _conv_grid(logical, k, s, d)
    grid, occ = _scatter_dense(logical, x.feats, origin, size)
    w = weight.to(torch.float64).permute(0, 4, 1, 2, 3)
    pad = centred_padding(k, p, d)
    out = F.conv3d(grid, w, stride=s, padding=pad, dilation=d)
    ones = torch.ones(1, 1, *k, dtype=torch.float64, device=grid.device)
    counts = F.conv3d(occ, ones, stride=s, padding=pad, dilation=d)
    out_stride = forward_stride(x.stride, s)
    return _read_at(out, counts, m, coarsened_rows(x, s), out_stride)


def dense_centred_pool3d(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> DenseResult:
    """``pool3d``: the dense window reduction with :func:`centred_padding`, coarsened support.

    Rows no window input reaches read 0 in every mode.
    """
    pad = centred_padding(k, p, d)
    logical = _logical(x)
    m, _, _ = _conv_grid(logical, k, s, d)
    out, count = _pool_grid(x, mode, k, s, pad, d)
    out = torch.where(count > 0, out, torch.zeros_like(out))
    out_stride = forward_stride(x.stride, s)
    return _read_at(out, count, m, coarsened_rows(x, s), out_stride)


def available_devices() -> list[str]:
    """``cpu`` plus ``cuda`` when a GPU is present: tests parametrise over these."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def random_sparse(
    generator: torch.Generator,
    rows: int,
    channels: int,
    *,
    batch: int = 1,
    extent: int = 6,
    stride: Triple = (1, 1, 1),
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    low: int = 0,
) -> SparseTensor:
    """A random sparse value with distinct rows in ``[low, low + extent)^3`` (logical)."""
    b = torch.randint(0, batch, (rows, 1), generator=generator)
    xyz = torch.randint(low, low + extent, (rows, 3), generator=generator)
    logical = torch.unique(torch.cat([b, xyz], dim=1), dim=0)
    perm = torch.randperm(logical.shape[0], generator=generator)
    logical = logical[perm]
    coords = logical * torch.tensor((1, *stride))
    feats = torch.randn(logical.shape[0], channels, generator=generator, dtype=torch.float64)
    return SparseTensor(coords.to(torch.int32).to(device), feats.to(dtype).to(device), stride)
