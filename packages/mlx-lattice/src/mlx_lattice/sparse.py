"""The MLX sparse value: coordinates, features, active prefix and stride (``docs/semantics.md``).

A :class:`SparseTensor` is checked once, when it is made, so that every op
downstream can assume a well-formed support: int32 ``(N, 4)`` physical
coordinates ``(batch, x, y, z)``, ``(N, C)`` floating features, non-negative
batch indices, spatial coordinates divisible by the stride, and no repeated
row.  Rows past the active count are capacity padding; they are dropped here
and never read.  :meth:`SparseTensor.trusted` skips the two expensive checks
(divisibility and duplicates) for callers that already guarantee them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import Triple
from lattice_contract.frontend import SparseTensorBase, given_features, row_order, sparse_errors

from mlx_lattice.coords import SupportCache, SupportIndex, scalar_int

FEATURE_DTYPES: tuple[mx.Dtype, ...] = (mx.float16, mx.bfloat16, mx.float32)
"""Storage dtypes a sparse value's features may have."""

_DTYPE_NAMES = {mx.float16: "f16", mx.bfloat16: "bf16", mx.float32: "f32"}


def _as_mx(value: Any, name: str) -> mx.array:
    """Accept an MLX array (or a NumPy array, converted without changing dtype)."""
    if isinstance(value, mx.array):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == np.float64:  # mx.array would narrow it silently
            raise TypeError(
                f"{name} is a float64 NumPy array; MLX features are float16, bfloat16 or "
                f"float32, so cast it with .astype(numpy.float32) first"
            )
        return mx.array(value)
    raise sparse_errors.not_an_array(name, value)


def _read_active(value: object) -> int | None:
    """The entry of an int32 ``(1,)`` MLX (or NumPy) array; None for anything else."""
    if not isinstance(value, (mx.array, np.ndarray)):
        return None
    arr = _as_mx(value, "active_rows")
    if arr.dtype != mx.int32:
        raise sparse_errors.active_rows_dtype(arr.dtype)
    if tuple(arr.shape) != (1,):
        raise sparse_errors.active_rows_shape(arr.shape)
    return scalar_int(arr)


def _row(coords: mx.array, row: int) -> list[int]:
    return [int(v) for v in np.asarray(coords[row]).tolist()]


