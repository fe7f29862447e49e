"""Sparse convolutions on MLX: forward, submanifold, transposed, generative, target forms.

Semantics are those of ``docs/semantics.md``; the coordinate side (which input
row meets which output row through which tap) lives in :mod:`mlx_lattice.kernel_map`.  The feature
side is the same for every family: for each kernel tap, gather the tap's input
rows, multiply by that tap's ``(C_in, C_out)`` weight slice, and scatter-add
into the output rows.  Gathers are processed in chunks so the temporary buffer
stays bounded whatever the number of pairs, and all products are accumulated
in f32 (``canonical_f32``) before the result is stored in the input dtype.

Weights are ``(C_out, Kx, Ky, Kz, C_in)`` (``conv3d_o_xyz_i``) or a packed
:class:`~mlx_lattice.ops.quant.QuantizedWeight` of that logical shape, applied
tap by tap with MLX's quantized matmul.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import (
    Int32CoordinateError,
    Triple,
    Window,
    forward_stride,
    kernel_volume,
    transposed_stride,
)
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from mlx_lattice import cuda
from mlx_lattice.kernel_map import (
    KernelMap,
    conv_support,
    full_conv_support,
    subm_map,
    target_conv_map,
    target_transpose_map,
    transpose_support,
)
from mlx_lattice.ops.feature import channel_vector
from mlx_lattice.ops.quant import QuantizedWeight, quantized_matmul
from mlx_lattice.sparse import SparseTensor

__all__ = [
    "Geometry",
    "conv3d",
    "conv_transpose3d",
    "full_conv3d",
    "generative_conv_transpose3d",
    "subm_conv3d",
]

GATHER_BUFFER_ELEMENTS = 1 << 22
"""Bound on gathered elements held at once (16 MiB of f32 per chunk and between flushes)."""

IntOrTriple = api.IntOrTriple
ConvWeight = mx.array | QuantizedWeight

Geometry = Window
"""Kernel size, stride, padding and dilation of one op, checked (:func:`api.window`)."""


def sparse_input(value: object, op: str, name: str = "input") -> SparseTensor:
    """Check that an operand is a :class:`SparseTensor`."""
    if not isinstance(value, SparseTensor):
        raise TypeError(
            f"{op}: {name} must be an mlx_lattice.SparseTensor, got {type(value).__name__}"
        )
    return value


# ----------------------------------------------------------------- weights


TapProduct = Callable[[int, mx.array], mx.array]


def _tap_weights(
    weight: object, bias: object, x: SparseTensor, kernel_size: Triple, op: str
) -> tuple[TapProduct, int, mx.array | None]:
    """Validate a conv weight and bias; return ``(product(tap, rows_f32), C_out, bias_f32)``."""
    c_in = x.num_channels
    volume = kernel_volume(kernel_size)
    product: TapProduct
    if isinstance(weight, QuantizedWeight):
        c_out = weight.out_channels
        weight.check_shape((c_out, *kernel_size, c_in), op)

        def quantized(k: int, rows: mx.array) -> mx.array:
            return quantized_matmul(rows, weight, k)

        product = quantized
    elif isinstance(weight, mx.array):
        if weight.dtype not in (mx.float32, mx.float16, mx.bfloat16):
            raise op_errors.weight_dtype(op, weight.dtype)
        if weight.ndim != 5 or tuple(weight.shape[1:]) != (*kernel_size, c_in):
            raise op_errors.conv_weight_shape(op, weight.shape, kernel_size, c_in)
        c_out = weight.shape[0]
        per_tap = weight.reshape(c_out, volume, c_in).transpose(1, 2, 0).astype(mx.float32)

        def dense(k: int, rows: mx.array) -> mx.array:
            return rows @ per_tap[k]

        product = dense
    else:
        raise TypeError(
            f"{op}: weight must be an mx.array or a QuantizedWeight, got {type(weight).__name__}"
        )
    b = None if bias is None else channel_vector(bias, c_out, op, "bias")
    return product, int(c_out), b


def chunk_rows(channels: int) -> int:
    """Rows per gathered chunk so that one chunk holds at most the buffer bound."""
    return max(1024, GATHER_BUFFER_ELEMENTS // max(channels, 1))


def chunks(kmap: KernelMap, channels: int) -> Iterator[tuple[int, mx.array, mx.array, bool]]:
    """``(tap, in_rows, out_rows, flush)`` for bounded chunks of every stored tap's pairs.

    ``flush`` is true after each chunk that brings the rows gathered since the
    last flush to the buffer bound; the caller then evaluates its
    accumulators.  Without that, MLX's lazy evaluation is free to materialise
    every tap's gathered rows before the first scatter, so the transient
    memory would grow with the number of pairs instead of staying bounded.
    """
    step = chunk_rows(channels)
    pending = 0
    for k in range(kmap.volume):
        if k == kmap.identity_tap:
            continue
        ins, outs = kmap.tap(k)
        count = int(ins.shape[0])
        for a in range(0, count, step):
            b = min(a + step, count)
            pending += (b - a) * channels
            flush = pending >= GATHER_BUFFER_ELEMENTS
            if flush:
                pending = 0
            yield k, ins[a:b], outs[a:b], flush


def apply_kernel_map(
    feats: mx.array,
    kmap: KernelMap,
    product: TapProduct,
    c_out: int,
    bias: mx.array | None,
    out_dtype: mx.Dtype,
) -> mx.array:
    """Output features ``bias + sum over pairs of W_k x[in]``, summed in f32.

    Each tap's pairs are gathered in bounded chunks, multiplied, and
    scatter-added into the f32 accumulator; within a tap an output row
    appears at most once, so the scatter never races with itself.
    """
    if kmap.identity_tap is not None:
        acc = product(kmap.identity_tap, feats.astype(mx.float32))
    else:
        acc = mx.zeros((kmap.num_out, c_out), dtype=mx.float32)
    for k, ins, outs, flush in chunks(kmap, max(feats.shape[1], c_out)):
        acc = acc.at[outs].add(product(k, feats[ins].astype(mx.float32)))
        if flush:
            mx.eval(acc)
    if bias is not None:
        acc = acc + bias
    return acc.astype(out_dtype)


# --------------------------------------------------------------------- ops


def _target(value: object, op: str, stride: Triple, rule: str) -> SparseTensor:
    if isinstance(value, (mx.array, np.ndarray)):
        value = _coordinate_target(value, op, stride)
    target = sparse_input(value, op, "coordinates")
    if target.stride != stride:
        raise op_errors.target_stride_mismatch(op, target.stride, stride, rule)
    return target


def _coordinate_target(coords: mx.array | np.ndarray, op: str, stride: Triple) -> SparseTensor:
    """A bare ``(N, 4)`` coordinate array as the target support (mlx-lattice 0.6's form).

    mlx-lattice 0.6 held coordinates in lattice units; Lattice's are physical.
    The two agree only at output stride 1, so a bare array is taken there and
    refused at any other stride instead of being read in the wrong units.
    """
    if stride != (1, 1, 1):
        raise ValueError(
            f"{op}: coordinates= is a bare coordinate array but the output stride is {stride}; "
            f"Lattice coordinates are physical (mlx-lattice 0.6 used lattice units, which "
            f"differ at stride > 1), so pass a SparseTensor at stride {stride} whose "
            f"coordinates are physical (lattice units times the stride)"
        )
    rows = int(coords.shape[0]) if coords.ndim >= 1 else 0
    return SparseTensor(coords, mx.zeros((rows, 1), dtype=mx.float32), stride)


def _strided(
    op: str,
    input: object,
    weight: object,
    bias: object,
    g: Geometry,
    coordinates: object,
    *,
    transposed: bool,
    full: bool = False,
) -> SparseTensor:
    """The shared body of the forward and transposed families, with or without a target."""
    x = sparse_input(input, op)
    if transposed:
        out_stride, rule = transposed_stride(x.stride, g.stride, op), "input stride / stride"
    else:
        out_stride, rule = forward_stride(x.stride, g.stride), "input stride * stride"
    product, c_out, b = _tap_weights(weight, bias, x, g.kernel_size, op)
    geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
    target = None if coordinates is None else _target(coordinates, op, out_stride, rule)
    if cuda.routes(weight):  # MLX on CUDA: device maps and mlx_lattice's own kernels
        family = "transposed" if transposed else "full" if full else "forward"
        return cuda.convolve(op, x, weight, b, geometry, target, out_stride, family=family)
    if target is not None:
        build = target_transpose_map if transposed else target_conv_map
        kmap = build(
            x.cache, x.coords, x.stride, target.cache, target.coords, target.stride, *geometry
        )
        feats = apply_kernel_map(x.feats, kmap, product, c_out, b, x.dtype)
        return SparseTensor._from_parts(target.coords, feats, target.stride, target.cache)
    generate = transpose_support if transposed else full_conv_support if full else conv_support
    try:
        gen = generate(x.cache, x.coords, x.stride, *geometry)
    except Int32CoordinateError as err:  # the kernel map serves several ops
        raise err.with_op(op) from None
    feats = apply_kernel_map(x.feats, gen.kmap, product, c_out, b, x.dtype)
    return SparseTensor._from_parts(gen.coords, feats, gen.stride, gen.cache)


def _conv3d(input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    g = api.window(attrs)
    return _strided("conv3d", input, weight, bias, g, coordinates, transposed=False)


conv3d: sig.Conv3d[SparseTensor, mx.array, ConvWeight] = implement("conv3d", _conv3d)


def _full_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    g = api.window(attrs)
    return _strided("full_conv3d", input, weight, bias, g, None, transposed=False, full=True)


full_conv3d: sig.FullConv3d[SparseTensor, mx.array, ConvWeight] = implement(
    "full_conv3d", _full_conv3d
)


def _subm_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    op = "subm_conv3d"
    g = api.window(attrs)
    x = sparse_input(input, op)
    product, c_out, b = _tap_weights(weight, bias, x, g.kernel_size, op)
    if cuda.routes(weight):  # MLX on CUDA: device maps and mlx_lattice's own kernels
        geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
        return cuda.convolve(op, x, weight, b, geometry, None, x.stride, family="subm")
    kmap = subm_map(x.cache, x.coords, x.stride, g.kernel_size, g.dilation)
    feats = apply_kernel_map(x.feats, kmap, product, c_out, b, x.dtype)
    return SparseTensor._from_parts(x.coords, feats, x.stride, x.cache)


subm_conv3d: sig.SubmConv3d[SparseTensor, mx.array, ConvWeight] = implement(
    "subm_conv3d", _subm_conv3d
)


def _conv_transpose3d(
    input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs
) -> SparseTensor:
    g = api.window(attrs)
    return _strided("conv_transpose3d", input, weight, bias, g, coordinates, transposed=True)


conv_transpose3d: sig.ConvTranspose3d[SparseTensor, mx.array, ConvWeight] = implement(
    "conv_transpose3d", _conv_transpose3d
)


def _generative_conv_transpose3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    op = "generative_conv_transpose3d"
    g = api.window(attrs)
    return _strided(op, input, weight, bias, g, None, transposed=True)


generative_conv_transpose3d: sig.GenerativeConvTranspose3d[SparseTensor, mx.array, ConvWeight] = (
    implement("generative_conv_transpose3d", _generative_conv_transpose3d)
)
