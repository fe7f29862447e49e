"""Feature-only ops: dense row-wise maps over the channels of feature rows.

These are the MLX lowerings of ``lattice.linear``, ``lattice.activation``,
``lattice.batch_norm``, ``lattice.layer_norm``, ``lattice.rms_norm`` and
``lattice.softmax``.  They take and return dense arrays with channels on the
last axis (the contract's rank-2 ``(rows, channels)`` feature tensors); a
caller who wants to keep a sparse support applies them to ``x.feats`` and
wraps the result with ``x.with_feats(...)`` (the ``mlx_lattice.nn`` modules do
exactly that).

Numerics: f16 and bf16 inputs are computed in f32 and the result is stored in
the input dtype, so half-precision storage never changes the arithmetic (the
contract's ``canonical_f32`` accumulation for ``linear``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import mlx.core as mx
from lattice_contract.dialect import ActivationKind, GeluApprox
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import signatures as sig

if TYPE_CHECKING:
    from mlx_lattice.ops.quant import QuantizedWeight

__all__ = [
    "activation",
    "batch_norm",
    "layer_norm",
    "linear",
    "rms_norm",
    "softmax",
]

_FLOATS = (mx.float32, mx.float16, mx.bfloat16)


def features_array(x: object, op: str, *, min_ndim: int = 1) -> mx.array:
    """Check that ``x`` is a dense float MLX array with channels on its last axis."""
    if hasattr(x, "feats") and hasattr(x, "coords"):
        raise op_errors.dense_op_on_sparse(op)
    if not isinstance(x, mx.array):
        raise TypeError(f"{op} expects an mx.array of features, got {type(x).__name__}")
    if x.dtype not in _FLOATS:
        raise TypeError(f"{op} needs float32, float16 or bfloat16 features, got {x.dtype}")
    if x.ndim < min_ndim:
        raise ValueError(f"{op} needs features of rank >= {min_ndim}, got shape {tuple(x.shape)}")
    return x


def channel_vector(value: object, channels: int, op: str, name: str) -> mx.array:
    """Check a per-channel parameter: a float array of shape ``(channels,)``, returned in f32."""
    if not isinstance(value, mx.array):
        raise TypeError(f"{op}: {name} must be an mx.array of shape ({channels},)")
    if value.dtype not in _FLOATS:
        raise TypeError(f"{op}: {name} must be a float array, got {value.dtype}")
    if tuple(value.shape) != (channels,):
        raise op_errors.channel_vector_shape(op, name, value.shape, channels)
    return value.astype(mx.float32)


def _linear(x: mx.array, weight: Any, bias: Any, attrs: Attrs) -> mx.array:
    from mlx_lattice.ops.quant import QuantizedWeight, quantized_matmul

    x = features_array(x, "linear")
    c_in = x.shape[-1]
    if isinstance(weight, QuantizedWeight):
        weight.check_shape((weight.out_channels, c_in), "linear")
        out = quantized_matmul(x, weight)
    else:
        if not isinstance(weight, mx.array) or weight.dtype not in _FLOATS:
            raise TypeError(
                "linear: weight must be a float mx.array (C_out, C_in) or a QuantizedWeight"
            )
        if weight.ndim != 2 or weight.shape[1] != c_in:
            raise op_errors.linear_weight_shape(weight.shape, c_in)
        out = mx.matmul(x.astype(mx.float32), weight.astype(mx.float32).T)
    if bias is not None:
        out = out + channel_vector(bias, out.shape[-1], "linear", "bias")
    return out.astype(x.dtype)


linear: sig.Linear[mx.array, mx.array | QuantizedWeight] = implement("linear", _linear)


def _activation(x: mx.array, attrs: Attrs) -> mx.array:
    op, approx = attrs["kind"], attrs["approximate"]
    alpha, beta, threshold = attrs["alpha"], attrs["beta"], attrs["threshold"]
    x = features_array(x, "activation", min_ndim=0)
    if op is ActivationKind.identity:
        return x
    v = x.astype(mx.float32)
    if op is ActivationKind.relu:
        y = mx.maximum(v, 0.0)
    elif op is ActivationKind.leaky_relu:
        y = mx.where(v > 0, v, v * alpha)
    elif op is ActivationKind.gelu:
        if approx is GeluApprox.fast:
            y = v * mx.sigmoid(1.702 * v)
        elif approx is not GeluApprox.tanh:  # none and precise are both the erf form
            y = 0.5 * v * (1.0 + mx.erf(v * (1.0 / math.sqrt(2.0))))
        else:
            inner = math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)
            y = 0.5 * v * (1.0 + mx.tanh(inner))
    elif op is ActivationKind.silu:
        y = v * mx.sigmoid(v)
    elif op is ActivationKind.sigmoid:
        y = mx.sigmoid(v)
    elif op is ActivationKind.tanh:
        y = mx.tanh(v)
    elif op is ActivationKind.softplus:
        if beta == 0 or not math.isfinite(beta):
            raise ValueError(f"activation softplus: beta must be finite and non-zero, got {beta}")
        scaled = v * beta
        # logaddexp(0, t) == log1p(exp(t)) without overflowing for large t.
        y = mx.where(scaled > threshold, v, mx.logaddexp(mx.zeros_like(scaled), scaled) / beta)
    elif op is ActivationKind.elu:
        y = mx.where(v > 0, v, alpha * mx.expm1(mx.minimum(v, 0.0)))
    else:  # hardswish
        y = v * mx.clip(v + 3.0, 0.0, 6.0) / 6.0
    return y.astype(x.dtype)


activation: sig.Activation[mx.array] = implement("activation", _activation)


def _batch_norm(x: mx.array, scale: Any, bias: Any, mean: Any, var: Any, attrs: Attrs) -> mx.array:
    e = attrs["eps"]
    x = features_array(x, "batch_norm")
    c = x.shape[-1]
    s = channel_vector(scale, c, "batch_norm", "scale")
    b = channel_vector(bias, c, "batch_norm", "bias")
    m = channel_vector(mean, c, "batch_norm", "mean")
    v = channel_vector(var, c, "batch_norm", "var")
    y = (x.astype(mx.float32) - m) * mx.rsqrt(v + e) * s + b
    return y.astype(x.dtype)


batch_norm: sig.BatchNorm[mx.array] = implement("batch_norm", _batch_norm)


def _layer_norm(x: mx.array, scale: Any, bias: Any, attrs: Attrs) -> mx.array:
    e = attrs["eps"]
    x = features_array(x, "layer_norm")
    c = x.shape[-1]
    v = x.astype(mx.float32)
    mu = mx.mean(v, axis=-1, keepdims=True)
    centred = v - mu
    var = mx.mean(centred * centred, axis=-1, keepdims=True)
    y = centred * mx.rsqrt(var + e)
    if scale is not None:
        y = y * channel_vector(scale, c, "layer_norm", "scale")
    if bias is not None:
        y = y + channel_vector(bias, c, "layer_norm", "bias")
    return y.astype(x.dtype)


layer_norm: sig.LayerNorm[mx.array] = implement("layer_norm", _layer_norm)


def _rms_norm(x: mx.array, scale: Any, attrs: Attrs) -> mx.array:
    e = attrs["eps"]
    x = features_array(x, "rms_norm")
    c = x.shape[-1]
    v = x.astype(mx.float32)
    y = v * mx.rsqrt(mx.mean(v * v, axis=-1, keepdims=True) + e)
    if scale is not None:
        y = y * channel_vector(scale, c, "rms_norm", "scale")
    return y.astype(x.dtype)


rms_norm: sig.RmsNorm[mx.array] = implement("rms_norm", _rms_norm)


def _softmax(x: mx.array, attrs: Attrs) -> mx.array:
    x = features_array(x, "softmax")
    return mx.softmax(x.astype(mx.float32), axis=-1).astype(x.dtype)


softmax: sig.Softmax[mx.array] = implement("softmax", _softmax)
