"""What both runtimes' occupancy utilities share: the hierarchy record, limits, checks, words.

``mlx_lattice.occupancy`` and ``torch_lattice.occupancy`` build the same
octree (child bit ``x + 2y + 4z``, canonical order level by level) on their
own arrays; everything that does not touch an array lives here once: the
:class:`OccupancyHierarchy` record (generic in the array type), the depth
limit, the argument checks that read plain values, the errors of the checks
that read arrays, and the grid arithmetic of ``quantize_points`` that is not
per point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from lattice_contract.kernel import OCTREE_CHILD_OFFSETS, octree_tap_bits
from lattice_contract.sparse_errors import ARRAY_TYPES, dtype_word

__all__ = [
    "CHILD_TAPS",
    "MAX_LEVELS",
    "TAP_BITS",
    "OccupancyHierarchy",
    "check_levels",
    "check_rows_array",
    "codes_per_parent",
    "coords_dtype",
    "coords_shape",
    "empty_cloud",
    "fit_scale",
    "negative_batch",
    "non_finite_cloud",
    "outside_grid",
]

MAX_LEVELS = 30
"""Deepest grid supported: ``2^30`` still fits int32 coordinates after doubling."""

CHILD_TAPS = OCTREE_CHILD_OFFSETS
"""Offset from ``2 * parent`` of the child that bit ``b`` of an occupancy code describes."""

TAP_BITS = octree_tap_bits()
"""Code bit of each 2x2x2 tap (the parity ``px * 4 + py * 2 + pz`` is the tap's index)."""


class _Rows(Protocol):
    @property
    def shape(self) -> tuple[int, ...]: ...


A = TypeVar("A", bound=_Rows)


@dataclass(frozen=True)
class OccupancyHierarchy(Generic[A]):
    """The levels of a voxel cloud from the coarsest (index 0) to the input (index ``L``).

    ``levels[l]`` holds the logical int32 rows of depth ``l`` in canonical
    order and ``codes[l]`` the uint8 child-occupancy codes of those rows
    (``l < L``), so ``expand_occupancy(levels[l], codes[l])`` equals
    ``levels[l + 1]``.  For a cloud inside ``[0, 2^L)^3`` with one batch item,
    ``levels[0]`` is the single root voxel.
    """

    levels: tuple[A, ...]
    codes: tuple[A, ...]

    @property
    def depth(self) -> int:
        """Number of downsampling steps L."""
        return len(self.codes)

    def counts(self) -> list[int]:
        """Rows per level, coarsest first."""
        return [int(level.shape[0]) for level in self.levels]


def check_levels(levels: object) -> int:
    """The number of levels: an int in ``[1, MAX_LEVELS]``."""
    if isinstance(levels, bool) or not isinstance(levels, int):
        raise TypeError(f"levels must be an int, got {type(levels).__name__}")
    if not 1 <= levels <= MAX_LEVELS:
        raise ValueError(f"levels must lie in [1, {MAX_LEVELS}], got {levels}")
    return levels


def check_rows_array(what: str, coords: object, array_type: type) -> None:
    """Occupancy rows: an ``array_type`` of int32 ``(N, 4)`` rows (the batch is checked apart)."""
    if not isinstance(coords, array_type):
        raise TypeError(f"{what} must be an array ({ARRAY_TYPES}), got {type(coords).__name__}")
    if dtype_word(getattr(coords, "dtype", None)) != "int32":
        raise coords_dtype(what, getattr(coords, "dtype", None))
    shape = tuple(getattr(coords, "shape", ()))
    if len(shape) != 2 or shape[1] != 4:
        raise coords_shape(what, shape)


def coords_dtype(what: str, dtype: object) -> TypeError:
    """Occupancy rows that are not int32."""
    word = str(dtype).rsplit(".", 1)[-1]
    return TypeError(f"{what} must be int32, got {word}; convert them to int32")


def coords_shape(what: str, shape: tuple[int, ...]) -> ValueError:
    """Occupancy rows that are not ``(N, 4)``."""
    return ValueError(
        f"{what} must have shape (N, 4) with rows (batch, x, y, z), got {tuple(shape)}"
    )


def negative_batch(what: str) -> ValueError:
    """Occupancy rows with a negative batch index."""
    return ValueError(f"{what} has a negative batch index; batch indices must be >= 0")


def codes_per_parent(codes: int, parents: int) -> ValueError:
    """``expand_occupancy`` given another number of codes than parents."""
    return ValueError(
        f"codes has {codes} entries but parents has {parents} rows; one code per parent"
    )


def empty_cloud() -> ValueError:
    """``quantize_points`` of no points."""
    return ValueError("the point cloud is empty; there is nothing to quantise")


def non_finite_cloud() -> ValueError:
    """``quantize_points`` of a cloud holding NaN or infinity."""
    return ValueError("the point cloud holds NaN or infinite coordinates; remove them first")


def outside_grid(depth: int) -> ValueError:
    """``quantize_points(fit=False)`` of points outside the grid."""
    return ValueError(
        f"points lie outside the [0, {1 << depth}) grid of depth {depth}; pass fit=True "
        "to rescale them into it"
    )


def fit_scale(extent: float, depth: int) -> float:
    """Cells per unit when the longest side ``extent`` of a cloud spans the ``2^depth`` grid."""
    side = float(1 << depth)
    return side / extent if extent > 0 else 1.0
