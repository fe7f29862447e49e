"""CPU kernel-map lookups through a dense index of the rows' bounding box.

The reference table (:class:`torch_lattice.coords.CoordinateTable`) finds a
coordinate's row by binary search over sorted packed keys.  On one CPU thread
that costs about 30 ns a query (17 levels of mispredicted branches for 100k
rows), and a 3x3x3 submanifold map asks 13 queries a row.  Sparse conv data
are surfaces (scans, meshes): their bounding box holds tens of cells per
active voxel, so an int32 array over the box, holding each cell's row (or -1),
fits in a few MiB.  A tap's queries are then one gather whose addresses rise
with the (key-ordered) queries, about 1 ns each, and deduplicating keys is a
mark, a prefix sum and a gather instead of a sort.

Everything here gives exactly what the sort-based code gives (same pairs,
same order, same unique keys): the callers in :mod:`torch_lattice.kernel_map`
keep that code for boxes too large for a dense index (:func:`dense_fits`) and
for inputs with no rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_lattice.coords import Packing, bounds

__all__ = [
    "LOOKUP_CELLS_PER_ROW",
    "UNIQUE_CELLS_PER_KEY",
    "cells",
    "dense_fits",
    "dense_unique",
    "floor_div",
    "lookup_offsets",
    "pack",
    "remainder",
]

Triple = tuple[int, int, int]

LOOKUP_CELLS_PER_ROW = 64
"""A lookup index may spend this many cells per row it serves.

A binary search costs about 25 ns a query (13 a row for a 3x3x3 map); filling
a cell of a reused buffer costs ~0.1 ns and a gather ~1.5 ns.  Measured on
ring-shaped LiDAR-like scenes of ~110k rows (one thread), the index answers a
3x3x3 map in 6-12 ms up to 68 cells a row against the table's 23-28 ms.
"""

UNIQUE_CELLS_PER_KEY = 8
"""A deduplication may spend this many cells per key: it competes with one radix sort.

At 100k keys the sort takes ~2.2 ms whatever the box; the dense mark and
prefix sum take 0.5 ms at 1-2 cells a key, 1.0 at 8, 1.5 at 16.
"""

_REUSED_CELLS = 1 << 23
"""Indexes up to this many int32 cells (32 MiB) come from memory the allocator reuses.

glibc serves larger blocks by a fresh ``mmap`` every time, whose first touch
(page faults, kernel zeroing) costs ~1.6 ns a cell, 10x a reused fill: a
90-cell-a-row index of 9M cells then loses to the table.  Past this size an
index gets a third of the cells a row.
"""

_MIN_CELLS = 1 << 16
"""Boxes up to this many cells (256 KiB, ~20 us to fill) always get a dense index."""

_MAX_CELLS = 1 << 27
"""No dense index beyond this many cells (512 MiB of int32), whatever the row count."""

_INT32_ROWS = 2**31 - 1
"""Row counts from here on do not fit the index's int32 entries (nor the maps' int32 indices)."""


def dense_fits(cells: int, rows: int, per_row: int = LOOKUP_CELLS_PER_ROW) -> bool:
    """Whether a dense index of ``cells`` cells is worth building for ``rows`` rows.

    ``per_row`` is the break-even cells a row while the index fits reused
    memory (:data:`LOOKUP_CELLS_PER_ROW` for lookups, :data:`UNIQUE_CELLS_PER_KEY`
    for deduplication); past :data:`_REUSED_CELLS` a third of it.
    """
    if cells <= 0:
        return False
    if cells <= _MIN_CELLS:
        return True
    allowed = per_row * rows if cells <= _REUSED_CELLS else per_row * rows // 3
    return cells <= min(allowed, _MAX_CELLS)


def dense_unique(keys: torch.Tensor, cells: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(keys, sorted=True, return_inverse=True)`` for int64 keys in ``[0, cells)``.

    Marks every present cell, and a prefix sum over the marks gives each
    cell its rank among the present ones: the inverse is the rank of a key's
    cell, and each unique key is written at its rank (every writer of a rank
    writes the same key, so the result does not depend on which one lands).
    """
    if keys.numel() == 0:
        return keys.clone(), torch.empty(0, dtype=torch.int64, device=keys.device)
    mark = torch.zeros(cells, dtype=torch.int32, device=keys.device)
    mark.index_fill_(0, keys, 1)
    # An int32 prefix sum: torch's int64 one runs ~10x slower once it leaves the cache.
    rank = torch.cumsum(mark, 0, dtype=torch.int32)
    inverse = rank.index_select(0, keys).to(torch.int64).sub_(1)
    uniq = torch.empty(int(rank[-1]), dtype=torch.int64, device=keys.device)
    uniq.index_copy_(0, inverse, keys)
    return uniq, inverse


