"""Float conversion with an explicit IEEE 754 rounding direction.

``lattice.cast`` promises the same bits on every runtime, so this module never
lets MLX (or the hardware) round: every narrowing conversion works on the
integer encodings (``view`` as uint32 / uint16), computes the truncated
significand and the discarded remainder, and decides the increment from the
requested rounding direction.  Widening conversions are exact and are done with
bit manipulation as well, so that subnormals survive unchanged whatever the
backend's float conversion does.

Formats: binary32 (``float32``), binary16 (``float16``) and bfloat16.  f16 and
bf16 convert to each other through binary32, which holds both exactly, so the
single rounding happens in the final narrowing step.

NaN policy: the contract's (:mod:`lattice_contract.frontend.float_formats`): every NaN
becomes the target's canonical quiet NaN with the input's sign, whatever its
payload, on every conversion (a same-type cast included), as on torch.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
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

__all__ = ["FLOAT_DTYPES", "cast", "float_dtype"]


_F32 = FLOAT_FORMATS["f32"]
_NARROW: dict[mx.Dtype, FloatFormat] = {
    mx.float16: FLOAT_FORMATS["f16"],
    mx.bfloat16: FLOAT_FORMATS["bf16"],
}

FLOAT_DTYPES: dict[str, mx.Dtype] = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}
"""Schema element-type spelling -> MLX dtype for the floats ``cast`` handles."""


def float_dtype(dtype: mx.Dtype | str, name: str = "dtype") -> mx.Dtype:
    """Resolve an MLX float dtype or a schema spelling (``f16``, ``bf16``, ``f32``)."""
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("mlx.core.")
        aliases = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
        key = aliases.get(key, key)
        if key not in FLOAT_DTYPES:
            raise ValueError(
                f"{name} must be one of f32, f16, bf16 (or the MLX dtype), got {dtype!r}"
            )
        return FLOAT_DTYPES[key]
    if dtype not in (mx.float32, mx.float16, mx.bfloat16):
        raise TypeError(
            f"{name} must be mx.float32, mx.float16 or mx.bfloat16, got {dtype}; "
            "lattice features are floats of these three types"
        )
    return dtype


def _u32(value: int) -> mx.array:
    return mx.array(value, dtype=mx.uint32)


def _widen_to_f32_bits(x: mx.array) -> mx.array:
    """binary32 encoding (uint32) of an f16 / bf16 / f32 array, exactly."""
    if x.dtype == mx.float32:
        return x.view(mx.uint32)
    bits = x.view(mx.uint16).astype(mx.uint32)
    if x.dtype == mx.bfloat16:
        # bfloat16 is the upper half of binary32, subnormals and NaNs included.
        return bits << 16
    sign = (bits & 0x8000) << 16
    exp = (bits >> 10) & 0x1F
    man = bits & 0x3FF
    normal = ((exp + (127 - 15)) << 23) | (man << 13)
    special = _u32(0x7F800000) | (man << 13)
    # A subnormal m * 2^-24 (0 < m < 1024): normalise around its leading bit p.
    lead = mx.zeros_like(man)
    for k in range(1, 10):  # loop over bit positions, not elements
        lead = lead + (man >= (1 << k)).astype(mx.uint32)
    sub_exp = lead + (127 - 24)
    sub_man = (man << (23 - lead)) & 0x7FFFFF
    subnormal = mx.where(man == 0, _u32(0), (sub_exp << 23) | sub_man)
    magnitude = mx.where(exp == 0x1F, special, mx.where(exp == 0, subnormal, normal))
    return sign | magnitude


def _quiet_nans(u: mx.array) -> mx.array:
    """binary32 encodings ``u`` with every NaN replaced by the canonical quiet NaN, sign kept."""
    is_nan = (u & 0x7FFFFFFF) > _F32.inf_bits
    return mx.where(is_nan, (u & _F32.sign_bit) | _F32.quiet_nan_bits, u)


def _narrow_from_f32_bits(u: mx.array, fmt: FloatFormat, rounding: Rounding) -> mx.array:
    """Encoding (uint32, low bits) of binary32 values ``u`` rounded into ``fmt``."""
    m = fmt.mantissa_bits
    sign = u >> 31
    negative = sign == 1
    mag = u & 0x7FFFFFFF
    exp32 = mag >> 23
    is_nan = mag > 0x7F800000
    is_inf = mag == 0x7F800000

    # value = sig * 2^(exp_eff - 150); f32 subnormals share the exponent of 1.
    exp_eff = mx.maximum(exp32, _u32(1))
    sig = (mag & 0x7FFFFF) | mx.where(exp32 > 0, _u32(0x800000), _u32(0))
    # Bits to drop so the kept significand sits on the target's quantum; the
    # target's subnormal range (binary exponent below 1 - bias) drops more.
    emin_biased32 = 127 - fmt.bias + 1  # binary32 biased exponent of the target's 2^emin
    extra = mx.maximum(_u32(emin_biased32), exp_eff) - exp_eff
    shift = mx.minimum(extra + (23 - m), _u32(25))  # sig < 2^24: 25 drops everything
    kept = sig >> shift
    rem = sig & ((_u32(1) << shift) - 1)
    half = _u32(1) << (shift - 1)

    if rounding is Rounding.nearest_even:
        up = (rem > half) | ((rem == half) & ((kept & 1) == 1))
    elif rounding is Rounding.nearest_away:
        up = rem >= half
    elif rounding is Rounding.toward_zero:
        up = mx.zeros(u.shape, dtype=mx.bool_)
    elif rounding is Rounding.upward:
        up = (rem != 0) & ~negative
    else:  # downward
        up = (rem != 0) & negative

    # Target encoding before the increment: (biased exponent - 1) << m plus the
    # kept significand (whose implicit bit supplies the missing 1); a carry out
    # of the significand moves into the exponent, up to infinity.
    biased = mx.maximum(exp_eff.astype(mx.int32) - (127 - fmt.bias), mx.array(1, mx.int32))
    base = (biased.astype(mx.uint32) - 1) << m
    finite = base + kept + up.astype(mx.uint32)

    # Magnitudes of 2^(emax + 1) or more: overflow as IEEE directed rounding says.
    overflow = exp32.astype(mx.int32) - 127 > fmt.bias
    inf = _u32(fmt.inf_bits)
    max_finite = _u32(fmt.inf_bits - 1)
    if rounding in (Rounding.nearest_even, Rounding.nearest_away):
        to_inf = mx.ones(u.shape, dtype=mx.bool_)
    elif rounding is Rounding.toward_zero:
        to_inf = mx.zeros(u.shape, dtype=mx.bool_)
    elif rounding is Rounding.upward:
        to_inf = ~negative
    else:
        to_inf = negative
    finite = mx.where(overflow, mx.where(to_inf, inf, max_finite), finite)

    nan = _u32(fmt.quiet_nan_bits)
    magnitude = mx.where(is_nan, nan, mx.where(is_inf, inf, finite))
    return (sign << (fmt.width - 1)) | magnitude


def _cast(x: Any, dtype: Any, attrs: Attrs) -> mx.array:
    mode = attrs["rounding"]
    if not isinstance(x, mx.array):
        raise TypeError(f"cast expects an mx.array, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES.values():
        raise cast_source_error(x.dtype)  # every float source widens to binary32 exactly
    try:
        target = float_dtype(dtype)
    except (TypeError, ValueError):
        raise cast_target_error(dtype) from None
    bits32 = _quiet_nans(_widen_to_f32_bits(x))
    if target == mx.float32:
        return bits32.view(mx.float32)
    narrowed = _narrow_from_f32_bits(bits32, _NARROW[target], mode)
    return narrowed.astype(mx.uint16).view(target)


cast: sig.Cast[mx.array, mx.Dtype] = implement("cast", _cast)