class SparseTensor(SparseTensorBase[mx.array, mx.Dtype]):
    """Rows ``(batch, x, y, z)`` with a feature row each, at a stride (``docs/semantics.md``).

    Construction validates everything the contract requires and keeps only the
    active prefix, so ``num_rows == active_rows`` afterwards (outputs are
    exact).  Tensors that share a support (``with_feats``) share one
    :class:`~mlx_lattice.coords.SupportCache`, which memoises the support's
    index and kernel maps across the layers of a forward pass.

    ``features`` and ``with_features`` are the same as ``feats`` and
    ``with_feats``, and the constructors take ``features=`` for ``feats``:
    the contract's (and spconv's) spelling (:mod:`lattice_contract.frontend.feature_names`).
    The rules of the parts and the plain views (``coords``, ``feats``,
    ``stride``, ``num_rows``, ``num_channels``, ``dtype``) are the contract's
    (:class:`~lattice_contract.frontend.sparse_tensor.SparseTensorBase`), shared with torch.
    """

    __slots__ = ("_cache",)

    FEATURE_DTYPES = FEATURE_DTYPES
    INDEX_DTYPE = mx.int32
    _as_array = staticmethod(_as_mx)
    _read_active = staticmethod(_read_active)

    # Two overloads: the features are required, as feats (second, or feats=)
    # or as features=, so a type checker refuses SparseTensor(coords) as the
    # constructor does at run time.
    @overload
    def __init__(
        self,
        coords: Any,
        feats: Any,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
        *,
        batch_counts: Sequence[int] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        coords: Any,
        *,
        features: Any,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
        batch_counts: Sequence[int] | None = None,
    ) -> None: ...

    def __init__(
        self,
        coords: Any,
        feats: Any = None,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
        *,
        features: Any = None,
        batch_counts: Sequence[int] | None = None,
    ) -> None:
        self._init(coords, given_features(feats, features), stride, active_rows, trusted=False)
        if batch_counts is not None:
            self._check_batch_counts(batch_counts)

    @overload
    @classmethod
    def trusted(
        cls,
        coords: Any,
        feats: Any,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
    ) -> SparseTensor: ...

    @overload
    @classmethod
    def trusted(
        cls,
        coords: Any,
        *,
        features: Any,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
    ) -> SparseTensor: ...

    @classmethod
    def trusted(
        cls,
        coords: Any,
        feats: Any = None,
        stride: int | Sequence[int] = 1,
        active_rows: Any = None,
        *,
        features: Any = None,
    ) -> SparseTensor:
        """Make a tensor without the divisibility and duplicate-row checks.

        For callers that guarantee both (ops producing supports, artifact
        callers using ``call_with_trusted_sparse_inputs``).  Dtypes, shapes,
        the active count and non-negative batches are still checked because
        they are cheap and a violation would read out of bounds.
        """
        out = cls.__new__(cls)
        out._init(coords, given_features(feats, features), stride, active_rows, trusted=True)
        return out

    @classmethod
    def _from_parts(
        cls,
        coords: mx.array,
        feats: mx.array,
        stride: Triple,
        cache: SupportCache | None = None,
    ) -> SparseTensor:
        """Internal constructor for op outputs: no checks at all, no host sync."""
        out = cls.__new__(cls)
        out._coords = coords
        out._feats = feats
        out._stride = stride
        out._cache = SupportCache() if cache is None else cache
        return out

    def _init(
        self, coords: Any, feats: Any, stride: Any, active_rows: Any, *, trusted: bool
    ) -> None:
        c, f, st = self._checked_parts(coords, feats, stride, active_rows)
        n = int(c.shape[0])
        self._coords = c
        self._feats = f
        self._stride = st
        self._cache = SupportCache()
        if n == 0:
            return
        batch_min = scalar_int(mx.min(c[:, 0]))
        if batch_min < 0:
            row = scalar_int(mx.argmax((c[:, 0] < 0).astype(mx.int32)))  # the first one
            raise sparse_errors.negative_batch(row, _row(c, row))
        if trusted:
            return
        if st != (1, 1, 1):
            rem = c[:, 1:] % mx.array(st, dtype=mx.int32)
            bad = mx.any(rem != 0, axis=1)
            if bool(mx.any(bad).item()):
                row = scalar_int(mx.argmax(bad.astype(mx.int32)))
                raise sparse_errors.not_divisible(row, _row(c, row), st)
        index = SupportIndex.build(self.logical_coords)  # refuses an unindexable span
        dup = index.duplicate_row()
        self._cache = SupportCache(index)
        if dup is not None:
            raise sparse_errors.duplicate_row(dup, _row(c, dup))

    # ------------------------------------------------------------------ views

    @property
    def active_rows(self) -> mx.array:
        """The active count as an int32 ``(1,)`` array (always ``num_rows``)."""
        return mx.array([self.num_rows], dtype=mx.int32)

    @property
    def dtype_name(self) -> str:
        """Feature dtype as the contract spells it (``f16``, ``bf16``, ``f32``)."""
        return _DTYPE_NAMES[self._feats.dtype]

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, C)`` of the feature matrix."""
        return (self.num_rows, self.num_channels)

    @property
    def cache(self) -> SupportCache:
        """The memo of this support's index and kernel maps (shared by ``with_feats``)."""
        return self._cache

    @property
    def logical_coords(self) -> mx.array:
        """Coordinates divided by the stride (batch column unchanged), int32 ``(N, 4)``."""
        if self._stride == (1, 1, 1):
            return self._coords
        div = mx.array((1, *self._stride), dtype=mx.int32)
        return self._coords // div

    @property
    def batch_indices(self) -> mx.array:
        """The batch column, int32 ``(N,)``."""
        return self._coords[:, 0]

    @property
    def batch_size(self) -> int:
        """Largest batch index + 1 (0 for an empty tensor): the batch size the rows imply."""
        if self.num_rows == 0:
            return 0
        return scalar_int(mx.max(self._coords[:, 0])) + 1

    def batch_counts(self, batch_size: int | None = None) -> mx.array:
        """Rows per batch item, int32 ``(batch_size,)`` (default: :attr:`batch_size`)."""
        size = self.batch_size if batch_size is None else int(batch_size)
        counts = mx.zeros((size,), dtype=mx.int32)
        if self.num_rows == 0 or size == 0:
            return counts
        return counts.at[self._coords[:, 0]].add(mx.ones((self.num_rows,), dtype=mx.int32))

    def batch(self, index: int) -> SparseTensor:
        """The rows of one batch item, as a tensor (batch column kept)."""
        host = np.flatnonzero(np.asarray(self._coords[:, 0]) == int(index)).astype(np.int32)
        rows = mx.array(host)
        return SparseTensor._from_parts(self._coords[rows], self._feats[rows], self._stride)

    def _check_batch_counts(self, batch_counts: Sequence[int]) -> None:
        """Refuse ``batch_counts`` (mlx-lattice 0.6's keyword) that the batch column contradicts.

        Lattice derives the rows of each batch item from the batch column, so
        the keyword is a checked statement, never a second source of truth.
        """
        given = [int(c) for c in batch_counts]
        if any(c < 0 for c in given):
            raise ValueError(f"batch_counts must be non-negative row counts, got {given}")
        if self.batch_size > len(given):
            raise ValueError(
                f"batch_counts {given} names {len(given)} batch items but the coordinates use "
                f"batch index {self.batch_size - 1}; pass one count per batch item"
            )
        actual = [int(v) for v in np.asarray(self.batch_counts(len(given))).tolist()]
        if actual != given:
            raise ValueError(
                f"batch_counts {given} does not match the batch column of coords, which has "
                f"{actual} rows per batch item; fix the counts or the batch indices"
            )

    @property
    def channels(self) -> int:
        """mlx-lattice 0.6's name for :attr:`num_channels`."""
        return self.num_channels

    # ------------------------------------------------------------ derivation

    def replace(self, *, feats: Any = None, features: Any = None) -> SparseTensor:
        """mlx-lattice 0.6's spelling of :meth:`with_feats`: same support, new features.

        Only the features can be replaced: a new support is a new tensor
        (construct one, so its coordinates are checked).
        """
        return self.with_feats(given_features(feats, features))

    def with_feats(self, feats: Any) -> SparseTensor:
        """Same support and stride, new features; shares the kernel-map cache."""
        f = self._checked_feats(feats)
        return SparseTensor._from_parts(self._coords, f, self._stride, self._cache)

    def astype(self, dtype: mx.Dtype) -> SparseTensor:
        """Same support with features cast to ``dtype`` (plain conversion, shares the cache)."""
        return self.with_feats(self._feats.astype(dtype))

    def canonical(self) -> SparseTensor:
        """The same value with rows in canonical (batch, Morton) order."""
        perm = canonical_order(self._coords)
        return SparseTensor._from_parts(self._coords[perm], self._feats[perm], self._stride)

    def __repr__(self) -> str:
        return (
            f"SparseTensor(rows={self.num_rows}, channels={self.num_channels}, "
            f"dtype={self.dtype_name}, stride={self._stride})"
        )


