"""The active-row check of both runtimes' ``SparseTensor`` constructors.

``mlx_lattice.SparseTensor`` and ``torch_lattice.SparseTensor`` take an
optional active-row count (None, an int, or an int32 ``(1,)`` array); the rule
is written here once (the words of its errors are in
:mod:`lattice_contract.sparse_errors`).  Each runtime passes in the one step
that reads its own array type.  Their stride goes through the ops' own check,
:func:`lattice_contract.options.int_triple`, so a stride is accepted and
refused with the same words wherever it is given.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

from lattice_contract import sparse_errors

__all__ = ["active_count"]


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
