"""Exhaustive checks of ``mlx_lattice.ops.cast`` against an independent reference.

The reference does not manipulate bits: it lists every finite non-negative value
of the target format (in float64, exactly), finds the two neighbours of each
input magnitude with ``searchsorted`` and picks one by comparing against their
exact midpoint, as IEEE 754 defines each rounding direction.  Overflow is
modelled by a sentinel one binade above the largest finite value (what the next
value would be with an unbounded exponent), which stands for infinity.

NaN is compared bit for bit too, never masked: the contract's NaN policy
(docs/semantics.md) makes every NaN the canonical quiet NaN of the target, with
the input's sign, written out here from the IEEE field layout.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
import torch
from lattice_contract.dialect import Rounding
from mlx_lattice.ops.cast import cast
from numpy.typing import NDArray

MODES = [m.value for m in Rounding]

# Widening signalling NaNs in numpy raises "invalid value" warnings; they are the point.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")


class Format:
    """Target format as a table of its finite non-negative magnitudes."""

    def __init__(self, name: str, table: NDArray[np.float64], sentinel: float, width: int) -> None:
        self.name = name
        self.table = table  # index == bit pattern
        self.ext = np.append(table, sentinel)
        self.sentinel = sentinel
        self.width = width
        self.inf = len(table)  # bit pattern of +inf follows the largest finite value
        # The quiet NaN: exponent all ones and only the top significand bit, which is
        # the highest bit below the exponent field (inf's lowest set bit, shifted down).
        self.quiet_nan = self.inf | ((self.inf & -self.inf) >> 1)


F32_QUIET_NAN = 0x7FC00000


def with_policy_nans(
    want: NDArray[np.int64], nan: NDArray[np.bool_], negative: NDArray[np.bool_], fmt: Format
) -> NDArray[np.int64]:
    """``want`` with NaN positions set to the policy's NaN of ``fmt``, sign from ``negative``."""
    sign = negative.astype(np.int64) << (fmt.width - 1)
    return np.where(nan, sign | fmt.quiet_nan, want)


F16 = Format(
    "f16",
    np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64),
    2.0**16,
    16,
)
BF16 = Format(
    "bf16",
    (np.arange(0x7F80, dtype=np.uint32) << 16).view(np.float32).astype(np.float64),
    2.0**128,
    16,
)


def reference(values: NDArray[np.float64], fmt: Format, mode: str) -> NDArray[np.int64]:
    """Bit patterns of ``values`` (exact float64s, no NaN) rounded into ``fmt``."""
    negative = np.signbit(values)
    mag = np.abs(values)
    big = mag >= fmt.sentinel
    clipped = np.where(big, fmt.table[-1], mag)
    lo = np.searchsorted(fmt.table, clipped, side="right") - 1
    hi = lo + 1
    exact = (fmt.table[lo] == mag) & ~big
    mid = (fmt.ext[lo] + fmt.ext[hi]) / 2  # exact: one more bit than the format
    above = (mag > mid) | big
    tie = (mag == mid) & ~big
    if mode == "nearest_even":
        pick_hi = above | (tie & (hi % 2 == 0))
    elif mode == "nearest_away":
        pick_hi = above | tie
    elif mode == "toward_zero":
        pick_hi = np.zeros_like(big)
    elif mode == "upward":
        pick_hi = ~negative
    else:
        pick_hi = negative
    idx = np.where(exact, lo, np.where(pick_hi, hi, lo))
    idx = np.where(np.isinf(values), fmt.inf, idx)
    return (negative.astype(np.int64) << (fmt.width - 1)) | idx


def run_cast(bits: NDArray[np.uint32], dst: mx.Dtype, mode: str) -> NDArray[np.int64]:
    out = cast(mx.array(bits).view(mx.float32), dst, rounding=mode)
    return np.array(out.view(mx.uint16)).astype(np.int64)


def assert_matches(
    got: NDArray[np.int64], values: NDArray[np.float64], fmt: Format, mode: str
) -> None:
    nan = np.isnan(values)
    want = reference(np.where(nan, 0.0, values), fmt, mode)
    want = with_policy_nans(want, nan, np.signbit(values), fmt)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{fmt.name} {mode}: {bad.size} mismatches, e.g. value {values[bad[0]]!r} "
        f"got {got[bad[0]]:#06x} want {want[bad[0]]:#06x}"
    )


