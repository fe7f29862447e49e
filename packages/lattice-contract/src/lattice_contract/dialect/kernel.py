"""Kernel-offset enumeration: the one place that fixes the order of taps.

A tap ``k = (kx, ky, kz)`` with each component in ``[0, K)`` has flattened row
``(kx * Ky + ky) * Kz + kz`` (z fastest), which is the row of the
``conv3d_o_xyz_i`` weight ``W[:, kx, ky, kz, :]``.  Every runtime builds its
kernel maps from these functions so that a weight row means the same tap
everywhere.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence

Triple = tuple[int, int, int]


def is_int(value: object) -> bool:
    """Whether ``value`` counts as an int in an option: any integral scalar but a bool.

    NumPy integers (``np.int64(2)``) count, so a value read from an array is
    accepted everywhere an int is; ``True`` does not, as it is almost always a
    mistake for a size.
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_triple(value: int | Sequence[int], name: str = "value") -> Triple:
    """Broadcast an int to a triple, or check a length-3 sequence of ints (see :func:`is_int`)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or three ints, got a bool")
    if isinstance(value, numbers.Integral):
        whole = int(value)
        return (whole, whole, whole)
    if not isinstance(value, Iterable):
        raise TypeError(f"{name} must be an int or three ints, got {value!r}")
    items = tuple(value)
    if len(items) != 3 or not all(is_int(v) for v in items):
        raise ValueError(f"{name} must be an int or three ints, got {value!r}")
    return (int(items[0]), int(items[1]), int(items[2]))


def kernel_volume(kernel_size: int | Sequence[int]) -> int:
    """Number of taps of a kernel."""
    kx, ky, kz = as_triple(kernel_size, "kernel_size")
    return kx * ky * kz


def kernel_taps(kernel_size: int | Sequence[int]) -> list[Triple]:
    """Every tap ``(kx, ky, kz)`` in flattened-row order (z fastest)."""
    kx, ky, kz = as_triple(kernel_size, "kernel_size")
    return [(a, b, c) for a in range(kx) for b in range(ky) for c in range(kz)]


def tap_index(tap: Sequence[int], kernel_size: int | Sequence[int]) -> int:
    """Flattened row of one tap: ``(kx * Ky + ky) * Kz + kz``."""
    _, ky, kz = as_triple(kernel_size, "kernel_size")
    a, b, c = as_triple(tap, "tap")
    return (a * ky + b) * kz + c


def centred_offset(k: int, size: int, dilation: int = 1) -> int:
    """The **centred** per-axis rule: ``(k - K//2) * d`` for odd K, ``k * d`` for even K.

    This is the forward relation of ``conv3d``, ``target_conv3d`` and
    ``pool3d`` (upstream's): an odd kernel is centred on the output's own
    coordinate, an even one reads forward from it, as MinkowskiEngine does.
    """
    return (k - size // 2) * dilation if size % 2 else k * dilation


def indexed_offset(k: int, size: int, dilation: int = 1) -> int:
    """The **indexed** per-axis rule: ``k * d`` whatever the kernel size.

    This is the displacement of ``full_conv3d`` / ``full_pool3d`` (spconv's
    regular conv, ``c = o*s - p + k*d``) and of every transposed conv
    (``o = c*s - p + k*d``).  ``size`` is taken so that both rules share one
    signature.
    """
    del size
    return k * dilation


def _per_tap(
    rule: Callable[[int, int, int], int],
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int],
) -> list[Triple]:
    size = as_triple(kernel_size, "kernel_size")
    dil = as_triple(dilation, "dilation")
    return [
        (rule(t[0], size[0], dil[0]), rule(t[1], size[1], dil[1]), rule(t[2], size[2], dil[2]))
        for t in kernel_taps(size)
    ]


def centred_tap_offsets(
    kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1
) -> list[Triple]:
    """:func:`centred_offset` of every tap, in row order (``conv3d`` reads ``o*s + off - p``)."""
    return _per_tap(centred_offset, kernel_size, dilation)


def tap_offsets(
    kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1
) -> list[Triple]:
    """:func:`indexed_offset` (``k * d``) of every tap, in row order.

    The displacement of ``full_conv3d``/``full_pool3d`` and of the transposed convs.
    """
    return _per_tap(indexed_offset, kernel_size, dilation)


def subm_offsets(
    kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1
) -> list[Triple]:
    """Logical neighbour offsets of ``subm_conv3d`` per tap, in row order.

    Tap k reads the input at ``c + (k - floor((K - 1) / 2)) * d``.  For odd K
    that is the centred rule; an even kernel of size 4 reads offsets -1, 0,
    1, 2 (times the dilation), a Lattice extension centred the same way.
    """
    size = as_triple(kernel_size, "kernel_size")
    dil = as_triple(dilation, "dilation")
    half = tuple((k - 1) // 2 for k in size)
    return [
        (
            (t[0] - half[0]) * dil[0],
            (t[1] - half[1]) * dil[1],
            (t[2] - half[2]) * dil[2],
        )
        for t in kernel_taps(size)
    ]


def octree_child_bit(offset: Sequence[int]) -> int:
    """Bit of an occupancy code for the child at ``offset`` from ``2 * parent``: ``x + 2y + 4z``.

    x is the fastest bit, as in upstream, so occupancy bytes are
    interchangeable with it.  Note that this is *not* the tap order of a
    2x2x2 kernel (z fastest): :func:`octree_tap_bits` maps one to the other.
    """
    x, y, z = as_triple(offset, "offset")
    if not all(v in (0, 1) for v in (x, y, z)):
        raise ValueError(f"a child offset has components 0 or 1, got {offset!r}")
    return x + 2 * y + 4 * z


OCTREE_CHILD_OFFSETS: tuple[Triple, ...] = tuple(
    (b & 1, (b >> 1) & 1, (b >> 2) & 1) for b in range(8)
)
"""Offset from ``2 * parent`` of the child that bit ``b`` of an occupancy code describes."""


def octree_tap_bits() -> tuple[int, ...]:
    """Code bit of each tap of a 2x2x2 kernel, in tap (row) order.

    ``generative_conv_transpose3d`` (k = 2, s = 2) emits the candidate child
    of tap ``t`` as its ``t``-th row per parent, and a tap's parity packed as
    ``px * 4 + py * 2 + pz`` is its row index, so this one table turns
    either into the child's bit.
    """
    return tuple(octree_child_bit(tap) for tap in kernel_taps(2))