def pack(packing: Packing, logical: torch.Tensor) -> torch.Tensor:
    """``packing.pack(logical)`` for rows inside its box: one integer product and a constant.

    ``(x - lo) @ w == x @ w - lo @ w`` exactly while every ``x @ w`` stays in
    int64, which the box's corners bound; that skips the per-row subtraction,
    whose broadcast over 4-wide rows runs element by element on the CPU
    (1.2 ms for 100k rows against 0.4 ms for the product).  Boxes far from the
    origin subtract first.
    """
    place = packing.strides
    weights = torch.tensor(place, dtype=torch.int64, device=logical.device)
    corners = zip(packing.lo, packing.size, place, strict=True)
    reach = sum(max(abs(lo), abs(lo + size - 1)) * w for lo, size, w in corners)
    if reach < 2**63:
        origin = sum(v * w for v, w in zip(packing.lo, place, strict=True))
        return (logical @ weights).sub_(origin)
    lo_row = torch.tensor(packing.lo, dtype=torch.int64, device=logical.device)
    return (logical - lo_row) @ weights


def cells(packing: Packing) -> int:
    """Number of keys a packing can give (its box's cell count)."""
    size = packing.size
    return size[0] * size[1] * size[2] * size[3]


def _log2(stride: Triple) -> list[int] | None:
    """Per-axis ``log2`` of a stride whose every entry is a power of two, else None."""
    if all(v > 0 and v & (v - 1) == 0 for v in stride):
        return [v.bit_length() - 1 for v in stride]
    return None


def floor_div(logical: torch.Tensor, stride: Triple) -> torch.Tensor:
    """Rows ``(b, floor(x/sx), floor(y/sy), floor(z/sz))``; power-of-two strides as shifts.

    An arithmetic right shift is floor division for negative values too, and
    costs a tenth of torch's int64 floor division on the CPU.
    """
    bits = _log2(stride)
    if bits is not None:
        return logical >> torch.tensor([0, *bits], dtype=torch.int64, device=logical.device)
    s = torch.tensor((1, *stride), dtype=torch.int64, device=logical.device)
    return torch.div(logical, s, rounding_mode="floor")


def remainder(logical: torch.Tensor, coarse: torch.Tensor, stride: Triple) -> torch.Tensor:
    """Rows ``(0, x - cx * sx, ...)``, ``coarse = floor_div(logical, stride)``: cell offsets.

    Whole rows, the batch column zero, so that a tap index is one product
    with ``(0, Ky * Kz, Kz, 1)``.
    """
    bits = _log2(stride)
    if bits is not None:
        masks = [0, *((1 << b) - 1 for b in bits)]
        return logical & torch.tensor(masks, dtype=torch.int64, device=logical.device)
    return logical - coarse * torch.tensor((1, *stride), dtype=torch.int64, device=logical.device)


