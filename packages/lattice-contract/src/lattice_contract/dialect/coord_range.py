"""Coordinates are int32: the rule every coordinate-computing op checks before emitting a row.

Sparse values store physical coordinates as int32 (the sparse-value
contract).  A support-generating op (``full_conv3d``, ``full_pool3d``, the
transposed and generative convolutions, ``pool_transpose3d``) computes each
output coordinate from an input row, e.g. ``o = c*s - p + k*d``; near the
ends of int32 the true value can leave the range, and a runtime that let it
wrap would emit a row somewhere else (torch wrapped to -2^31 and emitted
duplicate rows; MLX merged distinct outputs into one).  Both runtimes
compute candidate coordinates in 64-bit integers, and before any row is
emitted the first one outside ``[-2^31, 2^31)`` raises
:class:`Int32CoordinateError`, naming the op, the axis, the value and the
input row it came from.  (``conv3d``/``pool3d`` emit ``floor(c / s)``, which
always fits.)
"""

from __future__ import annotations

from typing import Final

__all__ = ["INT32_MAX", "INT32_MIN", "Int32CoordinateError"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
_AXES: Final = ("batch", "x", "y", "z")


class Int32CoordinateError(ValueError):
    """An output coordinate an op would emit does not fit int32.

    ``op`` is the public op's name (filled in by the op layer with
    :meth:`with_op` when the kernel-map code that detects it serves several
    ops), ``axis`` 1-3 for x/y/z, ``value`` the exact (physical) coordinate,
    ``row`` the input row index and ``coords`` that row's physical
    coordinates.
    """

    def __init__(self, op: str, axis: int, value: int, row: int, coords: tuple[int, ...]) -> None:
        self.op, self.axis, self.value, self.row, self.coords = op, axis, value, row, coords
        super().__init__(
            f"{op or 'a support-generating op'}: the output coordinate on axis "
            f"{_AXES[axis]} would be {value}, outside int32 [{INT32_MIN}, {INT32_MAX}], "
            f"for input row {row} (batch, x, y, z) = {coords}; sparse coordinates are int32: "
            "move the input away from the int32 limits or change the op's stride, padding "
            "or dilation"
        )

    def with_op(self, op: str) -> Int32CoordinateError:
        """The same error naming ``op`` (unchanged when it already names one)."""
        if self.op:
            return self
        return Int32CoordinateError(op, self.axis, self.value, self.row, self.coords)
