"""What both runtimes' occupancy utilities share: the steps, checks, words and the record.

A voxel cloud at depth ``L`` (integer coordinates in a ``2^L`` grid) has a
parent at depth ``L - 1`` for every occupied 2×2×2 block, and each parent is
described completely by an 8-bit *child-occupancy code*.  Repeating that down
to the root gives the hierarchy a geometry codec transmits: the root, then one
code per occupied voxel of every coarser level.  ``mlx_lattice.occupancy`` and
``torch_lattice.occupancy`` build and invert it on their own arrays,
vectorised over rows (no loop runs over points or voxels), and give identical
rows, codes and orders.

**Child bit order.**  Bit ``b`` of parent ``p``'s code (value ``1 << b``) says
whether the child ``2 * p + CHILD_TAPS[b]`` is occupied, with the child's
offset ``(x, y, z)`` giving ``b = x + 2y + 4z`` (x fastest, as upstream, so
occupancy bytes are interchangeable; :func:`lattice_contract.dialect.kernel.octree_child_bit`).
Candidate children are listed in the other order, the tap order of a 2×2×2
kernel (z fastest), which is the row order of ``generative_conv_transpose3d``
with ``kernel_size=2, stride=2`` and the Morton order within a parent; the
table :func:`lattice_contract.dialect.kernel.octree_tap_bits` maps a tap to its bit.

**Morton order refines level by level.**  The canonical order (batch, then the
Morton code of ``x + 2^31, y + 2^31, z + 2^31``) of a level lists the children
of each parent contiguously, in tap order (the taps enumerate x, y, z parity
with x most significant, which is the Morton interleave of the lowest bit), and
the parents themselves in canonical order.  So only the input level is sorted;
a canonically ordered level downsamples to a canonically ordered parent level
by a shift and an adjacent-unique pass, and expanding a canonically ordered
parent level yields its children in canonical order.  The offset ``2^31`` does
not break this: for ``u = c + 2^31`` the parent's code word is ``v + 2^30``
with ``v = u >> 1 < 2^31``, and adding ``2^30`` only rewrites bit 30 of ``v``
as bits 31 and 30 (``b -> (b, 1 - b)``), so the highest bit plane where two
rows differ, the axes that differ there and which row is larger are all
unchanged.  The torch tests check the property against a direct sort.

Everything that does not touch an array lives here once: the
:class:`OccupancyHierarchy` record (generic in the array type), the depth
limit, the argument checks and their errors, the grid arithmetic of
``quantize_points`` that is not per point, the public names
(:data:`RUNTIME_NAMES`), and :class:`OccupancyOps`: the public functions
themselves (their docstrings, checks and the order of their steps), written
once over a few array primitives that each runtime implements with its own
library.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from lattice_contract.dialect import OCTREE_CHILD_OFFSETS, octree_tap_bits
from lattice_contract.frontend.sparse_errors import ARRAY_TYPES, dtype_word

__all__ = [
    "CHILD_TAPS",
    "MAX_LEVELS",
    "RUNTIME_NAMES",
    "TAP_BITS",
    "OccupancyHierarchy",
    "OccupancyOps",
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

RUNTIME_NAMES = (
    "CHILD_TAPS",
    "OccupancyHierarchy",
    "candidate_children",
    "child_bits",
    "downsample_occupancy",
    "expand_occupancy",
    "morton_sort",
    "occupancy_hierarchy",
    "quantize_points",
)
"""The public names of each runtime's ``occupancy`` module (its ``__all__``)."""

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


In = TypeVar("In")
H = TypeVar("H", bound="OccupancyHierarchy[Any]")


