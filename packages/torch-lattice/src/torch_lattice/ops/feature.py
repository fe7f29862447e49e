"""Feature-only ops on dense (N, C) tensors: linear, activation, norms, softmax.

These never take a SparseTensor: keeping support is explicit in the contract
(``sparse.decompose`` then ``sparse.with_features``), and the nn modules do it
with ``with_feats``.  f16 and bf16 inputs are computed in f32 and the result is
stored in the input dtype (for ``linear`` that is the contract's
``canonical_f32`` accumulation; for the others it keeps both runtimes on the
same, more accurate, arithmetic).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from lattice_contract.dialect import ActivationKind, GeluApprox
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import signatures as sig

from torch_lattice._master import restore_weight, weight_to_save
from torch_lattice._trace import traced
from torch_lattice.ops._common import (
    channel_vector,
    compute_dtype,
    require_features,
)
from torch_lattice.ops.quant import QuantizedWeight

__all__ = ["activation", "batch_norm", "layer_norm", "linear", "rms_norm", "softmax"]


def _linear(x: torch.Tensor, weight: Any, bias: Any, attrs: Attrs) -> torch.Tensor:
    x = require_features(x, "linear")
    dtype = compute_dtype(x.dtype)
    if isinstance(weight, QuantizedWeight):
        try:
            w = weight.dequantize_as((weight.out_channels, int(x.shape[1])), dtype)
        except ValueError as error:
            raise ValueError(f"linear: {error}") from None
    elif isinstance(weight, torch.Tensor) and weight.is_floating_point():
        w = weight.to(dtype)
    else:
        raise TypeError("linear: weight must be a float tensor or a QuantizedWeight")
    if w.ndim != 2 or w.shape[1] != x.shape[1]:
        raise op_errors.linear_weight_shape(w.shape, int(x.shape[1]))
    if w.device != x.device:
        raise ValueError(f"linear: weight is on {w.device}, features on {x.device}")
    b = None if bias is None else channel_vector(bias, int(w.shape[0]), "linear", "bias")
    half = x.dtype in (torch.float16, torch.bfloat16) and isinstance(weight, torch.Tensor)
    operands = (x, weight, b) if isinstance(weight, torch.Tensor) else (x,)
    if (
        half
        and torch.is_grad_enabled()
        and any(t is not None and t.requires_grad for t in operands)
    ):
        out: torch.Tensor = _HalfLinear.apply(x, weight, b)  # type: ignore[no-untyped-call]
        return out
    return _linear_f32(x.to(dtype), w, None if b is None else b.to(dtype)).to(x.dtype)


def _linear_f32(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = x @ w.t()
    return out if b is None else out + b


class _HalfLinear(torch.autograd.Function):
    """``linear`` of half features in f32, keeping the operands as they came for backward.

    Autograd through ``x.float() @ w.float().t()`` keeps f32 copies of the
    features and of the weight; this keeps the half features and the weight
    (an autocast copy's f32 master, :mod:`torch_lattice._master`) and widens
    them again in backward: the same f32 products and sums, the same numbers.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        saved, ctx.weight_dtype = weight_to_save(weight)
        ctx.save_for_backward(x, saved)
        ctx.bias_dtype = None if bias is None else bias.dtype
        b = None if bias is None else bias.float()
        return _linear_f32(x.float(), weight.float(), b).to(x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, saved = ctx.saved_tensors
        weight = restore_weight(saved, ctx.weight_dtype)
        g = grad.float()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = (g @ weight.float()).to(x.dtype)
        if ctx.needs_input_grad[1]:
            grad_w = (g.t() @ x.float()).to(weight.dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            grad_b = g.sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b


linear: sig.Linear[torch.Tensor, torch.Tensor | QuantizedWeight] = implement(
    "linear", _linear, around=traced("linear")
)


def _in_f32(
    v: torch.Tensor,
    k: ActivationKind,
    approx: GeluApprox,
    alpha: float,
    beta: float,
    threshold: float,
) -> torch.Tensor:
    """The activation ``k`` of the f32 (or f64) tensor ``v``."""
    if k is ActivationKind.relu:
        return F.relu(v)
    if k is ActivationKind.leaky_relu:
        return F.leaky_relu(v, alpha)
    if k is ActivationKind.gelu:
        if approx is GeluApprox.fast:
            return v * torch.sigmoid(1.702 * v)
        # none and precise are both the erf form
        return F.gelu(v, approximate="tanh" if approx is GeluApprox.tanh else "none")
    if k is ActivationKind.silu:
        return F.silu(v)
    if k is ActivationKind.sigmoid:
        return torch.sigmoid(v)
    if k is ActivationKind.tanh:
        return torch.tanh(v)
    if k is ActivationKind.softplus:
        return F.softplus(v, beta=beta, threshold=threshold)
    if k is ActivationKind.elu:
        return F.elu(v, alpha)
    if k is ActivationKind.hardswish:
        return v * F.relu6(v + 3.0) / 6.0
    return v


class _HalfActivation(torch.autograd.Function):
    """An activation of half features computed in f32, keeping only the half input.

    Autograd through ``x.float()`` -> activation -> ``.to(half)`` keeps f32
    copies of the rows (the activation's input or output) for the backward
    pass: twice the bytes of the half activation, for every layer of a
    network trained under autocast.  This function keeps the half input and
    evaluates the f32 activation again in backward; forward values and
    gradients are the very same numbers.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, fn: Any) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.fn = fn
        out: torch.Tensor = fn(x.float()).to(x.dtype)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            v = x.detach().float().requires_grad_()
            y = ctx.fn(v)
        (g,) = torch.autograd.grad(y, v, grad.float())
        return g.to(x.dtype), None


def _activation(x: torch.Tensor, attrs: Attrs) -> torch.Tensor:
    k, approx = attrs["kind"], attrs["approximate"]
    alpha, beta, threshold = attrs["alpha"], attrs["beta"], attrs["threshold"]
    x = require_features(x, "activation")
    if k is ActivationKind.relu:
        # Exact in every dtype (no rounding), so computed in the features' own
        # dtype: one pass, and autograd keeps the half output instead of an f32 copy.
        return F.relu(x)

    def fn(v: torch.Tensor) -> torch.Tensor:
        return _in_f32(v, k, approx, float(alpha), float(beta), float(threshold))

    half = x.dtype in (torch.float16, torch.bfloat16)
    if half and k is not ActivationKind.identity and x.requires_grad and torch.is_grad_enabled():
        out: torch.Tensor = _HalfActivation.apply(x, fn)  # type: ignore[no-untyped-call]
        return out
    return fn(x.to(compute_dtype(x.dtype))).to(x.dtype)


activation: sig.Activation[torch.Tensor] = implement(
    "activation", _activation, around=traced("activation")
)


def _batch_norm(
    x: torch.Tensor, scale: Any, bias: Any, mean: Any, var: Any, attrs: Attrs
) -> torch.Tensor:
    e = attrs["eps"]
    x = require_features(x, "batch_norm")
    c = int(x.shape[1])
    vectors = [
        channel_vector(t, c, "batch_norm", n)
        for t, n in ((scale, "scale"), (bias, "bias"), (mean, "mean"), (var, "var"))
    ]
    # One pass over the features: torch's inference batch norm computes
    # (x - m) * rsqrt(v + e) * s + b per element in f32 (its accumulation type for
    # f16/bf16 features, which it reads with f32 statistics as they are) and rounds
    # once to the features' dtype.  Widening x first cost a pass per operation and
    # an f32 copy of every activation.
    same = all(t.dtype == x.dtype for t in vectors)
    dtype = x.dtype if same else compute_dtype(x.dtype)
    s, b, m, v = (t.to(dtype) for t in vectors)
    if torch.is_grad_enabled() and (m.requires_grad or v.requires_grad):
        # torch's batch norm has no gradient for its statistics: the formula has.
        acc = compute_dtype(x.dtype)
        y = (x.to(acc) - m.to(acc)) * torch.rsqrt(v.to(acc) + e) * s.to(acc) + b.to(acc)
        return y.to(x.dtype)
    if x.shape[0] == 0:  # no rows: nothing to pass over
        return x.clone()
    return F.batch_norm(x, m, v, s, b, training=False, momentum=0.0, eps=float(e))


batch_norm: sig.BatchNorm[torch.Tensor] = implement(
    "batch_norm", _batch_norm, around=traced("batch_norm")
)


def _layer_norm(x: torch.Tensor, scale: Any, bias: Any, attrs: Attrs) -> torch.Tensor:
    e = attrs["eps"]
    x = require_features(x, "layer_norm")
    c = int(x.shape[1])
    dtype = compute_dtype(x.dtype)
    s = None if scale is None else channel_vector(scale, c, "layer_norm", "scale").to(dtype)
    b = None if bias is None else channel_vector(bias, c, "layer_norm", "bias").to(dtype)
    return F.layer_norm(x.to(dtype), (c,), s, b, e).to(x.dtype)


layer_norm: sig.LayerNorm[torch.Tensor] = implement(
    "layer_norm", _layer_norm, around=traced("layer_norm")
)


def _rms_norm(x: torch.Tensor, scale: Any, attrs: Attrs) -> torch.Tensor:
    e = attrs["eps"]
    x = require_features(x, "rms_norm")
    c = int(x.shape[1])
    dtype = compute_dtype(x.dtype)
    v = x.to(dtype)
    y = v * torch.rsqrt(v.square().mean(dim=1, keepdim=True) + e)
    if scale is not None:
        y = y * channel_vector(scale, c, "rms_norm", "scale").to(dtype)
    return y.to(x.dtype)


rms_norm: sig.RmsNorm[torch.Tensor] = implement("rms_norm", _rms_norm, around=traced("rms_norm"))


def _softmax(x: torch.Tensor, attrs: Attrs) -> torch.Tensor:
    x = require_features(x, "softmax")
    return torch.softmax(x.to(compute_dtype(x.dtype)), dim=1).to(x.dtype)


softmax: sig.Softmax[torch.Tensor] = implement("softmax", _softmax, around=traced("softmax"))
