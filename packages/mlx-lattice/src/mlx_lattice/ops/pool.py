"""Sparse pooling on MLX: local windows (``pool3d``, ``full_pool3d``) and batch items.

``pool3d`` has the output support and relation of ``conv3d`` with the same
geometry (the coarsened support, centred rule) and ``full_pool3d`` those of
``full_conv3d`` (spconv's pools); each shares the conv's cached kernel map and
reduces the active inputs each output row sees: max, mean (divided by the
number of active contributors, not by the window volume) or sum.  A row with
no active input gives 0 in every mode.  Reductions run in f32 and are stored
in the input dtype.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from lattice_contract.dialect import (
    Int32CoordinateError,
    PoolMode,
    forward_stride,
    resolve_batch_size,
)
from lattice_contract.frontend import Attrs, implement
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from mlx_lattice import cuda
from mlx_lattice.kernel_map import KernelMap, conv_support, full_conv_support
from mlx_lattice.ops.conv import chunks, sparse_input
from mlx_lattice.sparse import SparseTensor

__all__ = ["full_pool3d", "global_pool", "pool3d"]


def _reduce_pairs(feats: mx.array, kmap: KernelMap, mode: PoolMode) -> mx.array:
    """Reduce every tap's input rows into their output rows (f32); unreached rows give 0.

    The identity tap of a submanifold-shaped map (stride-1 odd windows) is
    every row onto itself, so it seeds the accumulator.
    """
    channels = int(feats.shape[1])
    if kmap.identity_tap is not None:
        acc = feats.astype(mx.float32)
        count = mx.ones((kmap.num_out, 1), dtype=mx.float32)
    else:
        fill = -mx.inf if mode is PoolMode.max else 0.0
        acc = mx.full((kmap.num_out, channels), fill, dtype=mx.float32)
        count = mx.zeros((kmap.num_out, 1), dtype=mx.float32)
    for _, ins, outs, flush in chunks(kmap, channels):
        rows = feats[ins].astype(mx.float32)
        acc = acc.at[outs].maximum(rows) if mode is PoolMode.max else acc.at[outs].add(rows)
        count = count.at[outs].add(mx.ones((int(ins.shape[0]), 1), dtype=mx.float32))
        if flush:
            mx.eval(acc, count)
    if mode is PoolMode.avg:
        acc = acc / mx.maximum(count, 1.0)
    elif mode is PoolMode.max:
        acc = mx.where(count > 0, acc, 0.0)
    return acc


def _pool(op: str, input: SparseTensor, attrs: Attrs, *, full: bool) -> SparseTensor:
    g = api.window(attrs)
    x = sparse_input(input, op)
    if cuda.routes(None):  # MLX on CUDA: the conv's device map and mlx_lattice's own kernels
        geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
        out_stride = forward_stride(x.stride, g.stride)
        family = "full" if full else "forward"
        return cuda.pool(op, x, attrs["mode"], geometry, out_stride, family=family)
    generate = full_conv_support if full else conv_support
    try:
        gen = generate(x.cache, x.coords, x.stride, g.kernel_size, g.stride, g.padding, g.dilation)
    except Int32CoordinateError as err:  # the kernel map serves several ops
        raise err.with_op(op) from None
    feats = _reduce_pairs(x.feats, gen.kmap, attrs["mode"]).astype(x.dtype)
    return SparseTensor._from_parts(gen.coords, feats, gen.stride, gen.cache)


def _pool3d(input: Any, attrs: Attrs) -> SparseTensor:
    return _pool("pool3d", input, attrs, full=False)


pool3d: sig.Pool3d[SparseTensor] = implement("pool3d", _pool3d)


def _full_pool3d(input: Any, attrs: Attrs) -> SparseTensor:
    return _pool("full_pool3d", input, attrs, full=True)


full_pool3d: sig.FullPool3d[SparseTensor] = implement("full_pool3d", _full_pool3d)


def _global_pool(input: Any, attrs: Attrs) -> mx.array:
    op = "global_pool"
    x = sparse_input(input, op)
    pool_mode = attrs["mode"]
    batch_size = resolve_batch_size(
        attrs["batch_size"], x.batch_size - 1 if x.num_rows else None, op
    )
    channels = x.num_channels
    if batch_size == 0:
        return mx.zeros((0, channels), dtype=x.dtype)
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


global_pool: sig.GlobalPool[SparseTensor, mx.array] = implement("global_pool", _global_pool)
