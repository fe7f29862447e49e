"""The argument checks of both runtimes' ``SparseTensor`` constructors that read no array.

``mlx_lattice.SparseTensor`` and ``torch_lattice.SparseTensor`` take a stride
(an int or three ints) and an optional active-row count (None, an int, or an
int32 ``(1,)`` array); the rules and the words of their errors are written
here once (the words of the array checks are in
:mod:`lattice_contract.sparse_errors`).  Each runtime passes in the one step
that reads its own array type.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

from lattice_contract import sparse_errors

__all__ = ["active_count", "sparse_stride"]

Triple = tuple[int, int, int]


def sparse_stride(stride: object, name: str = "stride") -> Triple:
    """A positive int triple from an int or three ints, with an error naming the fix.

    Integer-like scalars (NumPy integers included) count as ints; bools do not.
    """

    def is_int(value: object) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)

    if is_int(stride):
        items: tuple[object, ...] = (stride, stride, stride)
    elif isinstance(stride, Sequence) and not isinstance(stride, (str, bytes)):
        items = tuple(stride)
    else:
        raise TypeError(f"{name} must be a positive int or three positive ints, got {stride!r}")
    if len(items) != 3 or not all(is_int(v) for v in items):
        raise ValueError(f"{name} must be a positive int or three positive ints, got {stride!r}")
    values = (int(items[0]), int(items[1]), int(items[2]))  # type: ignore[call-overload]
    if min(values) < 1:
        raise ValueError(f"{name} must be positive on every axis, got {values}")
    return values


def active_count(
    active_rows: object, num_rows: int, read_array: Callable[[object], int | None]
) -> int:
    """The active-row count: ``num_rows`` for None, else an int or an int32 ``(1,)`` array.

    ``read_array(value)`` is the runtime's step: None when ``value`` is not one
    of its arrays, else its single int32 entry (raising
    :func:`~lattice_contract.sparse_errors.active_rows_dtype` /
    :func:`~lattice_contract.sparse_errors.active_rows_shape` for another dtype
    or shape).  The count must lie in ``[0, num_rows]``.
    """
    if active_rows is None:
        return num_rows
    if isinstance(active_rows, bool):
        raise sparse_errors.active_rows_kind(active_rows)
    if isinstance(active_rows, numbers.Integral):
        count = int(active_rows)
    else:
        found = read_array(active_rows)
        if found is None:
            raise sparse_errors.active_rows_kind(active_rows)
        count = found
    if count < 0 or count > num_rows:
        raise sparse_errors.active_rows_range(count, num_rows)
    return count
