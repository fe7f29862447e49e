"""The float formats ``cast`` converts between, and its one NaN policy, for both runtimes.

``lattice.cast`` promises the same bits on every runtime (docs/semantics.md).
Rounding is fixed by its ``rounding`` attribute; what remains is NaN, whose
payload IEEE 754 leaves to the implementation.  Lattice fixes it:

**NaN policy.**  Every NaN that ``cast`` returns is the target format's
canonical quiet NaN with the input's sign: exponent all ones, only the most
significant significand bit set (``0x7FC00000`` / ``0xFFC00000`` for f32,
``0x7E00`` / ``0xFE00`` for f16, ``0x7FC0`` / ``0xFFC0`` for bf16).  Payloads and
signalling NaNs are not carried through, so the result never depends on how a
runtime's own float conversion treats them, and a same-type cast follows the
rule too (it is a conversion, not a copy).

Both runtimes take the formats' parameters from :data:`FLOAT_FORMATS`, so the
field widths and the NaN encodings are written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "CAST_TARGETS",
    "FLOAT_FORMATS",
    "FloatFormat",
    "cast_source_error",
    "cast_target_error",
]


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE 754 binary interchange format (or bfloat16), by its field widths."""

    name: str
    exponent_bits: int
    mantissa_bits: int

    @property
    def width(self) -> int:
        """Total bits: sign, exponent and stored significand."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        """Exponent bias."""
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Smallest normal binary exponent."""
        return 1 - self.bias

    @property
    def inf_bits(self) -> int:
        """Encoding of +infinity (exponent all ones, significand zero)."""
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def quiet_nan_bits(self) -> int:
        """Encoding of the canonical positive quiet NaN: the policy's NaN (OR the sign bit)."""
        return self.inf_bits | (1 << (self.mantissa_bits - 1))

    @property
    def sign_bit(self) -> int:
        """The sign bit's value."""
        return 1 << (self.width - 1)


FLOAT_FORMATS: Final[dict[str, FloatFormat]] = {
    "f16": FloatFormat("f16", 5, 10),
    "bf16": FloatFormat("bf16", 8, 7),
    "f32": FloatFormat("f32", 8, 23),
    "f64": FloatFormat("f64", 11, 52),
}
"""Schema element-type spelling -> format (f64 only as a torch source, for gradcheck)."""

CAST_TARGETS: Final = ("f16", "bf16", "f32")
"""The element types a ``cast`` may produce (the artifact's float types)."""


def cast_target_error(dtype: object) -> ValueError:
    """A ``cast`` to something that is not one of :data:`CAST_TARGETS`."""
    return ValueError(
        f"cast: dtype must be f32, f16 or bf16 (or the runtime's float32, float16 or bfloat16 "
        f"dtype), got {dtype!r}"
    )


def cast_source_error(dtype: object) -> TypeError:
    """A ``cast`` of an array that is not of a float type."""
    word = str(dtype).rsplit(".", 1)[-1]
    return TypeError(f"cast: x must be a float array (float32, float16 or bfloat16), got {word}")
