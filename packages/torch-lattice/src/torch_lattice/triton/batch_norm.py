# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (Triton jit kernels take untyped pointer and constexpr arguments.)
"""Training-mode BatchNorm over the live rows of a padded feature matrix, on Triton.

A captured (CUDA-graph) training step pads every support to a fixed row
capacity: the first ``live`` rows are real, the rest are padding, and
``live`` stays on the device (reading it would synchronise and could not be
recorded).  ``torch.nn.functional.batch_norm`` would count the padding rows in
its statistics, so a training-mode BatchNorm in such a step needs its own
reduction: :func:`masked_batch_norm` is BatchNorm over ``x[:live]`` with every
row count, branch and edge case decided on the device, so a graph can record
it once and replay it for any ``live``.

The reductions are deterministic without atomics: a fixed grid of programs
(from the capacity and the device, never from ``live``) strides over blocks
of rows, each program sums its rows in f32 in registers and writes one
partial per channel, and torch sums the (programs, C) partials in a fixed
order.  The statistics take two passes, the mean and then the sum of squared
deviations from it, since ``E[x^2] - mean^2`` cancels catastrophically when
the mean is large against the spread.  Programs stop at ``live``, so padding
costs the reductions nothing; the elementwise launches (normalise, input
gradient) cover the capacity, since they write the padding rows' zeros.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
import triton.language as tl

from torch_lattice.triton.conv import SUPPORTED_DTYPES
from torch_lattice.triton.kernels import cdiv, interpreting, next_pow2

__all__ = ["masked_batch_norm"]


def _tile(channels: int) -> tuple[int, int]:
    """(rows, channels) of one tile: up to 64 channels, ~4k elements (1k under the interpreter)."""
    bc = min(64, max(16, next_pow2(max(channels, 1))))
    budget = 1024 if interpreting() else 4096
    return budget // bc, bc


@functools.cache
def _sm_count(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _programs(row_blocks: int, channel_blocks: int, device: torch.device) -> int:
    """Programs per channel block of a reduction: about four per SM in all, at most one a block.

    Fixed by the capacity and the device, so the partials, and the order torch
    sums them in, never depend on ``live``.  Under the interpreter the
    programs run one after another, so a few suffice.
    """
    if interpreting() or device.type != "cuda":
        cap = 4
    else:
        index = device.index if device.index is not None else torch.cuda.current_device()
        cap = max(1, 4 * _sm_count(index) // channel_blocks)
    return max(1, min(row_blocks, cap))


@triton.jit
def _live_rows(live_ptr, n_rows):
    """The number of real rows: ``live[0]`` clamped to [0, n_rows], as int64."""
    n = tl.load(live_ptr).to(tl.int64)
    return tl.minimum(tl.maximum(n, 0), n_rows)


@triton.jit
def _elementwise_tile(live_ptr, n_rows, C, BR: tl.constexpr, BC: tl.constexpr):
    """This program's (rows, channels) tile: offsets, channels, and which are inside / real.

    The elementwise launches cover the capacity: ``inside`` rows are written,
    ``real`` ones (before ``live``) hold values, the rest get zeros.
    """
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_ok = c < C
    n = _live_rows(live_ptr, n_rows)
    inside = (r < n_rows)[:, None] & c_ok[None, :]
    real = (r < n)[:, None] & c_ok[None, :]
    return r[:, None] * C + c[None, :], c, c_ok, inside, real


@triton.jit
def _stats_kernel(
    x_ptr,  # (N, C) features
    live_ptr,  # (1,) int32: rows at and past it are padding
    mean_ptr,  # (C,) f32 mean (CENTRED), else a dummy
    part_ptr,  # (P, C) f32 result: this program's sum of x, or (CENTRED) of (x - mean)^2
    n_rows,
    C,
    CENTRED: tl.constexpr,
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    pid = tl.program_id(0)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_ok = c < C
    n = _live_rows(live_ptr, n_rows)
    if CENTRED:
        mean = tl.load(mean_ptr + c, mask=c_ok, other=0.0)
    acc = tl.zeros([BR, BC], tl.float32)
    step = tl.num_programs(0).to(tl.int64) * BR
    for r0 in range(pid.to(tl.int64) * BR, n, step):
        r = r0 + tl.arange(0, BR)
        m = (r < n)[:, None] & c_ok[None, :]
        v = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=m, other=0.0).to(tl.float32)
        if CENTRED:
            d = tl.where(m, v - mean[None, :], 0.0)
            acc += d * d
        else:
            acc += v
    tl.store(part_ptr + pid * C + c, tl.sum(acc, axis=0), mask=c_ok)


@triton.jit
def _apply_kernel(
    x_ptr,  # (N, C) features
    live_ptr,  # (1,) int32
    mean_ptr,  # (C,) f32 batch mean
    scale_ptr,  # (C,) f32 weight * invstd
    bias_ptr,  # (C,) f32
    y_ptr,  # (N, C) result in the features' dtype: 0 on padding rows
    n_rows,
    C,
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    at, c, c_ok, inside, real = _elementwise_tile(live_ptr, n_rows, C, BR, BC)
    x = tl.load(x_ptr + at, mask=real, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + c, mask=c_ok, other=0.0)
    scale = tl.load(scale_ptr + c, mask=c_ok, other=0.0)
    bias = tl.load(bias_ptr + c, mask=c_ok, other=0.0)
    y = (x - mean[None, :]) * scale[None, :] + bias[None, :]
    tl.store(y_ptr + at, tl.where(real, y, 0.0).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _grad_stats_kernel(
    dy_ptr,  # (N, C) gradient of the result (any values on padding rows)
    x_ptr,  # (N, C) features
    live_ptr,  # (1,) int32
    mean_ptr,  # (C,) f32
    invstd_ptr,  # (C,) f32
    part_ptr,  # (2, P, C) f32 result: this program's sum of dy, then of dy * xhat
    n_rows,
    C,
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    pid = tl.program_id(0)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_ok = c < C
    n = _live_rows(live_ptr, n_rows)
    mean = tl.load(mean_ptr + c, mask=c_ok, other=0.0)
    invstd = tl.load(invstd_ptr + c, mask=c_ok, other=0.0)
    acc_g = tl.zeros([BR, BC], tl.float32)
    acc_gx = tl.zeros([BR, BC], tl.float32)
    step = tl.num_programs(0).to(tl.int64) * BR
    for r0 in range(pid.to(tl.int64) * BR, n, step):
        r = r0 + tl.arange(0, BR)
        m = (r < n)[:, None] & c_ok[None, :]
        at = r[:, None] * C + c[None, :]
        g = tl.load(dy_ptr + at, mask=m, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
        xhat = tl.where(m, (x - mean[None, :]) * invstd[None, :], 0.0)
        acc_g += g
        acc_gx += g * xhat
    at = pid * C + c
    tl.store(part_ptr + at, tl.sum(acc_g, axis=0), mask=c_ok)
    tl.store(part_ptr + tl.num_programs(0) * C + at, tl.sum(acc_gx, axis=0), mask=c_ok)


@triton.jit
def _grad_x_kernel(
    dy_ptr,  # (N, C) gradient of the result
    x_ptr,  # (N, C) features
    live_ptr,  # (1,) int32
    mean_ptr,  # (C,) f32
    invstd_ptr,  # (C,) f32
    scale_ptr,  # (C,) f32 weight * invstd
    mean_g_ptr,  # (C,) f32 mean of dy over the live rows
    mean_gx_ptr,  # (C,) f32 mean of dy * xhat over the live rows
    dx_ptr,  # (N, C) result in the features' dtype: 0 on padding rows
    n_rows,
    C,
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    at, c, c_ok, inside, real = _elementwise_tile(live_ptr, n_rows, C, BR, BC)
    g = tl.load(dy_ptr + at, mask=real, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + at, mask=real, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + c, mask=c_ok, other=0.0)
    invstd = tl.load(invstd_ptr + c, mask=c_ok, other=0.0)
    scale = tl.load(scale_ptr + c, mask=c_ok, other=0.0)
    mean_g = tl.load(mean_g_ptr + c, mask=c_ok, other=0.0)
    mean_gx = tl.load(mean_gx_ptr + c, mask=c_ok, other=0.0)
    xhat = (x - mean[None, :]) * invstd[None, :]
    dx = scale[None, :] * (g - mean_g[None, :] - xhat * mean_gx[None, :])
    tl.store(dx_ptr + at, tl.where(real, dx, 0.0).to(dx_ptr.dtype.element_ty), mask=inside)


def _grid(rows: int, channels: int, device: torch.device) -> tuple[int, int, int, int]:
    """(rows per tile, channels per tile, channel blocks, programs per channel block)."""
    br, bc = _tile(channels)
    cb = cdiv(channels, bc)
    return br, bc, cb, _programs(cdiv(rows, br), cb, device)


class _MaskedBatchNorm(torch.autograd.Function):
    """y, batch mean, biased batch variance (the two statistics are not differentiable)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        live: torch.Tensor,
        count: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        eps: float,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, c = (int(v) for v in x.shape)
        y = torch.empty_like(x)
        mean = torch.zeros(c, device=x.device, dtype=torch.float32)
        var = torch.zeros_like(mean)
        if n and c:
            br, bc, cb, p = _grid(n, c, x.device)
            part = torch.empty((p, c), device=x.device, dtype=torch.float32)
            denom = count.clamp(min=1.0)
            _stats_kernel[(p, cb)](x, live, part, part, n, c, CENTRED=False, BR=br, BC=bc)
            mean = part.sum(0) / denom
            _stats_kernel[(p, cb)](x, live, mean, part, n, c, CENTRED=True, BR=br, BC=bc)
            var = part.sum(0) / denom
        invstd = torch.rsqrt(var + eps)
        scale = invstd if weight is None else weight.float() * invstd
        if n and c:
            shift = torch.zeros_like(mean) if bias is None else bias.float().contiguous()
            _apply_kernel[(cdiv(n, br), cb)](
                x, live, mean, scale.contiguous(), shift, y, n, c, BR=br, BC=bc
            )  # fmt: skip
        ctx.save_for_backward(x, live, count, mean, invstd, scale)
        ctx.has_weight, ctx.has_bias = weight is not None, bias is not None
        ctx.weight_dtype = None if weight is None else weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.mark_non_differentiable(mean, var)
        return y, mean, var

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor, *_stats: Any) -> tuple[Any, ...]:
        x, live, count, mean, invstd, scale = ctx.saved_tensors
        n, c = (int(v) for v in x.shape)
        sum_g = torch.zeros(c, device=x.device, dtype=torch.float32)
        sum_gx = torch.zeros_like(sum_g)
        dx = None
        if ctx.needs_input_grad[0]:  # the launch below writes every row, padding included
            dx = torch.empty_like(x) if n and c else torch.zeros_like(x)
        if n and c:
            grad = grad.contiguous()
            br, bc, cb, p = _grid(n, c, x.device)
            part = torch.empty((2, p, c), device=x.device, dtype=torch.float32)
            _grad_stats_kernel[(p, cb)](
                grad, x, live, mean, invstd, part, n, c, BR=br, BC=bc
            )  # fmt: skip
            sum_g, sum_gx = part.sum(1).unbind(0)
            if dx is not None:
                denom = count.clamp(min=1.0)
                _grad_x_kernel[(cdiv(n, br), cb)](
                    grad, x, live, mean, invstd, scale.contiguous(),
                    (sum_g / denom).contiguous(), (sum_gx / denom).contiguous(), dx, n, c,
                    BR=br, BC=bc,
                )  # fmt: skip
        dw = sum_gx.to(ctx.weight_dtype) if ctx.has_weight and ctx.needs_input_grad[3] else None
        db = sum_g.to(ctx.bias_dtype) if ctx.has_bias and ctx.needs_input_grad[4] else None
        return dx, None, None, dw, db, None


