"""cast: all five IEEE rounding modes, exhaustively on 16-bit patterns and on many f32 values.

The reference is independent of the implementation: it takes torch's own
round-to-nearest-even conversion only to find a bracketing pair of target
values, steps to the neighbour through the ordered-integer view of the bit
pattern, and picks per mode by exact float64 comparisons.  NaN is compared
bit for bit (never masked): the contract's NaN policy makes every NaN the
target's canonical quiet NaN with the input's sign, written out below from the
IEEE field layout.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_lattice import ops
from torch_lattice.ops.reference import available_devices

DEVICES = available_devices()
MODES = ["nearest_even", "nearest_away", "toward_zero", "upward", "downward"]
TARGET_INFO = {  # (max finite as float, exponent of the overflow threshold 2^(emax+1))
    torch.float16: (65504.0, 16),
    torch.bfloat16: (float(torch.finfo(torch.bfloat16).max), 128),
    torch.float32: (float(torch.finfo(torch.float32).max), 128),
}
QUIET_NAN = {torch.float16: 0x7E00, torch.bfloat16: 0x7FC0, torch.float32: 0x7FC00000}
"""Exponent all ones, only the top significand bit: the policy's NaN (positive)."""


def _bits_view(dtype: torch.dtype) -> torch.dtype:
    return torch.int16 if dtype in (torch.float16, torch.bfloat16) else torch.int32


def _to_ordered(t: torch.Tensor) -> np.ndarray:
    width = 16 if t.dtype in (torch.float16, torch.bfloat16) else 32
    bits = t.view(_bits_view(t.dtype)).numpy().astype(np.int64) & ((1 << width) - 1)
    sign = bits >> (width - 1)
    mag = bits & ((1 << (width - 1)) - 1)
    return np.where(sign == 1, -mag, mag)


