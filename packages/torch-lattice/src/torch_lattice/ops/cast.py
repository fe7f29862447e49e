"""Exact IEEE conversion between float formats with an explicit rounding direction.

torch's own ``.to(dtype)`` only rounds to nearest-even, so every mode is done
here with integer arithmetic on the bit patterns: decode the source into an
integer significand and a power-of-two exponent (exact), find the target's
quantum at that magnitude (the target ulp, or the subnormal quantum below its
normal range), split the significand into a kept part and a remainder, round
the kept part by the mode, and re-encode.  One formula encodes normal results,
subnormal results and the carry into the next binade:
``bits = ((q - emin + p) << p) + n`` for a result ``n * 2^q``.

Overflow follows IEEE 754: nearest modes and the directed mode that points
away from zero give infinity; the others give the largest finite value.
Every NaN becomes the target's canonical quiet NaN with the input's sign (the
contract's NaN policy, :mod:`lattice_contract.frontend.float_formats`, the same bits as
on MLX); infinities and signed zeros are preserved.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import Rounding
from lattice_contract.frontend import (
    FLOAT_FORMATS,
    Attrs,
    FloatFormat,
    cast_source_error,
    cast_target_error,
    implement,
)
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced

__all__ = ["cast"]


_FORMATS: dict[torch.dtype, FloatFormat] = {
    torch.float16: FLOAT_FORMATS["f16"],
    torch.bfloat16: FLOAT_FORMATS["bf16"],
    torch.float32: FLOAT_FORMATS["f32"],
    torch.float64: FLOAT_FORMATS["f64"],
}
_BITS_VIEW: dict[int, torch.dtype] = {16: torch.int16, 32: torch.int32, 64: torch.int64}
"""Integer dtype of each format width, to read and write the encodings."""

_TARGETS: dict[Any, torch.dtype] = {
    torch.float16: torch.float16,
    torch.bfloat16: torch.bfloat16,
    torch.float32: torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
}


def _bit_length(v: torch.Tensor) -> torch.Tensor:
    """Number of significant bits of non-negative int64 values (0 for 0)."""
    n = torch.zeros_like(v)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= (1 << s)
        n = n + big * s
        v = torch.where(big, v >> s, v)
    return n + (v > 0)


def _decode(x: torch.Tensor, fmt: FloatFormat) -> tuple[torch.Tensor, ...]:
    raw = x.view(_BITS_VIEW[fmt.width]).to(torch.int64)
    if fmt.width < 64:
        raw = raw & ((1 << fmt.width) - 1)
    sign = (raw >> (fmt.width - 1)) & 1
    exp_all_ones = (1 << fmt.exponent_bits) - 1
    field = (raw >> fmt.mantissa_bits) & exp_all_ones
    mant = raw & ((1 << fmt.mantissa_bits) - 1)
    special = field == exp_all_ones
    nan = special & (mant != 0)
    inf = special & (mant == 0)
    normal = field != 0
    sig = torch.where(normal, mant | (1 << fmt.mantissa_bits), mant)
    exp2 = torch.where(normal, field, torch.ones_like(field)) - fmt.bias - fmt.mantissa_bits
    return sign, sig, exp2, nan, inf


def _round(x: torch.Tensor, target: torch.dtype, mode: Rounding) -> torch.Tensor:
    src, dst = _FORMATS[x.dtype], _FORMATS[target]
    sign, sig, exp2, nan, inf = _decode(x, src)
    p = dst.mantissa_bits
    magnitude_e = exp2 + _bit_length(sig) - 1
    q = torch.clamp(magnitude_e, min=dst.emin) - p
    shift = q - exp2
    left = sig << torch.clamp(-shift, 0, 62)
    sc = torch.clamp(shift, 1, 62)
    trunc = sig >> sc
    rem = sig & ((torch.ones_like(sc) << sc) - 1)
    half = torch.ones_like(sc) << (sc - 1)
    positive = sign == 0
    if mode is Rounding.nearest_even:
        inc = (rem > half) | ((rem == half) & ((trunc & 1) == 1))
    elif mode is Rounding.nearest_away:
        inc = rem >= half
    elif mode is Rounding.toward_zero:
        inc = torch.zeros_like(rem, dtype=torch.bool)
    elif mode is Rounding.upward:
        inc = (rem > 0) & positive
    else:
        inc = (rem > 0) & ~positive
    n = torch.where(shift > 0, trunc + inc, left)
    mag = ((q - dst.emin + p) << p) + n
    inf_bits = dst.inf_bits
    if mode in (Rounding.nearest_even, Rounding.nearest_away):
        to_inf = torch.ones_like(positive)
    elif mode is Rounding.toward_zero:
        to_inf = torch.zeros_like(positive)
    elif mode is Rounding.upward:
        to_inf = positive
    else:
        to_inf = ~positive
    overflow = mag >= inf_bits
    mag = torch.where(overflow, torch.where(to_inf, inf_bits, inf_bits - 1), mag)
    mag = torch.where(sig == 0, torch.zeros_like(mag), mag)
    mag = torch.where(inf, torch.full_like(mag, inf_bits), mag)
    mag = torch.where(nan, torch.full_like(mag, dst.quiet_nan_bits), mag)
    out = (sign << (dst.width - 1)) | mag
    return out.to(_BITS_VIEW[dst.width]).view(target)


class _CastFunction(torch.autograd.Function):
    """Rounding is piecewise constant; its gradient is taken as the identity (straight-through)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, target: torch.dtype, mode: Rounding) -> torch.Tensor:
        ctx.source = x.dtype
        return _round(x.contiguous(), target, mode)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return grad.to(ctx.source), None, None


def _cast(x: Any, dtype: Any, attrs: Attrs) -> torch.Tensor:
    mode = attrs["rounding"]
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"cast: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _FORMATS:  # float64 too, for gradcheck
        raise cast_source_error(x.dtype)
    target = _TARGETS.get(dtype)
    if target is None:
        raise cast_target_error(dtype)
    result: torch.Tensor = _CastFunction.apply(x, target, mode)  # type: ignore[no-untyped-call]
    return result


cast: sig.Cast[torch.Tensor, torch.dtype] = implement(
    "cast",
    _cast,
    "On torch the conversion runs on any device, with autograd.",
    around=traced("cast"),
)
