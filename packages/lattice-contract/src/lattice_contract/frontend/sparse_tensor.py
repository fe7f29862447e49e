"""What both runtimes' ``SparseTensor`` share: the checks of its parts and its views.

``mlx_lattice.SparseTensor`` and ``torch_lattice.SparseTensor`` extend
:class:`SparseTensorBase`, so the rules of a sparse value's parts (array
kinds, dtypes, ranks, matching rows, the stride and the active-row count)
and the plain views (``coords``, ``feats``, ``stride``, ``num_rows``,
``num_channels``, ``dtype``) are written here once, over each runtime's own
arrays.  A runtime keeps its storage (the three slots here, plus its own
map cache), its array constructors and the checks that need its array
library (negative batches, divisibility, duplicates), and says how it reads
its arrays through three hooks: :meth:`SparseTensorBase._as_array`,
:meth:`SparseTensorBase._read_active` and the class's ``FEATURE_DTYPES`` /
``INDEX_DTYPE``.  Every view is one attribute read (hot paths call them per
layer).

The optional active-row count (None, an int, or an int32 ``(1,)`` array) is
read by :func:`active_count` (the words of its errors are in
:mod:`lattice_contract.frontend.sparse_errors`).  The stride goes through the ops'
own check, :func:`lattice_contract.dialect.values.int_triple`, so a stride is
accepted and refused with the same words wherever it is given.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import lattice_contract.frontend.sparse_errors as sparse_errors
from lattice_contract.dialect import Triple, int_triple
from lattice_contract.frontend.feature_names import FeatureSpellings

__all__ = ["SparseArray", "SparseTensorBase", "active_count"]


class SparseArray(Protocol):
    """What the shared checks read of a runtime's array (``mx.array``, ``torch.Tensor``)."""

    @property
    def shape(self) -> Any:
        """The dimensions."""

    @property
    def ndim(self) -> int:
        """The rank."""

    @property
    def dtype(self) -> Any:
        """The element type."""

    def __getitem__(self, index: Any, /) -> Any:
        """Rows (the checks take a prefix)."""


ArrayT = TypeVar("ArrayT", bound=SparseArray)
DtypeT = TypeVar("DtypeT")


def active_count(
    active_rows: object, num_rows: int, read_array: Callable[[object], int | None]
) -> int:
    """The active-row count: ``num_rows`` for None, else an int or an int32 ``(1,)`` array.

    ``read_array(value)`` is the runtime's step: None when ``value`` is not one
    of its arrays, else its single int32 entry (raising
    :func:`~lattice_contract.frontend.sparse_errors.active_rows_dtype` /
    :func:`~lattice_contract.frontend.sparse_errors.active_rows_shape` for another dtype
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


class SparseTensorBase(FeatureSpellings[ArrayT], Generic[ArrayT, DtypeT]):
    """A sparse value's parts and views, over a runtime's array and dtype types.

    ``coords`` are int32 ``(N, 4)`` physical rows ``(batch, x, y, z)``,
    ``feats`` ``(N, C)`` floating rows, one per coordinate row, and
    ``stride`` the physical size of one logical step per spatial axis
    (``docs/semantics.md``).  A runtime sets ``FEATURE_DTYPES`` and
    ``INDEX_DTYPE`` and implements the two array hooks.
    """

    __slots__ = ("_coords", "_feats", "_stride")

    _coords: ArrayT
    _feats: ArrayT
    _stride: Triple

    FEATURE_DTYPES: ClassVar[tuple[Any, ...]]
    """Storage dtypes the features may have (the runtime's)."""
    INDEX_DTYPE: ClassVar[Any]
    """The runtime's int32 dtype, which coordinates must have."""

    @staticmethod
    def _as_array(value: object, name: str) -> Any:  # pragma: no cover - each runtime's
        """``value`` as the runtime's array, or :func:`sparse_errors.not_an_array`."""
        raise NotImplementedError

    @staticmethod
    def _read_active(value: object) -> int | None:  # pragma: no cover - each runtime's
        """The entry of an int32 ``(1,)`` array of the runtime; None for anything else."""
        raise NotImplementedError

    @classmethod
    def _checked_parts(
        cls, coords: object, feats: object, stride: Any, active_rows: object
    ) -> tuple[ArrayT, ArrayT, Triple]:
        """Coordinates and features cut to the active rows, and the stride, all checked.

        Checks, in this order: both are arrays, coordinate dtype and shape,
        feature rank and dtype, matching row counts, the stride, the active
        count.  What needs the array library (batch signs, divisibility,
        duplicates) is the runtime's, on what this returns.
        """
        c = cls._as_array(coords, "coords")
        f = cls._as_array(feats, "feats")
        if c.dtype != cls.INDEX_DTYPE:
            raise sparse_errors.coords_dtype(c.dtype)
        if c.ndim != 2 or c.shape[1] != 4:
            raise sparse_errors.coords_shape(c.shape)
        if f.ndim != 2:
            raise sparse_errors.feats_shape(f.shape)
        if f.dtype not in cls.FEATURE_DTYPES:
            raise sparse_errors.feats_dtype(f.dtype)
        rows = int(c.shape[0])
        if f.shape[0] != rows:
            raise sparse_errors.row_mismatch(int(f.shape[0]), rows)
        checked_stride = int_triple(stride, "stride", minimum=1)
        n = active_count(active_rows, rows, cls._read_active)
        if n != rows:
            c, f = c[:n], f[:n]
        return c, f, checked_stride

    def _checked_feats(self, feats: object) -> ArrayT:
        """New features for this support (``with_feats``): an array of shape ``(N, C')``."""
        f = self._as_array(feats, "feats")
        if f.ndim != 2 or f.shape[0] != self.num_rows:
            raise sparse_errors.new_feats_shape(f.shape, self.num_rows)
        if f.dtype not in self.FEATURE_DTYPES:
            raise sparse_errors.feats_dtype(f.dtype)
        checked: ArrayT = f
        return checked

    # -- views: one attribute read each ----------------------------------------

    @property
    def coords(self) -> ArrayT:
        """Physical coordinates, int32 ``(N, 4)`` rows ``(batch, x, y, z)``."""
        return self._coords

    @property
    def feats(self) -> ArrayT:
        """Features ``(N, C)``, row i belonging to coordinate row i."""
        return self._feats

    @property
    def stride(self) -> Triple:
        """Physical size of one logical step on each spatial axis."""
        return self._stride

    @property
    def num_rows(self) -> int:
        """Number of (active) rows N."""
        return int(self._coords.shape[0])

    @property
    def num_channels(self) -> int:
        """Number of feature channels C."""
        return int(self._feats.shape[1])

    @property
    def dtype(self) -> DtypeT:
        """Feature storage dtype."""
        dtype: DtypeT = self._feats.dtype
        return dtype
