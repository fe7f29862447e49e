"""Upsampling onto finer supports on MLX: ``pool_transpose3d`` and ``trilinear_upsample3d``.

Both are weighted means over the pairs of a transposed relation
(``o = c*s - p + k*d``), weighted as :func:`lattice_contract.dialect.extra_semantics.resampling`
says, on the transposed kernel maps of :mod:`mlx_lattice.kernel_map`; sums
run in f32 chunk by chunk and are stored in the input dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from lattice_contract.dialect import resampling
from lattice_contract.frontend import Attrs, implement
from lattice_contract.frontend import signatures as sig

from mlx_lattice.kernel_map import KernelMap
from mlx_lattice.ops._transposed import transposed_output
from mlx_lattice.ops.conv import chunks, sparse_input
from mlx_lattice.sparse import SparseTensor

__all__ = ["pool_transpose3d", "trilinear_upsample3d"]


def _weighted_sums(
    feats: mx.array, kmap: KernelMap, tap_weights: Sequence[float] | None
) -> tuple[mx.array, mx.array]:
    """``(sum_k w_k x[in], sum_k w_k)`` per output row over the map's pairs, in f32."""
    channels = int(feats.shape[1])
    source = feats.astype(mx.float32)
    num = mx.zeros((kmap.num_out, channels), dtype=mx.float32)
    den = mx.zeros((kmap.num_out, 1), dtype=mx.float32)
    if kmap.identity_tap is not None:
        w = 1.0 if tap_weights is None else tap_weights[kmap.identity_tap]
        num = num + w * source
        den = den + w
    for k, ins, outs, flush in chunks(kmap, channels):
        w = 1.0 if tap_weights is None else tap_weights[k]
        num = num.at[outs].add(w * source[ins])
        den = den.at[outs].add(mx.full((int(ins.shape[0]), 1), w, dtype=mx.float32))
        if flush:
            mx.eval(num, den)
    return num, den


def _upsample(op: str, input: object, coordinates: object, attrs: Attrs) -> SparseTensor:
    how = resampling(op, attrs)
    x = sparse_input(input, op)
    out = transposed_output(op, x, how.window, coordinates)
    num, den = _weighted_sums(x.feats, out.kmap, how.tap_weights)
    feats = (num / mx.maximum(den, how.min_weight)).astype(x.dtype)
    return SparseTensor._from_parts(out.coords, feats, out.stride, out.cache)


def _pool_transpose3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    return _upsample("pool_transpose3d", input, coordinates, attrs)


pool_transpose3d: sig.PoolTranspose3d[SparseTensor] = implement(
    "pool_transpose3d", _pool_transpose3d
)


def _trilinear_upsample3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    return _upsample("trilinear_upsample3d", input, coordinates, attrs)


trilinear_upsample3d: sig.TrilinearUpsample3d[SparseTensor] = implement(
    "trilinear_upsample3d", _trilinear_upsample3d
)
