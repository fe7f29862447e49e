"""Coordinate keys: the host-independent index that every kernel map is built on.

A sparse support is a set of integer rows ``(batch, x, y, z)``.  Lookups on it
(does this neighbour exist? which row is it?) are done by packing each row into
one non-negative ``int64`` key with a mixed radix over the support's bounding
box, sorting the keys once, and answering any batch of queries with a single
vectorised ``searchsorted``.  A query outside the box can never match, so it is
given the key ``-1`` instead of being packed; that is what keeps packing free of
overflow for offsets that step outside the support.

None of this is part of the artifact contract: it is how this runtime finds
neighbours, and it can change without touching any exchanged file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import (
    SPAN_CELL_LIMIT,
    CoordinateSpanError,
    coordinate_span_error,
    span_cells,
)

KEY_LIMIT = SPAN_CELL_LIMIT
"""Cells a key space must stay below (the contract's span policy; headroom in int64)."""

MISSING_KEY = -1
"""Key of a query outside the key space's box: never equal to a packed key."""

DEFAULT_MARGIN = 16
"""Spatial cells added around a support's box so neighbour keys are plain offsets."""


def scalar_int(value: mx.array) -> int:
    """The Python int held by a one-element integer or boolean array (synchronises)."""
    item = value.item()
    if not isinstance(item, int):
        raise TypeError(f"expected an integer scalar, got {item!r}")
    return int(item)


CoordinateRangeError = CoordinateSpanError
"""The contract's span error (:mod:`lattice_contract.dialect.geometry`) under an old name."""


@dataclass(frozen=True)
class KeySpace:
    """A mixed-radix packing of ``(batch, x, y, z)`` rows inside a box.

    ``low`` is the smallest value per column and ``extent`` the number of
    values per column; key = ``((b' * Ex + x') * Ey + y') * Ez + z'`` with
    ``v' = v - low``.  Keys therefore sort like the rows themselves
    (lexicographically by batch, x, y, z), which makes the sorted-key order a
    deterministic row order for generated supports.

    The box is the rows' bounding box widened by ``margin`` cells on each side
    of every spatial axis.  Within that margin a neighbour's key is the row's
    key plus a per-offset constant, so whole-kernel queries are one broadcast
    add instead of unpack / shift / repack.
    """

    low: tuple[int, int, int, int]
    extent: tuple[int, int, int, int]
    margin: int = 0

    @staticmethod
    def from_bounds(
        low: tuple[int, ...], high: tuple[int, ...], margin: int = DEFAULT_MARGIN
    ) -> KeySpace:
        """Key space of the box ``[low, high]`` (inclusive, four columns) plus a margin.

        The margin is dropped (not the whole request) when the padded box
        would not fit in 62-bit keys; a box that does not fit without it is the
        contract's :class:`~lattice_contract.dialect.geometry.CoordinateSpanError`.
        """
        for pad in (margin, 0) if margin else (0,):
            lo = (int(low[0]), *(int(v) - pad for v in low[1:]))
            ext = tuple(
                max(int(h) - int(v) + 1, 1) + (2 * pad if a else 0)
                for a, (v, h) in enumerate(zip(low, high, strict=True))
            )
            if ext[0] * ext[1] * ext[2] * ext[3] < KEY_LIMIT:
                return KeySpace(
                    low=(lo[0], lo[1], lo[2], lo[3]),
                    extent=(ext[0], ext[1], ext[2], ext[3]),
                    margin=pad,
                )
        raise coordinate_span_error(span_cells(low, high)[0])

    @staticmethod
    def of(coords: mx.array, margin: int = DEFAULT_MARGIN) -> KeySpace:
        """Key space of the bounding box of ``coords`` (``(N, 4)``; empty gives a unit box)."""
        if coords.shape[0] == 0:
            return KeySpace(low=(0, 0, 0, 0), extent=(1, 1, 1, 1))
        lo_hi = mx.concatenate([mx.min(coords, axis=0), mx.max(coords, axis=0)])
        vals = [int(v) for v in np.asarray(lo_hi).tolist()]
        return KeySpace.from_bounds(tuple(vals[:4]), tuple(vals[4:]), margin)

    def key_offset(self, delta: Sequence[int]) -> int | None:
        """Key difference of a spatial offset, or None when it exceeds the margin."""
        if any(abs(int(v)) > self.margin for v in delta):
            return None
        r = self.radix
        return int(delta[0]) * r[1] + int(delta[1]) * r[2] + int(delta[2]) * r[3]

    @property
    def radix(self) -> tuple[int, int, int, int]:
        """Key weight of one step along each column."""
        ex, ey, ez = self.extent[1], self.extent[2], self.extent[3]
        return (ex * ey * ez, ey * ez, ez, 1)

    def pack(self, coords: mx.array) -> mx.array:
        """Keys (int64, shape ``coords.shape[:-1]``) of rows; rows outside the box get -1."""
        c = coords.astype(mx.int64)
        low = mx.array(self.low, dtype=mx.int64)
        ext = mx.array(self.extent, dtype=mx.int64)
        rel = c - low
        inside = mx.all((rel >= 0) & (rel < ext), axis=-1)
        radix = mx.array(self.radix, dtype=mx.int64)
        keys = mx.sum(rel * radix, axis=-1)
        return mx.where(inside, keys, MISSING_KEY)

    def unpack(self, keys: mx.array) -> mx.array:
        """Rows (int32, shape ``keys.shape + (4,)``) of in-box keys."""
        cols = []
        rest = keys.astype(mx.int64)
        for r, lo in zip(self.radix, self.low, strict=True):
            q = rest // r
            rest = rest - q * r
            cols.append(q + lo)
        return mx.stack(cols, axis=-1).astype(mx.int32)


@dataclass(frozen=True)
class SupportIndex:
    """Sorted keys of one support, to answer "which row holds this coordinate?".

    ``keys`` are the packed rows in ascending order and ``rows[i]`` is the row
    whose key is ``keys[i]``.  Built once per support and cached with it.
    """

    space: KeySpace
    keys: mx.array
    rows: mx.array

    @staticmethod
    def build(coords: mx.array, space: KeySpace | None = None) -> SupportIndex:
        """Index the rows of ``coords`` (logical ``(N, 4)``; assumed free of duplicates)."""
        space = KeySpace.of(coords) if space is None else space
        keys = space.pack(coords)
        rows = mx.argsort(keys).astype(mx.int32)
        return SupportIndex(space=space, keys=keys[rows], rows=rows)

    @property
    def size(self) -> int:
        """Number of indexed rows."""
        return int(self.keys.shape[0])

    def find_keys(self, keys: mx.array) -> tuple[mx.array, mx.array]:
        """``(found, row)`` for query keys of the same space (``-1`` never matches).

        ``row`` is meaningful only where ``found`` is true.
        """
        n = self.size
        if n == 0:
            return mx.zeros(keys.shape, dtype=mx.bool_), mx.zeros(keys.shape, dtype=mx.int32)
        pos = mx.minimum(mx.searchsorted(self.keys, keys), n - 1)
        found = self.keys[pos] == keys
        return found, self.rows[pos]

    def find(self, coords: mx.array) -> tuple[mx.array, mx.array]:
        """``(found, row)`` of query rows ``(..., 4)`` in logical units."""
        return self.find_keys(self.space.pack(coords))

    def find_neighbours(self, offsets: Sequence[Sequence[int]]) -> tuple[mx.array, mx.array] | None:
        """``(found, row)`` of every indexed key shifted by each spatial offset.

        Both are ``(len(offsets), N)``; column ``j`` is the j-th key in sorted order.  Offsets that
        share ``(dx, dy)`` probe one z-column: keys of one ``(batch, x, y)``
        are contiguous in sorted order, so after one binary search for the
        column's lowest offset, an offset ``dz`` higher can only sit at most
        ``dz`` places further on.  A 3x3x3 kernel thus costs 5 binary searches
        plus a few direct probes instead of 13 searches.  Returns None when an
        offset exceeds the key space's margin (then keys cannot be shifted).
        """
        maybe = [self.space.key_offset(offset) for offset in offsets]
        n = self.size
        steps = [step for step in maybe if step is not None]
        if n == 0 or not offsets or len(steps) != len(maybe):
            return None
        columns: dict[tuple[int, int], list[int]] = {}
        for i, offset in enumerate(offsets):
            columns.setdefault((int(offset[0]), int(offset[1])), []).append(i)
        found: list[mx.array] = [self.keys] * len(offsets)
        where: list[mx.array] = [self.keys] * len(offsets)
        last = n - 1
        for members in columns.values():
            members.sort(key=lambda i: int(offsets[i][2]))
            low = int(offsets[members[0]][2])
            start = mx.searchsorted(self.keys, self.keys + steps[members[0]]).astype(mx.int32)
            for i in members:
                query = self.keys + steps[i]
                hit = mx.zeros((n,), dtype=mx.bool_)
                at = mx.zeros((n,), dtype=mx.int32)
                for r in range(int(offsets[i][2]) - low + 1):
                    pos = mx.minimum(start + r, last)
                    match = self.keys[pos] == query
                    hit = hit | match
                    at = mx.where(match, pos, at)
                found[i] = hit
                where[i] = at
        return mx.stack(found), self.rows[mx.stack(where)]

    def duplicate_row(self) -> int | None:
        """A row index that repeats an earlier coordinate, or None when all rows are distinct."""
        if self.size < 2:
            return None
        same = self.keys[1:] == self.keys[:-1]
        if not bool(mx.any(same).item()):
            return None
        first = scalar_int(mx.argmax(same.astype(mx.int32)))
        return scalar_int(self.rows[first + 1])


def flat_nonzero(mask: mx.array) -> mx.array:
    """Positions (int32) where a boolean array is true, in ascending flat order.

    MLX has no nonzero/compaction primitive, and emulating one with a scan and
    a scatter is tens of times slower on CPU than NumPy's, so this one step of
    index building runs on the host.  The result size depends on the data, so a
    synchronisation is unavoidable here whichever way it is done.
    """
    host = np.asarray(mask.reshape(-1))
    return mx.array(np.flatnonzero(host).astype(np.int32))


class SupportCache:
    """Per-support memo shared by every SparseTensor with the same rows and stride.

    It holds the support's :class:`SupportIndex` and the kernel maps computed
    from it, keyed by everything that determines a map (op family, kernel,
    stride, dilation, padding and the target support, if any).  Tensors made
    with ``with_feats`` share their parent's cache, so the layers of one
    forward pass that read the same support reuse one map.
    """

    __slots__ = ("__weakref__", "_index", "relations")

    def __init__(self, index: SupportIndex | None = None) -> None:
        self._index = index
        self.relations: dict[object, object] = {}

    def index(self, logical: mx.array) -> SupportIndex:
        """The support index, built from ``logical`` rows on first use."""
        if self._index is None:
            self._index = SupportIndex.build(logical)
        return self._index

    def has_index(self) -> bool:
        """Whether the index was already built (by validation or an earlier op)."""
        return self._index is not None
