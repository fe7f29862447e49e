"""Sparse pooling: local windows over the conv3d support, and per-batch global pooling.

``pool3d`` shares ``conv3d``'s output support and kernel map (the same cache
entry), so a pool followed by a conv of the same geometry builds one map.
Sums are taken in f32 (``canonical_f32``); max is exact in any dtype.  Every
output row of a support-generating window has at least one contributor, so
max never sees an empty window.  Autograd flows through ``index_select`` /
``index_add_`` / ``scatter_reduce`` directly: pooling has no weights, so the
saved state is the map's indices only.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.schema import PoolMode

from torch_lattice._trace import traced
from torch_lattice.kernel_map import KernelMap, conv_map
from torch_lattice.ops._common import as_enum, compute_dtype, require_sparse, triple
from torch_lattice.sparse import SparseTensor

__all__ = ["global_pool", "pool3d"]

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
    if mode is PoolMode.max:
        out = _segment_max(x, kmap.in_idx, kmap.out_idx, kmap.num_out)
    else:
        out = _segment_sum(x, kmap.in_idx, kmap.out_idx, kmap.num_out)
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
    """Max / mean / sum over the active inputs of each window, on conv3d's output support."""
    x = require_sparse(input, "pool3d")
    m = as_enum(mode, PoolMode, "mode")
    k = triple(kernel_size, "kernel_size", minimum=1)
    s = triple(stride, "stride", minimum=1)
    p = triple(padding, "padding", minimum=0)
    d = triple(dilation, "dilation", minimum=1)
    out_support, kmap = conv_map(x.support, k, s, p, d)
    return SparseTensor._make(out_support, _reduce(x.feats, kmap, m))


@traced("global_pool")
def global_pool(input: SparseTensor, *, mode: PoolMode | str, batch_size: int) -> torch.Tensor:
    """Dense (batch_size, C): per-batch max / mean / sum of the rows; an empty batch gives 0."""
    x = require_sparse(input, "global_pool")
    m = as_enum(mode, PoolMode, "mode")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"global_pool: batch_size must be a positive int, got {batch_size!r}")
    batch = x.coords[:, 0].to(torch.int64)
    if x.num_rows and int(batch.max().item()) >= batch_size:
        raise ValueError(
            f"global_pool: the input has batch index {int(batch.max().item())} but "
            f"batch_size={batch_size}; pass batch_size > every batch index"
        )
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
