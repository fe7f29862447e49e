"""The one checking function of each value set: what builder, plan, exporter and runtimes call.

Every value set the dialect declares -- group sizes and bit widths of packed
weights, kernel/stride/padding/dilation triples, enum spellings, positive
counts and reals -- has exactly one membership test here.  The textual
builder, the plan freezer (whose re-check of a native payload is a wall, not a
copy), the exporter and both runtimes call it and word their own errors, so a
set cannot drift between them (a test greps the sources for copies).

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
import numbers
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple, TypeVar

from lattice_contract.dialect.coord_range import INT32_MAX, INT32_MIN
from lattice_contract.dialect.kernel import Triple, as_triple, is_int
from lattice_contract.dialect.schema import (
    DENSE_LAYOUTS,
    PACKED_DTYPE_OF_BITS,
    PACKING_GROUP_SIZES,
)

__all__ = [
    "GROUP_SIZES",
    "QUANT_BITS",
    "Window",
    "as_enum",
    "check_group_size",
    "check_logical_shape",
    "check_quant_bits",
    "check_quantization",
    "dense_layout",
    "int_triple",
    "is_group_size",
    "is_quant_bits",
    "packed_geometry",
    "positive_float",
    "positive_int",
    "resolve_batch_size",
    "softmax_axis",
    "triple_violation",
    "voxel_grid",
    "window",
]

E = TypeVar("E", bound=Enum)

QUANT_BITS: tuple[int, ...] = tuple(int(name.removeprefix("int")) for name in PACKED_DTYPE_OF_BITS)
"""Bit widths of the packed affine weight format: the schema's packed ``PackingBits`` (4, 8)."""

GROUP_SIZES: tuple[int, ...] = PACKING_GROUP_SIZES
"""Group sizes along C_in of the packed affine format (what MLX's ``mx.quantize`` supports);
the schema's, so the verifier, the plan and the quantizer agree."""


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


def triple_violation(triple: Triple, minimum: int | None) -> str | None:
    """The dialect rule a triple of ints breaks, or None when it is in its value set.

    ``minimum`` is the schema's bound (1 for kernel sizes, strides and
    dilations, 0 for padding, None for none).  ``"attr.minimum"``: an entry is
    below it; ``"geometry.int32"``: an entry leaves int32, the coordinates'
    range, which no kernel size, stride, padding or dilation may exceed.
    """
    least = min(triple)
    if minimum is not None and least < minimum:
        return "attr.minimum"
    if least < INT32_MIN or max(triple) > INT32_MAX:
        return "geometry.int32"
    return None


def int_triple(value: int | Sequence[int], name: str, *, minimum: int) -> Triple:
    """An int or three ints (one per axis), each at least ``minimum`` and within int32.

    ``minimum`` is 1 for kernel sizes, strides and dilations and 0 for padding
    (:func:`triple_violation` is the test).
    """
    out = as_triple(value, name)
    broken = triple_violation(out, minimum)
    if broken == "attr.minimum":
        raise ValueError(f"{name} must be >= {minimum} on every axis, got {out}")
    if broken is not None:
        raise ValueError(
            f"{name} must lie in [{INT32_MIN}, {INT32_MAX}] on every axis (coordinates are "
            f"int32), got {out}"
        )
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


def is_group_size(value: object) -> bool:
    """Whether ``value`` is a group size of the packed affine format (an int, not a bool)."""
    return is_int(value) and value in GROUP_SIZES


def check_group_size(value: object, name: str = "group_size") -> int:
    """``value`` as a packed weight's group size, or a ValueError naming the choices."""
    if not is_group_size(value):
        raise ValueError(
            f"{name} must be one of {', '.join(map(str, GROUP_SIZES))} "
            f"(what MLX's affine quantization supports), got {value!r}"
        )
    assert isinstance(value, numbers.Integral)  # what is_int accepted
    return int(value)


def is_quant_bits(value: object) -> bool:
    """Whether ``value`` is a bit width of the packed affine format (an int, not a bool)."""
    return is_int(value) and value in QUANT_BITS


def check_quant_bits(value: object, name: str = "bits") -> int:
    """``value`` as a packed weight's bit width, or a ValueError naming the choices."""
    if not is_quant_bits(value):
        raise ValueError(
            f"{name} must be {' or '.join(map(str, QUANT_BITS))} "
            f"({' / '.join(PACKED_DTYPE_OF_BITS)} packing), got {value!r}"
        )
    assert isinstance(value, numbers.Integral)  # what is_int accepted
    return int(value)


def check_quantization(bits: object, group_size: object) -> tuple[int, int]:
    """``(bits, group_size)`` of the packed affine format, or a ValueError naming the choices."""
    return check_quant_bits(bits), check_group_size(group_size)


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


