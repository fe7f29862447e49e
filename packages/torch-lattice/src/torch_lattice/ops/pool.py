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
from lattice_contract.options import resolve_batch_size
from lattice_contract.schema import PoolMode

from torch_lattice._trace import traced
from torch_lattice.kernel_map import KernelMap, conv_map, full_conv_map
from torch_lattice.ops._common import as_enum, compute_dtype, require_sparse, triple
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
    out = torch.zeros(num_out, c, dtype=src.dtype, device=feats.device)
    index = out_idx.to(torch.int64)[:, None].expand(-1, c)  # scatter wants int64
    return out.scatter_reduce(0, index, src, "amax", include_self=False)


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


@traced("pool3d")
def pool3d(
    input: SparseTensor,
    *,
    mode: PoolMode | str,
    kernel_size: int | tuple[int, int, int],
    stride: int | tuple[int, int, int] = 1,
    padding: int | tuple[int, int, int] = 0,
    dilation: int | tuple[int, int, int] = 1,
) -> SparseTensor:
    """Max / mean / sum over the active ``o*s + off_c(k) - p`` of each row of conv3d's support.

    The output rows are the coarsened input support (every ``floor(c/s)``);
    the mean divides by the number of active contributors.
    """
    x = require_sparse(input, "pool3d")
    m = as_enum(mode, PoolMode, "mode")
    k, s, p, d = _pool_geometry(kernel_size, stride, padding, dilation)
    if _triton_wanted(x):
        from torch_lattice.triton.pool import sparse_pool

        return sparse_pool("centred", x, m, k, s, p, d)
    out_support, kmap = conv_map(x.support, k, s, p, d)
    return SparseTensor._make(out_support, _reduce(x.feats, kmap, m))


@traced("full_pool3d")
def full_pool3d(
    input: SparseTensor,
    *,
    mode: PoolMode | str,
    kernel_size: int | tuple[int, int, int],
    stride: int | tuple[int, int, int] = 1,
    padding: int | tuple[int, int, int] = 0,
    dilation: int | tuple[int, int, int] = 1,
) -> SparseTensor:
    """spconv's pools: max / mean / sum over ``c = o*s - p + k*d`` on full_conv3d's support."""
    x = require_sparse(input, "full_pool3d")
    m = as_enum(mode, PoolMode, "mode")
    k, s, p, d = _pool_geometry(kernel_size, stride, padding, dilation)
    if _triton_wanted(x):
        from torch_lattice.triton.pool import sparse_pool

        return sparse_pool("indexed", x, m, k, s, p, d)
    out_support, kmap = full_conv_map(x.support, k, s, p, d)
    return SparseTensor._make(out_support, _reduce(x.feats, kmap, m))


def _pool_geometry(
    kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, int, int], ...]:
    return (
        triple(kernel_size, "kernel_size", minimum=1),
        triple(stride, "stride", minimum=1),
        triple(padding, "padding", minimum=0),
        triple(dilation, "dilation", minimum=1),
    )


@traced("global_pool")
def global_pool(input: SparseTensor, *, mode: PoolMode | str, batch_size: int = -1) -> torch.Tensor:
    """Dense (B, C): per-batch max / mean / sum of the rows; an empty batch item gives 0.

    ``batch_size=-1`` (the default) sets B to the largest batch index + 1 at
    run time, 0 gives an empty ``(0, C)`` result, a positive value fixes B.
    """
    x = require_sparse(input, "global_pool")
    m = as_enum(mode, PoolMode, "mode")
    batch = x.coords[:, 0].to(torch.int64)
    max_batch = int(batch.max().item()) if x.num_rows else None
    batch_size = resolve_batch_size(batch_size, max_batch)
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
