"""Sparse convolutions on MLX's CUDA backend: device maps and fused gather-GEMM kernels.

:func:`convolve` is what :mod:`mlx_lattice.ops.conv` calls, after its own
argument checks, when the features live on a CUDA GPU.  The semantics are
the generic path's (docs/semantics.md); only the execution differs:

* the map is a device neighbour table (:mod:`mlx_lattice.cuda.maps`);
* the features go through ``lt_conv``: every output tile gathers its input
  rows tap by tap and multiplies them by that tap's weights, summing in f32
  with FFMA, so float32 results are exact float32 arithmetic (no TF32,
  whatever ``MLX_ENABLE_TF32`` says) and f16/bf16 accumulate in f32;
* gradients come from an ``mx.custom_function``: the input gradient is the
  same kernel over the adjoint table with the transposed weights, the weight
  gradient ``lt_conv_wgrad``, the bias gradient a column sum.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import mlx.core as mx
from lattice_contract.dialect import Int32CoordinateError, Triple

from mlx_lattice.coords import SupportCache
from mlx_lattice.cuda import kernels, maps
from mlx_lattice.sparse import SparseTensor

__all__ = ["apply_map", "convolve", "normalized", "output_and_map"]


def _conv_function(dmap: maps.DeviceMap) -> Callable[[mx.array, mx.array, mx.array], mx.array]:
    """``f(feats, w_taps, bias) -> y`` over one map, differentiable in all three."""

    @mx.custom_function
    def f(feats: mx.array, w: mx.array, bias: mx.array) -> mx.array:
        return kernels.conv_rows(feats, w, bias, dmap.nbr, dmap.order())

    @f.vjp
    def f_vjp(
        primals: tuple[mx.array, mx.array, mx.array], cotangent: mx.array, output: mx.array
    ) -> tuple[mx.array, mx.array, mx.array]:
        feats, w, bias = primals
        dy = cotangent.astype(feats.dtype)
        wt = w.transpose(0, 2, 1)
        zero = mx.zeros((int(w.shape[1]),), dtype=mx.float32)
        dx = kernels.conv_rows(dy, wt, zero, dmap.inverse())
        dw = kernels.weight_grad(feats, dy, dmap.nbr).astype(w.dtype)
        db = mx.sum(cotangent.astype(mx.float32), axis=0).astype(bias.dtype)
        return dx, dw, db

    return f  # type: ignore[return-value]  # mx.custom_function is callable like f


def apply_map(
    feats: mx.array, weight: mx.array, bias: mx.array | None, dmap: maps.DeviceMap
) -> mx.array:
    """``bias + sum_k W_k x[nbr[k, o]]`` for a ``(C_out, Kx, Ky, Kz, C_in)`` weight."""
    c_out, c_in = int(weight.shape[0]), int(weight.shape[-1])
    volume = int(dmap.nbr.shape[0])
    w = weight.reshape(c_out, volume, c_in).transpose(1, 2, 0)
    b = mx.zeros((c_out,), dtype=mx.float32) if bias is None else bias.astype(mx.float32)
    return _conv_function(dmap)(feats, w, b)


def output_and_map(
    op: str,
    x: SparseTensor,
    geometry: tuple[Triple, Triple, Triple, Triple],
    target: SparseTensor | None,
    out_stride: Triple,
    *,
    family: str,
) -> tuple[mx.array, Triple, SupportCache, maps.DeviceMap]:
    """The output rows (coords, stride, cache) of a conv of ``family`` and its device map.

    The subm and target forms keep their output support's rows; the others
    generate it (memoised on the input's cache, like the map).
    """
    if family == "subm" or target is not None:
        out = x if target is None else target
        # the output support is named weakly, as the generic maps do: a subm map
        # cached on its own support, or a target's on its input, forms no cycle
        key = (family, *geometry, weakref.ref(out.cache))
        paired = None
        if family == "transposed" and target is not None:
            paired = maps.paired_transpose(x.cache, target.cache, geometry)
        if paired is not None:
            dmap = paired
        else:
            rel = maps.relation(family, *geometry)
            if target is None:  # subm: the support onto itself
                dmap = maps.subm_map(key, x.cache, x.coords, x.stride, rel)
            else:
                dmap = maps.target_map(
                    key, x.cache, x.coords, x.stride, out.coords, out.stride, rel
                )
        return out.coords, out.stride, out.cache, dmap
    try:
        gen = maps.support_and_map(family, x.cache, x.coords, x.stride, *geometry, out_stride)
    except Int32CoordinateError as err:
        raise err.with_op(op) from None
    return gen.coords, gen.stride, gen.cache, gen.dmap


def convolve(
    op: str,
    x: SparseTensor,
    weight: object,
    bias: mx.array | None,
    geometry: tuple[Triple, Triple, Triple, Triple],
    target: SparseTensor | None,
    out_stride: Triple,
    *,
    family: str,
) -> SparseTensor:
    """One sparse conv of ``family`` (subm, forward, full, transposed) on the GPU.

    ``weight`` is the conv weight already checked by the caller (dense, or a
    packed QuantizedWeight); ``geometry`` is ``(kernel_size, stride, padding,
    dilation)``, already checked; ``target``, when given, is the checked output support of a
    target form.
    """
    if not isinstance(weight, mx.array):  # packed: the f32 values its matmul would use
        from mlx_lattice.ops.quant import QuantizedWeight  # ops imports this package

        if not isinstance(weight, QuantizedWeight):
            raise TypeError(f"{op}: weight must be an mx.array or a QuantizedWeight")
        weight = weight.dequantize_as((weight.out_channels, *geometry[0], x.num_channels))
    coords, stride, cache, dmap = output_and_map(op, x, geometry, target, out_stride, family=family)
    feats = apply_map(x.feats, weight, bias, dmap)
    return SparseTensor._from_parts(coords, feats, stride, cache)


def normalized(
    op: str,
    x: SparseTensor,
    weight: mx.array,
    bias: mx.array | None,
    eps: float,
    geometry: tuple[Triple, Triple, Triple, Triple],
    target: SparseTensor | None,
    out_stride: Triple,
    *,
    family: str,
) -> SparseTensor:
    """A weight-normalised conv (``normalized_*``) over one device map, as the generic path.

    ``num / sqrt(den + eps) + bias`` in f32, stored in ``x``'s dtype, where
    ``num`` is the plain conv of the f32 features and ``den`` the same map
    applied to an all-ones column with the per-tap weight ``sum_i W^2`` (see
    :mod:`mlx_lattice.ops.normalized`). Both run on ``lt_conv`` in f32 (FFMA),
    the arithmetic the generic path does; gradients reach the weight through
    both, by the conv's own vjp and MLX's for the squares.
    """
    coords, stride, cache, dmap = output_and_map(op, x, geometry, target, out_stride, family=family)
    w = weight.astype(mx.float32)
    num = apply_map(x.feats.astype(mx.float32), w, None, dmap)
    ones = mx.ones((x.num_rows, 1), dtype=mx.float32)
    den = apply_map(ones, mx.sum(w * w, axis=-1, keepdims=True), None, dmap)
    out = num / mx.sqrt(den + eps)
    if bias is not None:
        out = out + bias
    return SparseTensor._from_parts(coords, out.astype(x.dtype), stride, cache)
