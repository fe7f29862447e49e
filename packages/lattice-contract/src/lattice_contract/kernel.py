"""Kernel-offset enumeration: the one place that fixes the order of taps.

A tap ``k = (kx, ky, kz)`` with each component in ``[0, K)`` has flattened row
``(kx * Ky + ky) * Kz + kz`` (z fastest), which is the row of the
``conv3d_o_xyz_i`` weight ``W[:, kx, ky, kz, :]``.  Every runtime builds its
kernel maps from these functions so that a weight row means the same tap
everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

Triple = tuple[int, int, int]


def as_triple(value: int | Sequence[int], name: str = "value") -> Triple:
    """Broadcast an int to a triple, or check a length-3 sequence of ints."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or three ints, got a bool")
    if isinstance(value, int):
        return (value, value, value)
    items = tuple(value)
    if len(items) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
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


def centred_offsets(
    kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1
) -> list[Triple]:
    """Logical neighbour offsets of ``subm_conv3d`` per tap, in row order.

    Tap k reads the input at ``c + (k - floor((K - 1) / 2)) * d``, so an even
    kernel of size 4 reads offsets -1, 0, 1, 2 (times the dilation).
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


def tap_offsets(
    kernel_size: int | Sequence[int], dilation: int | Sequence[int] = 1
) -> list[Triple]:
    """``k * d`` per tap, in row order: the displacement of strided and transposed convs."""
    size = as_triple(kernel_size, "kernel_size")
    dil = as_triple(dilation, "dilation")
    return [(t[0] * dil[0], t[1] * dil[1], t[2] * dil[2]) for t in kernel_taps(size)]


OCTREE_CHILD_TAPS: tuple[Triple, ...] = tuple(kernel_taps(2))
"""Offset of child ``k`` from ``2 * parent`` in an occupancy octree.

Child ``k`` is tap ``k`` of a 2x2x2 kernel, so bit ``k`` of an 8-bit
occupancy code is exactly the candidate that ``generative_conv_transpose3d``
(k = 2, s = 2) emits as its ``k``-th tap.
"""


def octree_parity_to_child() -> tuple[int, ...]:
    """Child index of each parity triple packed as ``px * 4 + py * 2 + pz``.

    Runtimes compute a child's parity from its coordinates and look its bit
    up here, so the child order is still read from :func:`kernel_taps` only.
    """
    table = [0] * 8
    for index, (a, b, c) in enumerate(OCTREE_CHILD_TAPS):
        table[a * 4 + b * 2 + c] = index
    return tuple(table)
