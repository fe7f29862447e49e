"""Argument rules of the functional ops that are not keywords, written once for both runtimes.

The keyword attributes are declared in :mod:`lattice_contract.frontend.ops`;
this module holds the rules on array arguments that both runtimes apply
alike, with their messages.  A runtime computes the facts with its own array
code (is any batch index negative, are all points finite) and hands them
here, so the rule and its words exist once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lattice_contract.frontend.sparse_errors as sparse_errors
import lattice_contract.frontend.sparse_tensor as sparse_tensor

__all__ = ["CELL_LIMIT", "PointRules", "active_count", "check_cell_range", "check_point_values"]

CELL_LIMIT = float(2**31)
"""``voxelize`` coordinates ``cell * stride`` must lie in ``[-CELL_LIMIT, CELL_LIMIT)``
(int32's range, compared in f32 before the cast)."""


def check_point_values(op: str, *, batch_negative: bool, points_finite: bool) -> None:
    """Refuse voxelize / devoxelize points with a negative batch index or a non-finite value."""
    if batch_negative:
        raise ValueError(f"{op}: batch indices must be >= 0")
    if not points_finite:
        raise ValueError(f"{op}: points contain NaN or infinity; every point must be finite")


def active_count(
    active: object, total: int, op: str, name: str, *, array_type: type, int32: Any
) -> int:
    """How many leading points take part: ``total`` for None, else the count ``active`` gives.

    ``active`` is an int or the runtime's int32 array of shape ``(1,)`` (what
    an artifact's active-row input is); the count must lie in ``[0, total]``.
    The rule and its words are the SparseTensor constructors' own
    (:func:`lattice_contract.frontend.sparse_tensor.active_count`), prefixed with the
    op and the keyword's name.
    """

    def read_array(value: object) -> int | None:
        if not isinstance(value, array_type):
            return None
        array: Any = value
        if array.dtype != int32:
            raise sparse_errors.active_rows_dtype(array.dtype)
        if tuple(array.shape) != (1,):
            raise sparse_errors.active_rows_shape(tuple(array.shape))
        return int(array.item())

    try:
        return sparse_tensor.active_count(active, total, read_array)
    except (TypeError, ValueError) as err:
        words = str(err).removeprefix("active_rows")
        raise type(err)(f"{op}: {name}{words}") from None


def check_cell_range(in_range: bool) -> None:
    """Refuse a ``voxelize`` whose cells times the stride leave int32 (see :data:`CELL_LIMIT`)."""
    if not in_range:
        raise ValueError(
            "voxelize: (points - origin) / voxel_size * stride falls outside the int32 "
            "coordinate range; use a larger voxel_size or move the origin"
        )


@dataclass(frozen=True)
class PointRules:
    """The point-argument rules of ``voxelize``/``devoxelize``, bound to one runtime's arrays.

    A runtime makes one (``PointRules(mx.array, mx.int32)``) and asks it, so
    each rule is written here once and each runtime only computes the facts.
    """

    array_type: type
    """The runtime's dense array class."""
    int32: Any
    """The runtime's int32 dtype (what an active-row count array must be)."""
    cell_limit: float = CELL_LIMIT

    def check_values(self, op: str, *, batch_negative: bool, points_finite: bool) -> None:
        """:func:`check_point_values`."""
        check_point_values(op, batch_negative=batch_negative, points_finite=points_finite)

    def active_count(self, active: object, total: int, op: str, name: str) -> int:
        """:func:`active_count` with this runtime's array type."""
        return active_count(active, total, op, name, array_type=self.array_type, int32=self.int32)

    def check_cells(self, in_range: bool) -> None:
        """:func:`check_cell_range`."""
        check_cell_range(in_range)
