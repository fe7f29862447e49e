"""Checks of the plain-Python options every runtime's ops and modules accept.

``mlx_lattice`` and ``torch_lattice`` expose the same functional ops and nn
modules, and their keyword options (enum values given as strings, channel
counts, kernel geometry, ``eps``, ``voxel_size``, quantization bits and group
size) have nothing to do with either array library.  Checking them here, once,
means both runtimes accept exactly the same values and reject the rest with
the same error class and wording -- which the cross-runtime conformance tests
compare -- instead of two copies drifting apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple, TypeVar

from lattice_contract.kernel import Triple, as_triple

__all__ = [
    "GROUP_SIZES",
    "QUANT_BITS",
    "Window",
    "as_enum",
    "check_quantization",
    "int_triple",
    "positive_float",
    "positive_int",
    "window",
]

E = TypeVar("E", bound=Enum)

QUANT_BITS: tuple[int, ...] = (4, 8)
"""Bit widths of the packed affine weight format (int4, int8)."""

GROUP_SIZES: tuple[int, ...] = (32, 64, 128)
"""Group sizes along C_in of the packed affine format (what MLX's ``mx.quantize`` supports)."""


def as_enum(value: object, enum_type: type[E], name: str) -> E:
    """Accept a schema enum member or its string value; anything else is a ValueError.

    Ops and modules take either spelling (``mode="max"`` or ``PoolMode.max``),
    so user code never has to import the schema just to pick an option.
    """
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value)
        except ValueError:
            pass
    allowed = ", ".join(repr(m.value) for m in enum_type)
    raise ValueError(f"{name} must be one of {allowed} (or {enum_type.__name__}), got {value!r}")


def positive_int(value: object, name: str) -> int:
    """A channel or feature count: a positive int (not a bool), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def int_triple(value: int | Sequence[int], name: str, *, minimum: int) -> Triple:
    """An int or three ints (one per axis), each at least ``minimum``.

    ``minimum`` is 1 for kernel sizes, strides and dilations and 0 for padding.
    """
    out = as_triple(value, name)
    if min(out) < minimum:
        raise ValueError(f"{name} must be >= {minimum} on every axis, got {out}")
    return out


def positive_float(value: object, name: str, op: str) -> float:
    """A positive, finite real number (``eps``, ``voxel_size``) as a float.

    A non-number (a bool included) is a TypeError; zero, a negative value,
    NaN or infinity is a ValueError -- each names the op and the option.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: {name} must be a positive finite number, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{op}: {name} must be a positive finite number, got {value!r}")
    return float(value)


def check_quantization(bits: object, group_size: object) -> tuple[int, int]:
    """``(bits, group_size)`` of the packed affine format, or a ValueError naming the choices."""
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in QUANT_BITS:
        raise ValueError(f"bits must be 4 or 8 (int4 / int8 packing), got {bits!r}")
    if (
        isinstance(group_size, bool)
        or not isinstance(group_size, int)
        or group_size not in GROUP_SIZES
    ):
        raise ValueError(
            f"group_size must be one of {', '.join(map(str, GROUP_SIZES))} "
            f"(what MLX's affine quantization supports), got {group_size!r}"
        )
    return bits, group_size


class Window(NamedTuple):
    """Checked geometry of a conv or pooling window, one int per axis."""

    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple


def window(
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
) -> Window:
    """Kernel size, stride, padding and dilation as checked triples.

    ``stride=None`` means "the kernel size", the default of pooling modules
    (as in ``torch.nn`` pools).
    """
    kernel = int_triple(kernel_size, "kernel_size", minimum=1)
    return Window(
        kernel,
        kernel if stride is None else int_triple(stride, "stride", minimum=1),
        int_triple(padding, "padding", minimum=0),
        int_triple(dilation, "dilation", minimum=1),
    )