def boundary_values(fmt: Format) -> NDArray[np.float32]:
    """Every finite value of ``fmt``, every midpoint, and their f32 neighbours, both signs."""
    with np.errstate(over="ignore"):
        ext = fmt.ext.astype(np.float32)  # all exact in f32; bf16's sentinel 2^128 becomes inf
    mids = ((fmt.ext[:-1] + fmt.ext[1:]) / 2).astype(np.float32)
    core = np.concatenate([ext[np.isfinite(ext)], mids])
    core = np.concatenate([core, -core])
    up = np.nextafter(core, np.float32(np.inf))
    down = np.nextafter(core, np.float32(-np.inf))
    rng = np.random.default_rng(7)
    random_bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38, 1e30],
        dtype=np.float32,
    )
    nan_payloads = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7F802000, 0xFFFFFFFF])
    return np.concatenate(
        [
            core,
            up,
            down,
            random_bits.view(np.float32),
            specials,
            nan_payloads.astype(np.uint32).view(np.float32),
        ]
    )


@pytest.fixture(scope="module")
def f32_around_f16() -> NDArray[np.float32]:
    return boundary_values(F16)


@pytest.fixture(scope="module")
def f32_around_bf16() -> NDArray[np.float32]:
    return boundary_values(BF16)


ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def _half_patterns(fmt: Format) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(is NaN, is negative) of every 16-bit pattern of ``fmt``, from the fields alone."""
    magnitude = ALL16.astype(np.int64) & 0x7FFF
    return magnitude > fmt.inf, (ALL16.astype(np.int64) >> 15) == 1


@pytest.mark.parametrize("mode", MODES)
def test_f16_round_trip_is_identity_on_every_non_nan_pattern(mode: str) -> None:
    nan, negative = _half_patterns(F16)
    wide = cast(mx.array(ALL16).view(mx.float16), mx.float32, rounding=mode)
    expected = ALL16.view(np.float16).astype(np.float32).view(np.uint32).astype(np.int64)
    expected = np.where(nan, (negative.astype(np.int64) << 31) | F32_QUIET_NAN, expected)
    assert np.array_equal(np.array(wide.view(mx.uint32)).astype(np.int64), expected)
    back = np.array(cast(wide, mx.float16, rounding=mode).view(mx.uint16)).astype(np.int64)
    assert np.array_equal(back, with_policy_nans(ALL16.astype(np.int64), nan, negative, F16))
    same = np.array(cast(mx.array(ALL16).view(mx.float16), "f16").view(mx.uint16))
    assert np.array_equal(same.astype(np.int64), back)  # a same-type cast follows the policy


@pytest.mark.parametrize("mode", MODES)
def test_bf16_round_trip_is_identity_on_every_non_nan_pattern(mode: str) -> None:
    nan, negative = _half_patterns(BF16)
    wide = cast(mx.array(ALL16).view(mx.bfloat16), "f32", rounding=mode)
    expected = ALL16.astype(np.int64) << 16
    expected = np.where(nan, (negative.astype(np.int64) << 31) | F32_QUIET_NAN, expected)
    assert np.array_equal(np.array(wide.view(mx.uint32)).astype(np.int64), expected)
    back = np.array(cast(wide, "bf16", rounding=mode).view(mx.uint16)).astype(np.int64)
    assert np.array_equal(back, with_policy_nans(ALL16.astype(np.int64), nan, negative, BF16))


@pytest.mark.parametrize("mode", MODES)
def test_f32_to_f16_around_every_boundary(mode: str, f32_around_f16: NDArray[np.float32]) -> None:
    bits = f32_around_f16.view(np.uint32)
    assert_matches(run_cast(bits, mx.float16, mode), f32_around_f16.astype(np.float64), F16, mode)


@pytest.mark.parametrize("mode", MODES)
def test_f32_to_bf16_around_every_boundary(mode: str, f32_around_bf16: NDArray[np.float32]) -> None:
    bits = f32_around_bf16.view(np.uint32)
    got = run_cast(bits, mx.bfloat16, mode)
    assert_matches(got, f32_around_bf16.astype(np.float64), BF16, mode)


def test_f32_to_f16_nearest_even_matches_numpy(f32_around_f16: NDArray[np.float32]) -> None:
    got = run_cast(f32_around_f16.view(np.uint32), mx.float16, "nearest_even")
    with np.errstate(over="ignore"):
        want = f32_around_f16.astype(np.float16).view(np.uint16).astype(np.int64)
    # numpy carries NaN payloads; the policy replaces them by the quiet NaN.
    nan = np.isnan(f32_around_f16)
    assert np.array_equal(got, with_policy_nans(want, nan, np.signbit(f32_around_f16), F16))


def test_f32_to_bf16_nearest_even_matches_torch(f32_around_bf16: NDArray[np.float32]) -> None:
    got = run_cast(f32_around_bf16.view(np.uint32), mx.bfloat16, "nearest_even")
    want = torch.from_numpy(f32_around_bf16).to(torch.bfloat16).view(torch.int16).numpy()
    want64 = want.astype(np.uint16).astype(np.int64)
    nan = np.isnan(f32_around_bf16)
    assert np.array_equal(got, with_policy_nans(want64, nan, np.signbit(f32_around_bf16), BF16))


@pytest.mark.parametrize("mode", MODES)
def test_f16_to_bf16_all_bit_patterns(mode: str) -> None:
    got = np.array(
        cast(mx.array(ALL16).view(mx.float16), mx.bfloat16, rounding=mode).view(mx.uint16)
    )
    values = ALL16.view(np.float16).astype(np.float64)
    assert_matches(got.astype(np.int64), values, BF16, mode)


@pytest.mark.parametrize("mode", MODES)
def test_bf16_to_f16_all_bit_patterns(mode: str) -> None:
    got = np.array(
        cast(mx.array(ALL16).view(mx.bfloat16), mx.float16, rounding=mode).view(mx.uint16)
    )
    values = (ALL16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    assert_matches(got.astype(np.int64), values, F16, mode)


def test_directed_overflow_and_signed_zero() -> None:
    x = mx.array([1e6, -1e6, 1e-30, -1e-30, 0.0, -0.0], dtype=mx.float32)

    def f16(mode: str) -> list[float]:
        return [float(v) for v in np.array(cast(x, "f16", rounding=mode).astype(mx.float32))]

    tiny = 2.0**-24
    assert f16("nearest_even") == [np.inf, -np.inf, 0.0, -0.0, 0.0, -0.0]
    assert f16("toward_zero") == [65504.0, -65504.0, 0.0, -0.0, 0.0, -0.0]
    assert f16("upward") == [np.inf, -65504.0, tiny, -0.0, 0.0, -0.0]
    assert f16("downward") == [65504.0, -np.inf, 0.0, -tiny, 0.0, -0.0]
    signs = np.signbit(np.array(cast(x, "f16", rounding="upward").astype(mx.float32)))
    assert signs.tolist() == [False, True, False, True, False, True]


def test_enum_member_and_same_dtype() -> None:
    x = mx.array([1.0, 2.5], dtype=mx.float16)
    assert cast(x, mx.float16, rounding=Rounding.upward).dtype == mx.float16
    y = cast(mx.array([1 + 2**-20], dtype=mx.float32), "f16", rounding=Rounding.upward)
    assert y.astype(mx.float32).item() == 1 + 2**-10


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((mx.array([1, 2]), "f16"), {}, TypeError, "x must be a float array"),
        ((mx.array([1.0]), "f64"), {}, ValueError, "f32, f16 or bf16"),
        ((mx.array([1.0]), mx.int32), {}, ValueError, "dtype must be"),
        ((mx.array([1.0]), "f16"), {"rounding": "nearest_odd"}, ValueError, "nearest_even"),
        (([1.0], "f16"), {}, TypeError, "mx.array"),
    ],
)
def test_bad_inputs(
    args: tuple[object, ...], kwargs: dict[str, object], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        cast(*args, **kwargs)  # type: ignore[arg-type]