def resolve_batch_size(batch_size: object, max_batch: int | None, op: str = "global_pool") -> int:
    """The B of a ``global_pool``: ``batch_size`` itself, or ``max batch + 1`` for -1.

    ``max_batch`` is the largest batch index of the input (None when it has
    no rows).  -1 infers B at run time, so one artifact serves any batch; 0
    is an empty batch set; a fixed B must exceed every batch index.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < -1:
        raise ValueError(
            f"{op}: batch_size must be an int >= 1, 0 (no batch items) or -1 (inferred as the "
            f"largest batch index + 1), got {batch_size!r}"
        )
    if batch_size == -1:
        return 0 if max_batch is None else max_batch + 1
    if max_batch is not None and max_batch >= batch_size:
        raise ValueError(
            f"{op}: the input has batch index {max_batch} but batch_size={batch_size}; pass "
            "batch_size > every batch index, or -1 to infer it"
        )
    return batch_size


def dense_layout(value: object, op: str = "sparse_to_dense") -> str:
    """A ``sparse_to_dense`` layout: one of the schema's :data:`DENSE_LAYOUTS` spellings."""
    if not isinstance(value, str) or value not in DENSE_LAYOUTS:
        raise ValueError(f"{op}: layout must be one of {', '.join(DENSE_LAYOUTS)}, got {value!r}")
    return value


def softmax_axis(axis: object, op: str = "softmax") -> int:
    """Check a softmax ``axis``: the channel axis of a rank-2 tensor, spelled -1 or 1."""
    if isinstance(axis, bool) or axis not in (-1, 1):
        raise ValueError(
            f"{op}: axis must be -1 or 1 (the channel axis of a rank-2 feature tensor), "
            f"got {axis!r}"
        )
    return -1 if axis == -1 else 1


FloatTriple = tuple[float, float, float]


def voxel_grid(voxel_size: object, origin: object, op: str) -> tuple[FloatTriple, FloatTriple]:
    """``(voxel_size, origin)`` of ``voxelize``/``devoxelize`` as float triples.

    Either may be one number (broadcast to the three axes) or three; sizes
    must be positive and finite, the origin finite.
    """

    def triple_of(value: object, name: str) -> FloatTriple:
        items = value if isinstance(value, Sequence) and not isinstance(value, str) else None
        if items is None:
            items = (value, value, value)
        if len(items) != 3:
            raise ValueError(f"{op}: {name} must be a number or three numbers, got {value!r}")
        out = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise TypeError(f"{op}: {name} must be a number or three numbers, got {value!r}")
            if not math.isfinite(float(item)):
                raise ValueError(f"{op}: {name} must be finite, got {value!r}")
            out.append(float(item))
        return (out[0], out[1], out[2])

    size = triple_of(voxel_size, "voxel_size")
    if min(size) <= 0:
        raise ValueError(f"{op}: voxel_size must be > 0 on every axis, got {voxel_size!r}")
    return size, triple_of(origin, "origin")


def packed_geometry(
    weight_shape: Sequence[int], scale_shape: Sequence[int], bits: int, group_size: int
) -> tuple[int, int, int]:
    """``(K, C_out, padded C_in)`` of a packed triplet in the stored (upstream) layout.

    ``weight`` is ``(K, C_out, words)`` and ``scales``/``biases`` ``(K, C_out,
    groups)`` when K = 1, or ``(K, words, C_out)`` and ``(K, groups, C_out)``
    when K > 1; ``words * 32 / bits`` and ``groups * group_size`` must agree
    on one padded C_in.  Raises ValueError naming the mismatch.
    """
    ws, ss = tuple(int(d) for d in weight_shape), tuple(int(d) for d in scale_shape)
    if len(ws) != 3 or ws[0] < 1:
        raise ValueError(
            f"packed words have shape {ws}; the stored layout is (K, C_out, words) for one "
            "tap matrix or (K, words, C_out) for K > 1"
        )
    k = ws[0]
    c_out, words = (ws[1], ws[2]) if k == 1 else (ws[2], ws[1])
    padded = words * 32 // bits
    if padded % group_size:
        raise ValueError(
            f"packed words {ws} hold {padded} input channels, not a multiple of group_size "
            f"{group_size}"
        )
    groups = padded // group_size
    want = (k, c_out, groups) if k == 1 else (k, groups, c_out)
    if ss != want:
        raise ValueError(
            f"scales have shape {ss}; words {ws} with group_size {group_size} need {want}"
        )
    return k, c_out, padded


def check_logical_shape(
    shape: Sequence[int], geometry: tuple[int, int, int], group_size: int
) -> None:
    """Check that a packed ``(K, C_out, padded C_in)`` can hold the logical weight ``shape``.

    ``shape`` is ``(C_out, C_in)`` (K = 1) or ``(C_out, Kx, Ky, Kz, C_in)``
    (K = Kx*Ky*Kz); C_in padded to the group size must be the packed width.
    """
    k, c_out, padded = geometry
    dims = tuple(int(d) for d in shape)
    taps = math.prod(dims[1:-1]) if len(dims) > 2 else 1
    if len(dims) not in (2, 5) or dims[0] != c_out or taps != k:
        raise ValueError(
            f"a packed weight of {k} tap matrices with {c_out} output channels cannot hold "
            f"shape {dims}"
        )
    if -(-dims[-1] // group_size) * group_size != padded:
        raise ValueError(
            f"a packed weight {padded} input channels wide (C_in padded to a multiple of "
            f"group_size {group_size}) cannot hold C_in = {dims[-1]}"
        )