class OccupancyOps(ABC, Generic[A, In, H]):
    """The occupancy functions of one runtime: shared steps over that runtime's array primitives.

    ``A`` is the runtime's array type, ``In`` what its functions accept as
    rows (MLX also takes NumPy arrays) and ``H`` the runtime's
    :class:`OccupancyHierarchy` subclass, which ``occupancy_hierarchy`` is
    typed to return, so a user passes its result on to functions that take
    the runtime's class (``torch_lattice.geometry.stacked_level_inputs``).
    Each runtime module binds the public functions to one instance
    (``downsample_occupancy = OPS.downsample_occupancy``), so both runtimes
    run these exact steps, checks and messages; only the abstract primitives
    below touch arrays.
    """

    array_type: type
    """The runtime's array class (what rows and codes must be)."""

    array_word: str
    """How messages name that class (``torch.Tensor``, ``mlx.core.array``)."""

    points_word: str
    """How ``quantize_points``' message names what it accepts."""

    hierarchy_type: type[H]
    """The runtime's :class:`OccupancyHierarchy` subclass, which the hierarchy is built as."""

    # -- array primitives, one implementation per runtime ------------------------------------

    def _coerce(self, value: object) -> object:
        """Convert accepted foreign arrays (NumPy on MLX) into the runtime's array type."""
        return value

    @abstractmethod
    def _any_negative_batch(self, rows: A) -> bool:
        """Whether any row has a batch index below 0."""

    @abstractmethod
    def _canonical(self, rows: A) -> A:
        """``rows`` in canonical order (repeats kept)."""

    @abstractmethod
    def _drop_repeats(self, rows: A) -> A:
        """Sorted ``rows`` without the rows equal to the row before them."""

    @abstractmethod
    def _no_codes(self, rows: A) -> tuple[A, A]:
        """The empty parent level (a copy of the empty ``rows``) and its empty uint8 codes."""

    @abstractmethod
    def _downsample_sorted(self, rows: A) -> tuple[A, A]:
        """Parents and codes of non-empty canonical ``rows``: shift, bits, adjacent segments."""

    @abstractmethod
    def _is_codes(self, codes: object) -> bool:
        """Whether ``codes`` is a rank-1 uint8 array of this runtime."""

    @abstractmethod
    def _bits(self, codes: A) -> A:
        """Bool ``(M, 8)``, entry ``[i, k]`` bit ``k`` of ``codes[i]``."""

    @abstractmethod
    def _candidates(self, parents: A) -> A:
        """``2 * parent + tap`` for every parent and 2x2x2 tap, parent-major, tap-minor."""

    @abstractmethod
    def _occupied(self, candidates: A, occupied: A) -> A:
        """The candidates whose tap bit is set (``occupied`` in code-bit order, ``(M, 8)``)."""

    @abstractmethod
    def _points(self, points: object) -> A | None:
        """``points`` as float64 ``(P, 3)``, or None when they are not a ``(P, 3)`` array."""

    @abstractmethod
    def _grid_facts(self, points: A, side: float) -> tuple[bool, bool, bool]:
        """(every point finite, every point inside ``[0, side)``, every point an integer)."""

    @abstractmethod
    def _fit_cells(self, points: A, depth: int) -> A:
        """Cells of points scaled so the longest side spans the grid (:func:`fit_scale`)."""

    @abstractmethod
    def _floor_cells(self, points: A) -> A:
        """``floor`` of points already inside the grid."""

    @abstractmethod
    def _rows(self, cells: A, batch: int) -> A:
        """Int32 rows ``(batch, x, y, z)`` of float cells."""

    # -- the public functions ----------------------------------------------------------------

    def _check(self, coords: object, what: str = "coords") -> A:
        coords = self._coerce(coords)
        check_rows_array(what, coords, self.array_type)
        rows: A = coords  # type: ignore[assignment]  # check_rows_array checked the type
        if rows.shape[0] and self._any_negative_batch(rows):
            raise negative_batch(what)
        return rows

    def morton_sort(self, coords: In) -> A:
        """The rows of ``coords`` in canonical order (batch, then Morton code)."""
        return self._canonical(self._check(coords))

    def downsample_occupancy(self, coords: In, *, assume_canonical: bool = False) -> tuple[A, A]:
        """Parents ``unique(floor(c / 2))`` of a voxel level and each parent's child-occupancy code.

        ``coords`` are logical int32 rows ``(batch, x, y, z)`` of one level (any
        order; repeated rows count once).  Returns ``(parents, codes)``: int32
        ``(M, 4)`` parent rows in canonical order (batch kept) and uint8 ``(M,)``
        codes, bit ``k`` set when child ``2 * parent + CHILD_TAPS[k]`` is in
        ``coords``.  ``assume_canonical=True`` skips the initial sort for callers
        whose rows are already in canonical order (every level this module
        returns is); on unsorted rows it gives wrong codes.
        """
        return self._downsample(self._check(coords), assume_canonical)

    def _downsample(self, rows: A, assume_canonical: bool) -> tuple[A, A]:
        if not assume_canonical:
            rows = self._canonical(rows)
        if rows.shape[0] == 0:
            return self._no_codes(rows)
        return self._downsample_sorted(rows)

    def child_bits(self, codes: A) -> A:
        """Bool ``(M, 8)``: entry ``[i, k]`` is bit ``k`` of ``codes[i]`` (child ``k`` occupied)."""
        if not self._is_codes(codes):
            raise TypeError(f"codes must be a uint8 {self.array_word} of shape (M,)")
        return self._bits(codes)

    def candidate_children(self, parents: In) -> A:
        """All eight candidate children: int32 ``(8 M, 4)``, row ``8 i + t`` = parent i's tap t.

        This is the support ``generative_conv_transpose3d(kernel_size=2, stride=2)``
        produces (in logical units), in parent-major, tap-minor order; tap ``t``'s
        child is described by code bit ``octree_tap_bits()[t]``.
        """
        return self._candidates(self._check(parents, "parents"))

    def expand_occupancy(self, parents: In, codes: A) -> A:
        """The occupied children of ``parents`` given their codes (inverse of downsampling).

        Children come parent-major, tap-minor, which is canonical order when the
        parents are canonical.
        """
        rows = self._check(parents, "parents")
        occupied = self.child_bits(codes)
        if occupied.shape[0] != rows.shape[0]:
            raise codes_per_parent(int(occupied.shape[0]), int(rows.shape[0]))
        return self._occupied(self._candidates(rows), occupied)

    def occupancy_hierarchy(self, coords: In, levels: int, *, assume_canonical: bool = False) -> H:
        """Downsample ``coords`` ``levels`` times; see :class:`OccupancyHierarchy`."""
        depth = check_levels(levels)
        current = self._check(coords)
        if not assume_canonical:
            current = self._drop_repeats(self._canonical(current))
        found: list[A] = [current]
        codes: list[A] = []
        for _ in range(depth):
            current, code = self._downsample(current, True)
            found.append(current)
            codes.append(code)
        return self.hierarchy_type(levels=tuple(reversed(found)), codes=tuple(reversed(codes)))

    def quantize_points(
        self, points: In, levels: int, *, fit: bool | None = None, batch: int = 0
    ) -> A:
        """Voxelise points ``(P, 3)`` into a ``2^levels`` grid: unique int32 rows, canonical order.

        With ``fit=False`` the points are taken as voxel coordinates already
        (``floor`` of each), and every one must lie in ``[0, 2^levels)``.  With
        ``fit=True`` the bounding box is scaled uniformly so that its longest side
        spans the grid: ``floor((p - min) * 2^levels / longest_side)``, clamped to
        the last cell.  ``fit=None`` (the default) uses ``fit=False`` when every
        point is already an integer inside the grid (a pre-voxelised cloud, such
        as a Level-8 PLY) and ``fit=True`` otherwise.  The arithmetic is float64
        (on MLX on the CPU stream, as MLX's GPU has no float64) with the same
        operations on both runtimes, so both get the same voxels.
        """
        depth = check_levels(levels)
        p = self._points(points)
        if p is None:
            raise ValueError(f"points must be {self.points_word} of shape (P, 3)")
        if p.shape[0] == 0:
            raise empty_cloud()
        finite, inside, integral = self._grid_facts(p, float(1 << depth))
        if not finite:
            raise non_finite_cloud()
        if fit is None:
            fit = not (inside and integral)
        if fit:
            cells = self._fit_cells(p, depth)
        elif not inside:
            raise outside_grid(depth)
        else:
            cells = self._floor_cells(p)
        return self._drop_repeats(self._canonical(self._rows(cells, int(batch))))
