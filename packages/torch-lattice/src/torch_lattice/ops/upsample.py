"""``pool_transpose3d`` and ``trilinear_upsample3d`` on torch (weights: ``op_rules.resampling``).

One ``index_add`` per tap over the transposed kernel maps of
:mod:`torch_lattice.kernel_map`, summed in f32 (f64 for f64 features);
autograd flows through ``index_select``/``index_add`` (these ops have no
weights, so nothing but the map is saved).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from lattice_contract.dialect import resampling, transposed_stride
from lattice_contract.frontend import Attrs, implement
from lattice_contract.frontend import signatures as sig

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


def _upsample(op: str, input: object, coordinates: Any, attrs: Attrs) -> SparseTensor:
    how = resampling(op, attrs)
    x = require_sparse(input, op)
    kmap, support = _resample(x, how.window, coordinates, op)
    num, den = _weighted_sums(x.feats, kmap, how.tap_weights)
    out = num / den.clamp(min=how.min_weight)[:, None]
    return SparseTensor._make(support, out.to(x.dtype))


def _pool_transpose3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    return _upsample("pool_transpose3d", input, coordinates, attrs)


pool_transpose3d: sig.PoolTranspose3d[SparseTensor] = implement(
    "pool_transpose3d", _pool_transpose3d, around=traced("pool_transpose3d")
)


def _trilinear_upsample3d(input: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    return _upsample("trilinear_upsample3d", input, coordinates, attrs)


trilinear_upsample3d: sig.TrilinearUpsample3d[SparseTensor] = implement(
    "trilinear_upsample3d", _trilinear_upsample3d, around=traced("trilinear_upsample3d")
)