# ---------------------------------------------------------------- ordering


def canonical_order(coords: Any) -> mx.array:
    """Permutation (int32) that sorts rows by batch, then Morton code (canonical order).

    ``coords[perm]`` is in canonical order.  Conformance aligns sparse results
    this way before comparing coordinates, since physical row order is not
    part of the contract.  This is the contract's NumPy reference
    (:func:`lattice_contract.frontend.row_order.canonical_order`), run on the host:
    MLX has no stable multi-key sort, and this is a comparison utility, not a
    per-layer step.
    """
    host = np.asarray(_as_mx(coords, "coords") if not isinstance(coords, np.ndarray) else coords)
    if host.ndim != 2 or host.shape[1] != 4:
        raise ValueError(f"coords must have shape (N, 4), got {host.shape}")
    return mx.array(row_order.canonical_order(host).astype(np.int32))


def inverse_permutation(perm: Any) -> mx.array:
    """The permutation ``inv`` with ``inv[perm[i]] == i`` (int32)."""
    p = _as_mx(perm, "perm")
    if p.ndim != 1:
        raise ValueError(f"perm must be one-dimensional, got shape {p.shape}")
    n = int(p.shape[0])
    inv = mx.zeros((n,), dtype=mx.int32)
    if n == 0:
        return inv
    inv[p.astype(mx.int32)] = mx.arange(n, dtype=mx.int32)
    return inv
