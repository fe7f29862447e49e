"""Sparse pooling on MLX: local windows (``pool3d``) and whole batch items (``global_pool``).

``pool3d`` has the output support of ``conv3d`` with the same geometry (and
shares its cached kernel map), and reduces the active inputs each output row
sees: max, mean (divided by the number of active contributors, not by the
window volume) or sum.  Reductions run in f32 and are stored in the input
dtype.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.options import as_enum
from lattice_contract.schema import PoolMode

from mlx_lattice.kernel_map import KernelMap, conv_support
from mlx_lattice.ops.conv import Geometry, IntOrTriple, chunks, sparse_input
from mlx_lattice.sparse import SparseTensor

__all__ = ["global_pool", "pool3d"]


def _reduce_pairs(feats: mx.array, kmap: KernelMap, mode: PoolMode) -> mx.array:
    """Reduce every tap's input rows into their output rows (f32)."""
    channels = int(feats.shape[1])
    if mode is PoolMode.max:
        acc = mx.full((kmap.num_out, channels), -mx.inf, dtype=mx.float32)
    else:
        acc = mx.zeros((kmap.num_out, channels), dtype=mx.float32)
    count = mx.zeros((kmap.num_out, 1), dtype=mx.float32)
    for _, ins, outs, flush in chunks(kmap, channels):
        rows = feats[ins].astype(mx.float32)
        acc = acc.at[outs].maximum(rows) if mode is PoolMode.max else acc.at[outs].add(rows)
        if mode is PoolMode.avg:
            count = count.at[outs].add(mx.ones((int(ins.shape[0]), 1), dtype=mx.float32))
        if flush:
            mx.eval(acc, count)
    if mode is PoolMode.avg:
        acc = acc / mx.maximum(count, 1.0)
    return acc


def pool3d(
    input: SparseTensor,
    *,
    mode: PoolMode | str,
    kernel_size: IntOrTriple,
    stride: IntOrTriple = 1,
    padding: IntOrTriple = 0,
    dilation: IntOrTriple = 1,
) -> SparseTensor:
    """Local pooling over the support ``conv3d`` would generate; output stride t*s.

    Each output row reduces the active inputs c with ``c = o*s - p + k*d`` for
    some tap k; every output row has at least one, so max never sees an empty
    window.
    """
    op = "pool3d"
    x = sparse_input(input, op)
    pool_mode = as_enum(mode, PoolMode, "mode")
    g = Geometry.of(kernel_size, stride, padding, dilation)
    gen = conv_support(x.cache, x.coords, x.stride, g.kernel_size, g.stride, g.padding, g.dilation)
    feats = _reduce_pairs(x.feats, gen.kmap, pool_mode).astype(x.dtype)
    return SparseTensor._from_parts(gen.coords, feats, gen.stride, gen.cache)


def global_pool(input: SparseTensor, *, mode: PoolMode | str, batch_size: int) -> mx.array:
    """Per-batch-item max / mean / sum of all rows: a dense ``(batch_size, C)`` array.

    Batch items without rows give zeros.  Rows whose batch index is not below
    ``batch_size`` are an error, not silently dropped.
    """
    op = "global_pool"
    x = sparse_input(input, op)
    pool_mode = as_enum(mode, PoolMode, "mode")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{op}: batch_size must be a positive int, got {batch_size!r}")
    channels = x.num_channels
    if x.num_rows and x.batch_size > batch_size:
        raise ValueError(
            f"{op}: the input has rows with batch index {x.batch_size - 1}, but batch_size is "
            f"{batch_size}; pass batch_size >= {x.batch_size}"
        )
    batch = x.batch_indices
    rows = x.feats.astype(mx.float32)
    count = (
        mx.zeros((batch_size, 1), dtype=mx.float32)
        .at[batch]
        .add(mx.ones((x.num_rows, 1), dtype=mx.float32))
    )
    if pool_mode is PoolMode.max:
        acc = mx.full((batch_size, channels), -mx.inf, dtype=mx.float32).at[batch].maximum(rows)
        acc = mx.where(count > 0, acc, 0.0)
    else:
        acc = mx.zeros((batch_size, channels), dtype=mx.float32).at[batch].add(rows)
        if pool_mode is PoolMode.avg:
            acc = acc / mx.maximum(count, 1.0)
    return acc.astype(x.dtype)
