"""Upsampling onto finer supports: ``pool_transpose3d`` and ``trilinear_upsample3d``.

Both are weighted means over the pairs of a transposed relation (input c
reaches output o through tap k when ``o = c*s - p + k*d``), run on the
transposed kernel maps of :mod:`torch_lattice.kernel_map`:

- ``pool_transpose3d``: every pair weighs 1, so each output row is the plain
  mean of the coarse rows that reach it; a row reached by none is 0.
- ``trilinear_upsample3d``: the relation of
  :func:`lattice_contract.op_rules.trilinear_window` with the hat weight of
  each tap; ``y = sum w x / max(sum w, 1e-12)`` over the coarse rows that are
  present (renormalised), 0 where none is.

Without a target the output support is the relation's derived support (for
trilinear: every fine row within ``s - 1`` of some coarse position ``c*s`` per
axis); with ``coordinates=target`` it is exactly the target's rows, whose
stride must be the input stride divided by ``stride``.  Sums are taken in f32
(f64 for f64 features); autograd flows through ``index_select``/``index_add``
(these ops have no weights, so nothing but the map is saved).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lattice_contract import api_ops as api
from lattice_contract import api_signatures as sig
from lattice_contract.api_signatures import Attrs, implement
from lattice_contract.op_rules import (
    TRILINEAR_MIN_WEIGHT,
    transposed_stride,
    trilinear_tap_weights,
    trilinear_window,
)

from torch_lattice._trace import traced
from torch_lattice.kernel_map import KernelMap, target_transpose_map, transpose_map
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.ops.conv import _check_target
from torch_lattice.sparse import SparseTensor, Support

__all__ = ["pool_transpose3d", "trilinear_upsample3d"]


def _weighted_sums(
    feats: torch.Tensor, kmap: KernelMap, tap_weights: Sequence[float] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum_k w_k x[in], sum_k w_k)`` per output row over the map's pairs (one pass per tap)."""
    dtype = compute_dtype(feats.dtype)
    num = torch.zeros(kmap.num_out, feats.shape[1], dtype=dtype, device=feats.device)
    den = torch.zeros(kmap.num_out, dtype=dtype, device=feats.device)
    source = feats.to(dtype)
    for k in range(kmap.volume):
        w = 1.0 if tap_weights is None else tap_weights[k]
        if k == kmap.identity_tap:
            num = num + w * source
            den = den + w
            continue
        ins, outs = kmap.tap(k)
        if ins.numel() == 0:
            continue
        rows = outs.to(torch.int64)
        num = num.index_add(0, rows, source.index_select(0, ins), alpha=w)
        den = den.index_add(0, rows, torch.full((rows.numel(),), w, dtype=dtype, device=den.device))
    return num, den


def _resample(
    x: SparseTensor,
    window: tuple[tuple[int, int, int], ...],
    coordinates: SparseTensor | None,
    op: str,
) -> tuple[KernelMap, Support]:
    k, s, p, d = window
    out_stride = transposed_stride(x.stride, s, op)
    if coordinates is not None:
        target = _check_target(coordinates, x, out_stride, op)
        return target_transpose_map(x.support, target.support, k, s, p, d), target.support
    out_support, kmap = transpose_map(x.support, k, s, p, d)
    return kmap, out_support


def _pool_transpose3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    op = "pool_transpose3d"
    window = api.window(attrs)
    x = require_sparse(input, op)
    kmap, support = _resample(x, window, coordinates, op)
    num, den = _weighted_sums(x.feats, kmap, None)
    # den counts pairs: an unreached row has num = 0 and den = 0, so clamping gives 0.
    out = num / den.clamp(min=1)[:, None]
    return SparseTensor._make(support, out.to(x.dtype))


pool_transpose3d: sig.PoolTranspose3d[SparseTensor] = implement(
    "pool_transpose3d", _pool_transpose3d, around=traced("pool_transpose3d")
)


def _trilinear_upsample3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    op = "trilinear_upsample3d"
    s = attrs["stride"]
    x = require_sparse(input, op)
    kmap, support = _resample(x, tuple(trilinear_window(s)), coordinates, op)
    num, den = _weighted_sums(x.feats, kmap, trilinear_tap_weights(s))
    out = num / den.clamp(min=TRILINEAR_MIN_WEIGHT)[:, None]
    return SparseTensor._make(support, out.to(x.dtype))


trilinear_upsample3d: sig.TrilinearUpsample3d[SparseTensor] = implement(
    "trilinear_upsample3d", _trilinear_upsample3d, around=traced("trilinear_upsample3d")
)
