"""Weight-normalised sparse convolutions on MLX (the reference system's ``normalized_*`` ops).

For output row o and output channel j, with E(o) the (input row, tap) pairs
reaching o through the un-normalised op's relation::

    y[o, j] = sum_E sum_i x[r, i] W[j, k, i] / sqrt(sum_E sum_i W[j, k, i]^2 + eps) + bias[j]

Both sums run on the op's ordinary kernel map (:mod:`mlx_lattice.kernel_map`):
the numerator is the plain convolution, the normaliser the same convolution
of an all-ones single-channel input with the per-tap weight ``sum_i W^2``
(each (output, tap) slot holds at most one input row, so the ones count the
taps present).  A border row therefore gets a smaller normaliser.  A
pointwise (1x1x1, dilation 1) ``normalized_subm_conv3d`` is an ordinary
``subm_conv3d``, as in the reference system.  Packed weights are refused.
On MLX's CUDA backend both sums run on mlx_lattice's own conv kernel over the
device map (:func:`mlx_lattice.cuda.normalized`), in the same f32 arithmetic.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from lattice_contract.dialect import Triple, kernel_volume, transposed_stride
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from mlx_lattice import cuda
from mlx_lattice.kernel_map import (
    KernelMap,
    subm_map,
)
from mlx_lattice.ops._transposed import transposed_output
from mlx_lattice.ops.conv import (
    _tap_weights,
    _target,
    apply_kernel_map,
    sparse_input,
    subm_conv3d,
)
from mlx_lattice.ops.quant import QuantizedWeight
from mlx_lattice.sparse import SparseTensor

__all__ = [
    "normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    "normalized_subm_conv3d",
]


def _refuse_packed(weight: object, op: str) -> None:
    if isinstance(weight, QuantizedWeight):
        raise op_errors.packed_on_normalized(op)


def _normalized(
    op: str,
    x: SparseTensor,
    weight: object,
    bias: object,
    kernel_size: Triple,
    kmap: KernelMap,
    eps: float,
) -> mx.array:
    """``num / sqrt(den + eps) + bias`` over one kernel map, in f32, stored in x's dtype."""
    product, c_out, b = _tap_weights(weight, bias, x, kernel_size, op)
    assert isinstance(weight, mx.array)  # packed weights were refused before
    volume = kernel_volume(kernel_size)
    w = weight.astype(mx.float32).reshape(c_out, volume, x.num_channels)
    squared = mx.sum(w * w, axis=2).transpose(1, 0)[:, None, :]  # (K, 1, C_out)

    def squared_product(k: int, rows: mx.array) -> mx.array:
        return rows @ squared[k]

    num = apply_kernel_map(x.feats, kmap, product, c_out, None, mx.float32)
    ones = mx.ones((x.num_rows, 1), dtype=mx.float32)
    den = apply_kernel_map(ones, kmap, squared_product, c_out, None, mx.float32)
    out = num / mx.sqrt(den + eps)
    if b is not None:
        out = out + b
    return out.astype(x.dtype)


def _normalized_subm_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    op = "normalized_subm_conv3d"
    g = api.window(attrs)
    x = sparse_input(input, op)
    _refuse_packed(weight, op)
    if g.kernel_size == (1, 1, 1) and g.dilation == (1, 1, 1):
        return subm_conv3d(x, weight, bias, kernel_size=1, dilation=1)
    if cuda.routes(weight):  # MLX on CUDA: the device map and mlx_lattice's conv kernel
        _, _, b = _tap_weights(weight, bias, x, g.kernel_size, op)
        assert isinstance(weight, mx.array)  # packed weights were refused above
        geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
        return cuda.normalized(
            op, x, weight, b, attrs["eps"], geometry, None, x.stride, family="subm"
        )
    kmap = subm_map(x.cache, x.coords, x.stride, g.kernel_size, g.dilation)
    feats = _normalized(op, x, weight, bias, g.kernel_size, kmap, attrs["eps"])
    return SparseTensor._from_parts(x.coords, feats, x.stride, x.cache)


normalized_subm_conv3d: sig.NormalizedSubmConv3d[SparseTensor, mx.array, mx.array] = implement(
    "normalized_subm_conv3d", _normalized_subm_conv3d
)


def _transposed(
    op: str,
    input: object,
    weight: object,
    bias: object,
    attrs: Attrs,
    coordinates: object,
) -> SparseTensor:
    g = api.window(attrs)
    x = sparse_input(input, op)
    _refuse_packed(weight, op)
    if cuda.routes(weight):  # MLX on CUDA: the device map and mlx_lattice's conv kernel
        _, _, b = _tap_weights(weight, bias, x, g.kernel_size, op)
        assert isinstance(weight, mx.array)  # packed weights were refused above
        out_stride = transposed_stride(x.stride, g.stride, op)
        target = None
        if coordinates is not None:
            target = _target(coordinates, op, out_stride, "input stride / stride")
        geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
        return cuda.normalized(
            op, x, weight, b, attrs["eps"], geometry, target, out_stride, family="transposed"
        )
    out = transposed_output(op, x, g, coordinates)
    feats = _normalized(op, x, weight, bias, g.kernel_size, out.kmap, attrs["eps"])
    return SparseTensor._from_parts(out.coords, feats, out.stride, out.cache)


def _normalized_conv_transpose3d(
    input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs
) -> SparseTensor:
    op = "normalized_conv_transpose3d"
    return _transposed(op, input, weight, bias, attrs, coordinates)


normalized_conv_transpose3d: sig.NormalizedConvTranspose3d[SparseTensor, mx.array, mx.array] = (
    implement("normalized_conv_transpose3d", _normalized_conv_transpose3d)
)


def _normalized_generative_conv_transpose3d(
    input: Any, weight: Any, bias: Any, attrs: Attrs
) -> SparseTensor:
    op = "normalized_generative_conv_transpose3d"
    return _transposed(op, input, weight, bias, attrs, None)


normalized_generative_conv_transpose3d: sig.NormalizedGenerativeConvTranspose3d[
    SparseTensor, mx.array, mx.array
] = implement("normalized_generative_conv_transpose3d", _normalized_generative_conv_transpose3d)