def masked_batch_norm(
    x: torch.Tensor,
    live: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    momentum: float | torch.Tensor,
    eps: float,
) -> torch.Tensor:
    """Training-mode ``batch_norm(x[:n])`` with ``n = live[0]`` on the device; rows >= n give 0.

    ``x`` is (N, C) f16, bf16 or f32 with N the capacity; ``live`` a (1,)
    int32 tensor on ``x``'s device, never read on the host.  The result (x's
    dtype) normalises each live row by the live rows' mean and biased
    variance, summed in f32, and is exactly 0 on padding rows whatever they
    hold.  ``weight`` and ``bias`` (C,) may be any float dtype (an f32 master
    under autocast) or None (no affine); their gradients come back in their
    own dtypes, the input's gradient is 0 on padding rows whatever the
    incoming gradient holds there.

    ``running_mean`` and ``running_var`` (any float dtype, or None to track
    nothing) are updated in place as torch does: ``(1 - m) * running + m *
    batch``, the variance unbiased (``n / (n - 1)``).  ``momentum`` may be a
    float or a 0-d/(1,) f32 tensor on the device (a cumulative average's
    ``1 / num_batches_tracked``).  What torch refuses with an error is decided
    on the device instead, since a graph cannot raise: with no live row the
    result is all zeros and neither running statistic moves; with one,
    the variance is 0 (the row becomes ``bias``), the running mean moves and
    the running variance does not.

    f64 features are refused (TypeError): the kernels sum in f32.
    """
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"masked_batch_norm runs f16, bf16 and f32 features (sums in f32), got {x.dtype}"
        )
    if x.dim() != 2:
        raise ValueError(f"masked_batch_norm takes (rows, channels) features, got {tuple(x.shape)}")
    if live.numel() != 1 or live.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"live must be one int32 row count, got {live.dtype} of shape {tuple(live.shape)}"
        )
    if live.device != x.device:
        raise ValueError(f"live is on {live.device}, the features on {x.device}")
    n, c = (int(v) for v in x.shape)
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):  # fmt: skip
        if t is not None and t.shape != (c,):
            raise ValueError(f"{name} must have shape ({c},), got {tuple(t.shape)}")
    x = x.contiguous()
    live = live.reshape(1)
    count = live.clamp(0, n).to(torch.float32)
    outs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    outs = _MaskedBatchNorm.apply(x, live, count, weight, bias, eps)  # type: ignore[no-untyped-call]
    y, mean, var = outs
    if running_mean is not None or running_var is not None:
        _update_running(running_mean, running_var, mean, var, count, momentum)
    return y


@torch.no_grad()
def _update_running(
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    count: torch.Tensor,
    momentum: float | torch.Tensor,
) -> None:
    """Move the running statistics in place, on the device: no count read, no branch on it."""
    if isinstance(momentum, torch.Tensor):
        if momentum.numel() != 1:
            raise ValueError(f"momentum must be one value, got shape {tuple(momentum.shape)}")
        momentum = momentum.reshape(()).to(torch.float32)
    if running_mean is not None:
        old = running_mean.float()
        new = (1 - momentum) * old + momentum * mean
        running_mean.copy_(torch.where(count > 0, new, old))
    if running_var is not None:
        old = running_var.float()
        unbiased = var * count / (count - 1).clamp(min=1.0)
        new = (1 - momentum) * old + momentum * unbiased
        running_var.copy_(torch.where(count > 1, new, old))