class _Box:
    """Mixed-radix keys ``(batch, x, y, z)``, z fastest, of rows inside an inclusive box."""

    def __init__(self, lo: Sequence[int], hi: Sequence[int]) -> None:
        self.lo = [int(v) for v in lo]
        self.size = [int(h) - int(v) + 1 for v, h in zip(lo, hi, strict=True)]
        # Place values of the mixed-radix key (not conv strides): z fastest.
        self.place = [self.size[1] * self.size[2] * self.size[3], self.size[2] * self.size[3]]
        self.place += [self.size[3], 1]
        self.cells = self.size[0] * self.place[0]

    def keys(self, logical: torch.Tensor) -> torch.Tensor:
        """int64 keys in ``[0, cells)`` of rows inside the box.

        One product and a constant: each term is a coordinate (below 2^32 in
        magnitude: an int32 row, or a strided query ``o * s`` inside int32
        bounds) times a stride below 2^27 (a dense box), so nothing nears
        int64's range.
        """
        weights = torch.tensor(self.place, dtype=torch.int64, device=logical.device)
        origin = sum(v * w for v, w in zip(self.lo, self.place, strict=True))
        return (logical @ weights).sub_(origin)

    def shift(self, offset: Triple) -> int:
        """Key difference of a spatial offset."""
        return offset[0] * self.place[1] + offset[1] * self.place[2] + offset[2]


def lookup_offsets(
    table: torch.Tensor,
    base: torch.Tensor,
    offsets: Sequence[Triple],
    *,
    base_is_table: bool = False,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], bool] | None:
    """``CoordinateTable(table).lookup_offsets(base, offsets)`` through a dense index.

    Returns the pairs (query row q, table row r) with ``base[q] + offset ==
    table[r]`` per offset, as int32 vectors, in the order the table gives
    them, and whether the table's rows are in packed-key order (only
    computed when ``base_is_table``; False otherwise).  That order: by the
    query's packed key when every query stays inside the table's padded box
    (its sorted-search path), else by query row (its masked path).  ``None``
    where this does not apply (no rows, no offsets, a box too large for a
    dense index, row counts beyond int32); the caller then uses the table.
    """
    n = int(table.shape[0])
    nb = int(base.shape[0])
    if table.device.type != "cpu" or not offsets or not 0 < n < _INT32_ROWS:
        return None
    if not 0 < nb < _INT32_ROWS:
        return None
    tlo, thi = bounds(table)
    blo, bhi = (tlo, thi) if base_is_table else bounds(base)
    olo = [min(o[a] for o in offsets) for a in range(3)]
    ohi = [max(o[a] for o in offsets) for a in range(3)]
    qlo = [blo[0]] + [blo[a + 1] + olo[a] for a in range(3)]
    qhi = [bhi[0]] + [bhi[a + 1] + ohi[a] for a in range(3)]
    # The table searches key-ordered queries when all stay in its padded box
    # (Packing.covering raises for a box no key can hold, as building the table does).
    by_key = Packing.covering(tlo, thi).contains(qlo, qhi)
    box = _Box(
        [min(tlo[a], qlo[a]) for a in range(4)],
        [max(thi[a], qhi[a]) for a in range(4)],
    )
    if not dense_fits(box.cells, n + (0 if base_is_table else nb)):
        return None
    table_keys = box.keys(table)
    # Each cell holds its row + 1, 0 where empty, so nonzero() finds the hits directly.
    index = torch.zeros(box.cells, dtype=torch.int32)
    index.index_copy_(0, table_keys, torch.arange(1, n + 1, dtype=torch.int32))
    base_keys = table_keys if base_is_table else box.keys(base)
    in_key_order = bool(torch.all(base_keys[1:] > base_keys[:-1]))
    perm: torch.Tensor | None = None
    if by_key and not in_key_order:
        base_keys, perm = torch.sort(base_keys)
        perm = perm.to(torch.int32)
    queries = base_keys.to(torch.int32)
    results: list[tuple[torch.Tensor, torch.Tensor]] = []
    for off in offsets:
        found = index.index_select(0, queries + box.shift(off))
        q = found.nonzero().squeeze(1)
        r = found.index_select(0, q).sub_(1)
        results.append((q.to(torch.int32) if perm is None else perm.index_select(0, q), r))
    return results, base_is_table and in_key_order
