"""Shared helpers for the MLX sparse-op tests: random supports and dense torch oracles.

The oracles scatter a sparse value into a small dense grid, run PyTorch's own
dense ``conv3d`` / ``conv_transpose3d`` / pooling there, and read the result
back at the sparse output rows.  The output *support* is also derived densely
(an output exists where the all-ones conv of the occupancy grid is non-zero),
so neither coordinates nor features come from mlx_lattice's own code.
Tests may import torch; mlx_lattice never does.  Imported by name: conftest.py
puts this folder on sys.path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st
from lattice_conformance.metrics import Tolerance
from mlx_lattice import SparseTensor

Triple = tuple[int, int, int]


def per_axis(value: Callable[[int], int]) -> Triple:
    """The triple ``(value(0), value(1), value(2))``: one formula for the three axes."""
    return (value(0), value(1), value(2))


def to_np(a: mx.array) -> np.ndarray:
    """A float64/int NumPy copy of an MLX array."""
    if a.dtype in (mx.float16, mx.bfloat16, mx.float32):
        return np.asarray(a.astype(mx.float32)).astype(np.float64)
    return np.asarray(a)


def make_sparse(
    rng: np.random.Generator,
    *,
    batch: int,
    extent: int,
    stride: Triple,
    channels: int,
    density: float,
    dtype: mx.Dtype = mx.float32,
    nonneg: bool = False,
) -> SparseTensor:
    """Random support: logical coords in [0, extent)^3 per batch item, shuffled rows."""
    grid = rng.random((batch, extent, extent, extent)) < density
    grid[0, rng.integers(extent), rng.integers(extent), rng.integers(extent)] = True
    idx = np.argwhere(grid).astype(np.int32)
    idx = idx[rng.permutation(len(idx))]
    idx[:, 1:] *= np.asarray(stride, dtype=np.int32)
    feats = rng.standard_normal((len(idx), channels)).astype(np.float32)
    if nonneg:
        feats = np.abs(feats)
    return SparseTensor(mx.array(idx), mx.array(feats).astype(dtype), stride=stride)


@dataclass(frozen=True)
class Dense:
    """A sparse value scattered into a ``(B, C, X, Y, Z)`` grid at ``logical + shift``."""

    values: torch.Tensor  # float64
    occupancy: torch.Tensor  # float64, (B, 1, X, Y, Z)
    shift: Triple


def densify(x: SparseTensor, shift: Triple, size: Triple, fill: float = 0.0) -> Dense:
    """Scatter ``x`` (logical coordinates) into a dense grid shifted by ``shift``."""
    logical = to_np(x.coords) // np.asarray((1, *x.stride))
    b = int(logical[:, 0].max()) + 1 if len(logical) else 1
    values = torch.full((b, x.num_channels, *size), fill, dtype=torch.float64)
    occ = torch.zeros((b, 1, *size), dtype=torch.float64)
    pos = logical[:, 1:] + np.asarray(shift)
    assert (pos >= 0).all() and (pos < np.asarray(size)).all(), "grid too small for the oracle"
    i = [torch.as_tensor(logical[:, 0])] + [torch.as_tensor(pos[:, a]) for a in range(3)]
    values[i[0], :, i[1], i[2], i[3]] = torch.as_tensor(to_np(x.feats))
    occ[i[0], 0, i[1], i[2], i[3]] = 1.0
    return Dense(values, occ, shift)


def read_rows(grid: torch.Tensor, logical: np.ndarray, shift: Triple) -> np.ndarray:
    """Rows of a dense ``(B, C, X, Y, Z)`` result at logical coordinates + shift."""
    pos = logical[:, 1:] + np.asarray(shift)
    size = np.asarray(grid.shape[2:])
    assert (pos >= 0).all() and (pos < size).all(), "output outside the oracle grid"
    b = torch.as_tensor(logical[:, 0])
    out = grid[b, :, pos[:, 0], pos[:, 1], pos[:, 2]]
    return out.numpy()


def support_of(count: torch.Tensor, shift: Triple) -> np.ndarray:
    """Logical rows (sorted) where a dense pair-count grid is non-zero."""
    nz = torch.nonzero(count[:, 0] > 0.5).numpy()
    nz[:, 1:] -= np.asarray(shift)
    return sort_rows(nz.astype(np.int64))


def sort_rows(rows: np.ndarray) -> np.ndarray:
    """Rows in lexicographic order (for support comparisons)."""
    if len(rows) == 0:
        return rows.reshape(0, 4)
    return rows[np.lexsort(rows.T[::-1])]


def torch_weight(w: mx.array) -> torch.Tensor:
    """``(C_out, Kx, Ky, Kz, C_in)`` -> torch conv3d's ``(C_out, C_in, Kx, Ky, Kz)``, float64."""
    return torch.as_tensor(to_np(w)).permute(0, 4, 1, 2, 3).contiguous()


