"""Weight-normalised sparse convolutions (the reference system's ``normalized_*`` ops).

For output row o and output channel j, with E(o) the (input row, tap) pairs
that reach o through the un-normalised op's relation::

    num[o, j] = sum_{(r, k) in E(o)} sum_i x[r, i] W[j, k, i]
    den[o, j] = sum_{(r, k) in E(o)} sum_i W[j, k, i]^2
    y[o, j]   = num[o, j] / sqrt(den[o, j] + eps) + bias[j]

so the normaliser depends on the support: a border row, reached through fewer
taps, has a smaller ``den``.  Both sums run on the op's ordinary kernel map:
``num`` is the plain convolution and ``den`` is the same convolution of an
all-ones single-channel input with the weight ``sum_i W[:, :, i]^2`` (each
(output, tap) slot holds at most one input row, so the ones count exactly the
taps present).  Autograd therefore reaches the features through ``num`` and
the weight through both sums, with the conv's own memory-lean backward.

A pointwise (1x1x1, dilation 1) ``normalized_subm_conv3d`` is an ordinary
``subm_conv3d`` without normalisation: that is what the reference system
computes for it, and artifacts it wrote mean exactly that.

Packed (quantized) weights are refused: the normaliser needs the weight's own
values, and the contract forbids packing on these ops.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import transposed_stride
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.kernel_map import (
    KernelMap,
    generative_transpose_map,
    subm_map,
    target_transpose_map,
    transpose_map,
)
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.ops.conv import (
    _check_target,
    _check_weight,
    _SparseConvFunction,
    subm_conv3d,
)
from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.sparse import SparseTensor, Support

__all__ = [
    "normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    "normalized_subm_conv3d",
]


def _dense_weight(
    weight: Any, bias: Any, kernel: tuple[int, int, int], x: SparseTensor, op: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(weight, QuantizedWeight):
        raise op_errors.packed_on_normalized(op)
    return _check_weight(weight, bias, kernel, x.num_channels, op)


def _normalized(
    x: SparseTensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    kmap: KernelMap,
    out_support: Support,
    eps: float,
) -> SparseTensor:
    """``num / sqrt(den + eps) + bias`` on one kernel map, summed in the accumulation dtype."""
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but the input on {x.device}")
    dtype = compute_dtype(x.dtype)
    num: torch.Tensor = _SparseConvFunction.apply(x.feats, weight, kmap)  # type: ignore[no-untyped-call]
    squared = weight.to(dtype).square().sum(dim=-1, keepdim=True)
    ones = torch.ones(x.num_rows, 1, dtype=x.dtype, device=x.device)
    den: torch.Tensor = _SparseConvFunction.apply(ones, squared, kmap)  # type: ignore[no-untyped-call]
    out = num / torch.sqrt(den + eps)
    if bias is not None:
        out = out + bias.to(dtype)
    return SparseTensor._make(out_support, out.to(x.dtype))


def _normalized_subm_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    op = "normalized_subm_conv3d"
    k, _, _, d = api.window(attrs)
    x = require_sparse(input, op)
    w, b = _dense_weight(weight, bias, k, x, op)
    if k == (1, 1, 1) and d == (1, 1, 1):
        return subm_conv3d(x, w, b, kernel_size=1, dilation=1)
    return _normalized(x, w, b, subm_map(x.support, k, d), x.support, attrs["eps"])


normalized_subm_conv3d: sig.NormalizedSubmConv3d[SparseTensor, torch.Tensor, torch.Tensor] = (
    implement(
        "normalized_subm_conv3d", _normalized_subm_conv3d, around=traced("normalized_subm_conv3d")
    )
)


def _normalized_conv_transpose3d(
    input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs
) -> SparseTensor:
    op = "normalized_conv_transpose3d"
    k, s, p, d = api.window(attrs)
    e = attrs["eps"]
    x = require_sparse(input, op)
    w, b = _dense_weight(weight, bias, k, x, op)
    out_stride = transposed_stride(x.stride, s, op)
    if coordinates is not None:
        target = _check_target(coordinates, x, out_stride, op)
        kmap = target_transpose_map(x.support, target.support, k, s, p, d)
        return _normalized(x, w, b, kmap, target.support, e)
    out_support, kmap = transpose_map(x.support, k, s, p, d)
    return _normalized(x, w, b, kmap, out_support, e)


normalized_conv_transpose3d: sig.NormalizedConvTranspose3d[
    SparseTensor, torch.Tensor, torch.Tensor
] = implement(
    "normalized_conv_transpose3d",
    _normalized_conv_transpose3d,
    around=traced("normalized_conv_transpose3d"),
)


def _normalized_generative_conv_transpose3d(
    input: Any, weight: Any, bias: Any, attrs: Attrs
) -> SparseTensor:
    op = "normalized_generative_conv_transpose3d"
    k, s, _, _ = api.window(attrs)
    e = attrs["eps"]
    x = require_sparse(input, op)
    w, b = _dense_weight(weight, bias, k, x, op)
    transposed_stride(x.stride, s, op)
    out_support, kmap = generative_transpose_map(x.support, k, s)
    return _normalized(x, w, b, kmap, out_support, e)


normalized_generative_conv_transpose3d: sig.NormalizedGenerativeConvTranspose3d[
    SparseTensor, torch.Tensor, torch.Tensor
] = implement(
    "normalized_generative_conv_transpose3d",
    _normalized_generative_conv_transpose3d,
    around=traced("normalized_generative_conv_transpose3d"),
)
