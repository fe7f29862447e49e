"""Upsampling onto finer supports on MLX: ``pool_transpose3d`` and ``trilinear_upsample3d``.

Both are weighted means over the pairs of a transposed relation (input c
reaches output o through tap k when ``o = c*s - p + k*d``), on the transposed
kernel maps of :mod:`mlx_lattice.kernel_map`:

- ``pool_transpose3d``: every pair weighs 1 (the plain mean of the coarse rows
  reaching each output row; 0 where none does);
- ``trilinear_upsample3d``: the relation of
  :func:`lattice_contract.op_rules.trilinear_window`, each tap weighted by its
  hat weight, renormalised over the coarse rows present
  (``sum w x / max(sum w, 1e-12)``).

Without a target the support is the relation's derived support; with
``coordinates=target`` exactly the target's rows (stride input / stride).
Sums run in f32 and are stored in the input dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mlx.core as mx
from lattice_contract import api_ops as api
from lattice_contract import api_signatures as sig
from lattice_contract.api_signatures import Attrs, implement
from lattice_contract.op_rules import (
    TRILINEAR_MIN_WEIGHT,
    trilinear_tap_weights,
    trilinear_window,
)

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


def _pool_transpose3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    op = "pool_transpose3d"
    g = api.window(attrs)
    x = sparse_input(input, op)
    out = transposed_output(op, x, g, coordinates)
    num, den = _weighted_sums(x.feats, out.kmap, None)
    # den counts pairs: an unreached row has num = 0 and den = 0, so clamping gives 0.
    feats = (num / mx.maximum(den, 1.0)).astype(x.dtype)
    return SparseTensor._from_parts(out.coords, feats, out.stride, out.cache)


pool_transpose3d: sig.PoolTranspose3d[SparseTensor] = implement(
    "pool_transpose3d", _pool_transpose3d
)


def _trilinear_upsample3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    op = "trilinear_upsample3d"
    s = attrs["stride"]
    x = sparse_input(input, op)
    out = transposed_output(op, x, trilinear_window(s), coordinates)
    num, den = _weighted_sums(x.feats, out.kmap, trilinear_tap_weights(s))
    feats = (num / mx.maximum(den, TRILINEAR_MIN_WEIGHT)).astype(x.dtype)
    return SparseTensor._from_parts(out.coords, feats, out.stride, out.cache)


trilinear_upsample3d: sig.TrilinearUpsample3d[SparseTensor] = implement(
    "trilinear_upsample3d", _trilinear_upsample3d
)
