"""Argument rules of the functional ops that are not keywords, written once for both runtimes.

The keyword attributes are declared in :mod:`lattice_contract.api_ops`;
this module holds the rules on array arguments that both runtimes apply
alike, with their messages.  A runtime computes the facts with its own array
code (is any batch index negative, are all points finite) and hands them
here, so the rule and its words exist once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["active_count", "check_point_values"]


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
    """
    if active is None:
        return total
    if isinstance(active, array_type):
        array: Any = active
        if array.dtype != int32 or tuple(array.shape) != (1,):
            raise TypeError(f"{op}: {name} must be an int32 tensor of shape (1,)")
        active = int(array.item())
    if isinstance(active, bool) or not isinstance(active, int) or not 0 <= active <= total:
        raise ValueError(
            f"{op}: {name} must lie in [0, {total}] (the number of points), got {active!r}"
        )
    return active
