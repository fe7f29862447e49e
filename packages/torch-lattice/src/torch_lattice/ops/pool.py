"""Sparse pooling: local windows, and per-batch global pooling.

``pool3d`` shares ``conv3d``'s output support and kernel map (the coarsened
support and the centred relation, one cache entry), ``full_pool3d``
``full_conv3d``'s (the indexed relation, spconv's pools), so a pool followed
by a conv of the same geometry builds one map.
Sums are taken in f32 (``canonical_f32``); max is exact in any dtype.  A
``pool3d`` output row can have no active input (a coarse row whose inputs all
fall outside the window, e.g. K = 1 with s = 2): every mode gives 0 there,
as for ``global_pool``'s empty batch items.  Autograd flows through ``index_select`` /
``index_add_`` / ``scatter_reduce`` directly: pooling has no weights, so the
saved state is the map's indices only.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import PoolMode, resolve_batch_size
from lattice_contract.frontend import Attrs, implement
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.kernel_map import KernelMap, conv_map, full_conv_map
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.ops.conv import _triton_wanted
from torch_lattice.sparse import SparseTensor

__all__ = ["full_pool3d", "global_pool", "pool3d"]

_CHUNK_BYTES = 1 << 22


def _segment_sum(
    feats: torch.Tensor, in_idx: torch.Tensor, out_idx: torch.Tensor, num_out: int
) -> torch.Tensor:
    dtype = compute_dtype(feats.dtype)
    out = torch.zeros(num_out, feats.shape[1], dtype=dtype, device=feats.device)
    step = max(1024, _CHUNK_BYTES // (4 * max(feats.shape[1], 1)))
    for lo in range(0, int(in_idx.numel()), step):
        src = feats.index_select(0, in_idx[lo : lo + step]).to(dtype)
        out.index_add_(0, out_idx[lo : lo + step], src)
    return out


def _segment_max(
    feats: torch.Tensor, in_idx: torch.Tensor, out_idx: torch.Tensor, num_out: int
) -> torch.Tensor:
    c = feats.shape[1]
    src = feats.index_select(0, in_idx).to(compute_dtype(feats.dtype))
    # Start from -inf, not 0: scatter_reduce's backward splits a row's gradient
    # among every value equal to its maximum *including the start value*, so a
    # zero start would take a share wherever the maximum is exactly 0.  Rows
    # no pair reaches are set to 0 afterwards (the op's empty-window value).
    # A window whose inputs are all -inf stays -inf: only the reached mask says "empty".
    index = out_idx.to(torch.int64)  # scatter wants int64; converted once
    out = torch.full((num_out, c), -torch.inf, dtype=src.dtype, device=feats.device)
    out.scatter_reduce_(0, index[:, None].expand(-1, c), src, "amax", include_self=False)
    reached = torch.zeros(num_out, dtype=torch.bool, device=feats.device)
    reached.index_fill_(0, index, True)
    return out.masked_fill(~reached[:, None], 0)


def _reduce(x: torch.Tensor, kmap: KernelMap, mode: PoolMode) -> torch.Tensor:
    """Reduce each output row's pairs; rows no pair reaches give 0.

    The identity tap of a submanifold-shaped map (stride-1 odd windows) is
    not stored; its pairs (every row onto itself) are appended here.
    """
    in_idx, out_idx = kmap.in_idx, kmap.out_idx
    if kmap.identity_tap is not None:
        rows = torch.arange(kmap.num_in, dtype=in_idx.dtype, device=in_idx.device)
        in_idx, out_idx = torch.cat([in_idx, rows]), torch.cat([out_idx, rows])
    if mode is PoolMode.max:
        out = _segment_max(x, in_idx, out_idx, kmap.num_out)
    else:
        out = _segment_sum(x, in_idx, out_idx, kmap.num_out)
        if mode is PoolMode.avg:
            counts = kmap.pair_counts().clamp(min=1).to(out.dtype)
            out = out / counts[:, None]
    return out.to(x.dtype)


def _pool3d(input: Any, attrs: Attrs) -> SparseTensor:
    k, s, p, d = api.window(attrs)
    x = require_sparse(input, "pool3d")
    m = attrs["mode"]
    if _triton_wanted(x):
        from torch_lattice.triton.pool import sparse_pool

        return sparse_pool("centred", x, m, k, s, p, d)
    out_support, kmap = conv_map(x.support, k, s, p, d)
    return SparseTensor._make(out_support, _reduce(x.feats, kmap, m))


pool3d: sig.Pool3d[SparseTensor] = implement("pool3d", _pool3d, around=traced("pool3d"))


def _full_pool3d(input: Any, attrs: Attrs) -> SparseTensor:
    k, s, p, d = api.window(attrs)
    x = require_sparse(input, "full_pool3d")
    m = attrs["mode"]
    if _triton_wanted(x):
        from torch_lattice.triton.pool import sparse_pool

        return sparse_pool("indexed", x, m, k, s, p, d)
    out_support, kmap = full_conv_map(x.support, k, s, p, d)
    return SparseTensor._make(out_support, _reduce(x.feats, kmap, m))


full_pool3d: sig.FullPool3d[SparseTensor] = implement(
    "full_pool3d", _full_pool3d, around=traced("full_pool3d")
)


def _global_pool(input: Any, attrs: Attrs) -> torch.Tensor:
    x = require_sparse(input, "global_pool")
    x.support.require_unpadded("global_pool reduces over every row")
    m = attrs["mode"]
    batch = x.coords[:, 0].to(torch.int64)
    max_batch = int(batch.max().item()) if x.num_rows else None
    batch_size = resolve_batch_size(attrs["batch_size"], max_batch)
    if _triton_wanted(x):
        from torch_lattice.triton import pool as triton_pool

        return triton_pool.global_pool(x, m, batch_size)
    if batch_size == 0:
        return x.feats.new_zeros(0, x.num_channels)
    rows = torch.arange(x.num_rows, device=x.device)
    out: Any
    if m is PoolMode.max:
        out = _segment_max(x.feats, rows, batch, batch_size)
    else:
        out = _segment_sum(x.feats, rows, batch, batch_size)
        if m is PoolMode.avg:
            counts = torch.bincount(batch, minlength=batch_size).clamp(min=1).to(out.dtype)
            out = out / counts[:, None]
    result: torch.Tensor = out.to(x.dtype)
    return result


global_pool: sig.GlobalPool[SparseTensor, torch.Tensor] = implement(
    "global_pool", _global_pool, around=traced("global_pool")
)