def _from_ordered(o: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    width = 16 if dtype in (torch.float16, torch.bfloat16) else 32
    bits = np.where(o < 0, (1 << (width - 1)) | (-o), o)
    signed = np.where(bits >= (1 << (width - 1)), bits - (1 << width), bits)
    return torch.from_numpy(signed.astype(np.int16 if width == 16 else np.int32)).view(dtype)


def reference_cast(x: torch.Tensor, target: torch.dtype, mode: str) -> torch.Tensor:
    v = x.to(torch.float64).numpy()
    rne = x.to(torch.float64).to(target)  # one correctly rounded conversion: a bracket end
    h = rne.to(torch.float64).numpy()
    o = _to_ordered(rne)
    above = h > v
    lower_o = np.where(above, o - 1, o)
    upper_o = np.where(above, o, o + 1)
    exact = (h == v) | np.isnan(v)
    lower = _from_ordered(lower_o, target).to(torch.float64).numpy()
    upper = _from_ordered(upper_o, target).to(torch.float64).numpy()
    cap = 2.0 ** TARGET_INFO[target][1]  # infinity counts as 2^(emax+1) when breaking ties
    lo_v = np.where(np.isinf(lower), -cap, lower)
    up_v = np.where(np.isinf(upper), cap, upper)
    with np.errstate(invalid="ignore"):
        d_lo, d_up = v - lo_v, up_v - v
    if mode == "upward":
        pick_up = np.ones_like(v, dtype=bool)
    elif mode == "downward":
        pick_up = np.zeros_like(v, dtype=bool)
    elif mode == "toward_zero":
        pick_up = v < 0
    else:
        tie_up = (upper_o % 2 == 0) if mode == "nearest_even" else (v > 0)
        pick_up = (d_up < d_lo) | ((d_up == d_lo) & tie_up)
    chosen = np.where(pick_up, upper_o, lower_o)
    out = _from_ordered(chosen, target)
    negative_zero = torch.from_numpy((chosen == 0) & (v < 0))  # a rounded zero keeps the sign
    out = torch.where(negative_zero, torch.tensor(-0.0, dtype=target), out)
    keep = exact | np.isinf(v)  # exact values (signed zeros too) and infinities convert as they are
    return _with_policy_nans(torch.where(torch.from_numpy(keep), rne, out), x)


def _with_policy_nans(expected: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``expected`` with the policy's NaN (sign of the source) wherever the source is NaN."""
    target = expected.dtype
    width = 16 if target in (torch.float16, torch.bfloat16) else 32
    sign = torch.signbit(source).numpy().astype(np.int64) << (width - 1)
    policy = _from_bits(sign | QUIET_NAN[target], target)
    return torch.where(torch.isnan(source), policy, expected)


def _from_bits(bits: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    width = 16 if dtype in (torch.float16, torch.bfloat16) else 32
    signed = np.where(bits >= (1 << (width - 1)), bits - (1 << width), bits)
    return torch.from_numpy(signed.astype(np.int16 if width == 16 else np.int32)).view(dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    va, vb = a.view(_bits_view(a.dtype)), b.view(_bits_view(b.dtype))
    mismatch = (va != vb).nonzero()
    assert mismatch.numel() == 0, f"{mismatch.numel()} mismatches, first at {mismatch[:5].tolist()}"


def _all_16bit(dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def _f32_probes() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    parts = [
        _all_16bit(torch.float16).float(),
        _all_16bit(torch.bfloat16).float(),
        torch.randint(-(2**31), 2**31 - 1, (100_000,), generator=g, dtype=torch.int64)
        .to(torch.int32)
        .view(torch.float32),
        torch.tensor(
            [
                0.0,
                -0.0,
                65504.0,
                65519.99,
                65520.0,
                65536.0,
                1e-8,
                2.0**-24,
                2.0**-25,
                3e38,
                float("inf"),
                float("-inf"),
                float("nan"),
                1.401298464324817e-45,
                3.4028234663852886e38,
            ]
        ),
    ]
    for dtype in (
        torch.float16,
        torch.bfloat16,
    ):  # midpoints between neighbours, and one f32 ulp off
        vals = _all_16bit(dtype).double()
        vals = vals[torch.isfinite(vals)].unique()
        mid = ((vals[1:] + vals[:-1]) / 2).float()
        parts += [
            mid,
            torch.nextafter(mid, torch.tensor(np.inf)),
            torch.nextafter(mid, torch.tensor(-np.inf)),
        ]
    return torch.cat(parts)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("source", "target"),
    [
        (torch.float16, torch.bfloat16),
        (torch.bfloat16, torch.float16),
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float16),
    ],
)
def test_every_16bit_pattern(
    device: str, mode: str, source: torch.dtype, target: torch.dtype
) -> None:
    x = _all_16bit(source)
    _same(ops.cast(x.to(device), target, rounding=mode).cpu(), reference_cast(x, target, mode))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", [torch.float16, torch.bfloat16, torch.float32])
def test_f32_values(device: str, mode: str, target: torch.dtype) -> None:
    x = _f32_probes()
    _same(ops.cast(x.to(device), target, rounding=mode).cpu(), reference_cast(x, target, mode))


def test_nearest_even_agrees_with_torch_conversion() -> None:
    x = _f32_probes()
    for target in (torch.float16, torch.bfloat16):
        want = _with_policy_nans(x.to(target), x)  # torch's own conversion carries payloads
        _same(ops.cast(x, target, rounding="nearest_even"), want)


def test_known_values_and_errors() -> None:
    x = torch.tensor([1.0 + 2.0**-11, -(1.0 + 2.0**-11), 70000.0, -70000.0])
    assert ops.cast(x, torch.float16, rounding="nearest_even").tolist() == [
        1.0,
        -1.0,
        float("inf"),
        float("-inf"),
    ]
    assert ops.cast(x, "f16", rounding="nearest_away").tolist()[:2] == [
        1.0 + 2.0**-10,
        -(1.0 + 2.0**-10),
    ]
    assert ops.cast(x, torch.float16, rounding="toward_zero").tolist()[2:] == [65504.0, -65504.0]
    assert ops.cast(x, torch.float16, rounding="upward").tolist()[2:] == [float("inf"), -65504.0]
    assert ops.cast(x, torch.float16, rounding="downward").tolist()[2:] == [65504.0, float("-inf")]
    with pytest.raises(ValueError, match="rounding"):
        ops.cast(x, torch.float16, rounding="stochastic")
    with pytest.raises(TypeError, match="float"):
        ops.cast(torch.ones(2, dtype=torch.int32), torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        ops.cast(x, torch.int8)


def test_cast_gradient_is_straight_through() -> None:
    x = torch.randn(5, dtype=torch.float32, requires_grad=True)
    ops.cast(x, torch.float16, rounding="upward").float().sum().backward()
    assert x.grad is not None and torch.equal(x.grad, torch.ones(5))