def oracle_conv3d(
    x: SparseTensor, w: mx.array, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, torch.Tensor, Triple, np.ndarray]:
    """Dense forward conv: (sorted logical output support, dense result, out shift, counts).

    The input is placed at ``logical + m*s + p`` so that output logical o lands
    at dense index ``o + m`` with torch padding 0; m is large enough that every
    output the sparse relation can produce has a non-negative index.
    """
    m = per_axis(lambda a: -(-((k[a] - 1) * d[a]) // s[a]) + 1)
    in_shift = per_axis(lambda a: m[a] * s[a] + p[a])
    hi = to_np(x.coords)[:, 1:].max(axis=0) // np.asarray(x.stride) if x.num_rows else (0, 0, 0)
    size = per_axis(lambda a: int(hi[a]) + in_shift[a] + (k[a] - 1) * d[a] + s[a] + p[a] + 1)
    dense = densify(x, in_shift, size)
    out = F.conv3d(dense.values, torch_weight(w), stride=s, dilation=d)
    ones = torch.ones((1, 1, *k), dtype=torch.float64)
    count = F.conv3d(dense.occupancy, ones, stride=s, dilation=d)
    return support_of(count, m), out, m, count.numpy()


def oracle_conv_transpose3d(
    x: SparseTensor, w: mx.array, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, torch.Tensor, Triple]:
    """Dense transposed conv: (sorted logical output support, dense result, out shift).

    With the input at ``logical + q`` and torch padding 0, output o lands at
    dense index ``o + q*s + p``; q = 0 suffices for non-negative inputs.
    """
    hi = to_np(x.coords)[:, 1:].max(axis=0) // np.asarray(x.stride) if x.num_rows else (0, 0, 0)
    size = per_axis(lambda a: int(hi[a]) + 1)
    dense = densify(x, (0, 0, 0), size)
    wt = torch.as_tensor(to_np(w)).permute(4, 0, 1, 2, 3).contiguous()  # (C_in, C_out, K...)
    out = F.conv_transpose3d(dense.values, wt, stride=s, dilation=d)
    ones = torch.ones((1, 1, *k), dtype=torch.float64)
    count = F.conv_transpose3d(dense.occupancy, ones, stride=s, dilation=d)
    return support_of(count, p), out, p


def logical_rows(y: SparseTensor) -> np.ndarray:
    """Logical coordinates of a result as int64 NumPy rows."""
    return to_np(y.coords).astype(np.int64) // np.asarray((1, *y.stride))


def tolerance(dtype: mx.Dtype) -> Tolerance:
    """assert_allclose tolerances for a storage dtype (results are rounded once to it)."""
    if dtype == mx.float32:
        return {"rtol": 1e-4, "atol": 1e-4}
    if dtype == mx.float16:
        return {"rtol": 2e-3, "atol": 5e-3}
    return {"rtol": 1.6e-2, "atol": 4e-2}


def random_weight(
    rng: np.random.Generator, c_out: int, k: Triple, c_in: int, dtype: mx.Dtype = mx.float32
) -> mx.array:
    """A random conv weight ``(C_out, Kx, Ky, Kz, C_in)``, scaled to keep sums O(1)."""
    w = rng.standard_normal((c_out, *k, c_in)) / np.sqrt(np.prod(k) * c_in)
    return mx.array(w.astype(np.float32)).astype(dtype)


def triples(lo: int, hi: int) -> st.SearchStrategy[Triple]:
    """Either a cube triple or a mixed triple with components in [lo, hi]."""
    one = st.integers(lo, hi)
    return st.one_of(one.map(lambda v: (v, v, v)), st.tuples(one, one, one))


def _dense_pool(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, torch.Tensor, Triple, np.ndarray]:
    """(support, dense window reduction, shift, counts) with :func:`oracle_conv3d`'s placement.

    Sum is a depthwise all-ones conv, mean divides it by the all-ones conv of
    the occupancy, max is ``max_pool3d`` over a grid whose empty cells hold -inf.
    """
    one_channel = x.with_feats(x.feats[:, :1])
    support, _, m, count = oracle_conv3d(one_channel, mx.ones((1, *k, 1)), k, s, p, d)
    in_shift = per_axis(lambda a: m[a] * s[a] + p[a])
    hi = to_np(x.coords)[:, 1:].max(axis=0) // np.asarray(x.stride)
    size = per_axis(lambda a: int(hi[a]) + in_shift[a] + (k[a] - 1) * d[a] + s[a] + p[a] + 1)
    c = x.num_channels
    if mode == "max":
        grid = densify(x, in_shift, size, fill=-np.inf).values
        out = F.max_pool3d(grid, kernel_size=k, stride=s, dilation=d)
    else:
        grid = densify(x, in_shift, size).values
        ones = torch.ones((c, 1, *k), dtype=torch.float64)
        out = F.conv3d(grid, ones, stride=s, dilation=d, groups=c)
        if mode == "avg":
            out = out / torch.as_tensor(count).clamp_min(1.0)
    return support, out, m, count


def oracle_pool3d(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, np.ndarray]:
    """``full_pool3d``: (sorted logical output support, feature rows) of the dense pooling."""
    support, out, m, _ = _dense_pool(x, mode, k, s, p, d)
    return support, read_rows(out, support, m)


def centred_padding(k: Triple, p: Triple, d: Triple) -> Triple:
    """Dense padding of the centred rule: ``K//2*d + p`` on odd axes, ``p`` on even ones."""
    pads = [k[a] // 2 * d[a] + p[a] if k[a] % 2 else p[a] for a in range(3)]
    return (pads[0], pads[1], pads[2])


def coarsened_support(x: SparseTensor, s: Triple) -> np.ndarray:
    """Sorted logical rows ``(b, floor(c / s))`` of the input rows (conv3d's output support)."""
    rows = logical_rows(x)
    return sort_rows(
        np.unique(np.concatenate([rows[:, :1], rows[:, 1:] // np.asarray(s)], 1), axis=0)
    )


def oracle_centred_conv3d(
    x: SparseTensor, w: mx.array, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``conv3d``: (coarsened support, dense conv rows there, pair counts there).

    The dense conv with :func:`centred_padding`, read at every ``floor(c / s)``.
    """
    support = coarsened_support(x, s)
    _, dense, shift, count = oracle_conv3d(x, w, k, s, centred_padding(k, p, d), d)
    counts = read_rows(torch.as_tensor(count), support, shift)[:, 0]
    return support, read_rows(dense, support, shift), counts


def oracle_centred_pool3d(
    x: SparseTensor, mode: str, k: Triple, s: Triple, p: Triple, d: Triple
) -> tuple[np.ndarray, np.ndarray]:
    """``pool3d``: (coarsened support, window reductions there; 0 where no input is reached)."""
    support = coarsened_support(x, s)
    _, out, m, count = _dense_pool(x, mode, k, s, centred_padding(k, p, d), d)
    rows = read_rows(out, support, m)
    reached = read_rows(torch.as_tensor(count), support, m)[:, :1] > 0
    return support, np.where(reached, rows, 0.0)
