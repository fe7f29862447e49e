"""Coordinate arithmetic on the tensor's device: canonical order, key packing, lookups.

Everything here is vectorised over rows; the only Python loops run over bits,
axes or kernel taps.  Coordinates are looked up through *packed keys*: a
support's logical coordinates are packed into one int64 per row in mixed
radix ``(batch, x, y, z)`` (z fastest) over the support's bounding box plus a
margin, sorted once, and queried with ``searchsorted``.  Because z is the
fastest digit, the rows of one ``(batch, x, y)`` column are contiguous in the
sorted table, which lets a whole column of kernel taps be resolved with one
binary search followed by cheap neighbour steps (see :func:`lookup_offsets`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from lattice_contract.dialect import SPAN_CELL_LIMIT, coordinate_span_error, span_cells

__all__ = [
    "CoordinateTable",
    "Packing",
    "canonical_order",
    "inverse_permutation",
    "morton_keys",
]

Triple = tuple[int, int, int]

_MARGIN = 16
"""Padding of a table's packed box on every side: queries that stay within it never wrap."""

_KEY_LIMIT = SPAN_CELL_LIMIT
"""Packed keys stay below this so that key arithmetic (offsets, +1 steps) never overflows."""


def _spread3(v: torch.Tensor) -> torch.Tensor:
    """Spread the low 16 bits of ``v`` so bit i lands on bit 3*i (int64)."""
    v = v & 0xFFFF
    v = (v | (v << 16)) & 0x0000FF0000FF
    v = (v | (v << 8)) & 0x00F00F00F00F
    v = (v | (v << 4)) & 0x0C30C30C30C3
    v = (v | (v << 2)) & 0x249249249249
    return v


def morton_keys(coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 48-bit halves of the 96-bit Morton code of each row's (x, y, z).

    Each int32 coordinate is mapped to uint32 by adding 2^31; bits are
    interleaved from the most significant bit down as x, y, z (z least
    significant in each triple).  The high half interleaves bits 31..16, the
    low half bits 15..0, so ordering by (high, low) is ordering by the code.
    """
    if coords.ndim != 2 or coords.shape[1] != 4:
        raise ValueError(f"coords must have shape (N, 4), got {tuple(coords.shape)}")
    u = coords[:, 1:].to(torch.int64) + (1 << 31)
    hi = u >> 16
    lo = u & 0xFFFF
    high = (_spread3(hi[:, 0]) << 2) | (_spread3(hi[:, 1]) << 1) | _spread3(hi[:, 2])
    low = (_spread3(lo[:, 0]) << 2) | (_spread3(lo[:, 1]) << 1) | _spread3(lo[:, 2])
    return high, low


def canonical_order(coords: torch.Tensor) -> torch.Tensor:
    """Permutation (int64) that sorts rows by batch, then Morton code of (x, y, z).

    This is the contract's canonical order (``docs/semantics.md``): conformance aligns rows
    with it before comparing runtimes, so it must not depend on the input row
    order.  Three stable sorts (least significant key first) avoid a 128-bit key.
    """
    high, low = morton_keys(coords)
    batch = coords[:, 0].to(torch.int64)
    perm = torch.sort(low, stable=True).indices
    perm = perm[torch.sort(high[perm], stable=True).indices]
    return perm[torch.sort(batch[perm], stable=True).indices]


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    """The permutation ``inv`` with ``inv[perm[i]] == i``."""
    if perm.ndim != 1:
        raise ValueError(f"a permutation is one-dimensional, got shape {tuple(perm.shape)}")
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device, dtype=perm.dtype)
    return inv


@dataclass(frozen=True)
class Packing:
    """Mixed-radix packing of logical (batch, x, y, z) rows inside a box into int64 keys."""

    lo: tuple[int, int, int, int]
    size: tuple[int, int, int, int]

    @staticmethod
    def covering(lo: Sequence[int], hi: Sequence[int], margin: int = _MARGIN) -> Packing:
        """A packing for the box ``[lo, hi]`` (inclusive) padded by ``margin`` on the spatial axes.

        The batch axis is not padded (offsets never move along it).  The margin
        is dropped when the padded box would not fit in 62-bit keys; a box that
        does not fit without it is the contract's
        :class:`~lattice_contract.dialect.geometry.CoordinateSpanError`.
        """
        for pad in (margin, 0) if margin else (0,):
            lo4 = (int(lo[0]), *(int(v) - pad for v in lo[1:]))
            size4 = (
                max(int(hi[0]) - int(lo[0]) + 1, 1),
                *(
                    max(int(h) - int(v) + 1, 1) + 2 * pad
                    for v, h in zip(lo[1:], hi[1:], strict=True)
                ),
            )
            if size4[0] * size4[1] * size4[2] * size4[3] < _KEY_LIMIT:
                return Packing(lo4, size4)  # type: ignore[arg-type]
        raise coordinate_span_error(span_cells(lo, hi)[0])

    @property
    def strides(self) -> tuple[int, int, int, int]:
        """Key increment of a unit step along (batch, x, y, z)."""
        _, sx, sy, sz = self.size
        return (sx * sy * sz, sy * sz, sz, 1)

    def pack(self, logical: torch.Tensor) -> torch.Tensor:
        """Keys of rows inside the box (caller guarantees it)."""
        st = self.strides
        lo = self.lo
        return (
            (logical[:, 0] - lo[0]) * st[0]
            + (logical[:, 1] - lo[1]) * st[1]
            + (logical[:, 2] - lo[2]) * st[2]
            + (logical[:, 3] - lo[3])
        )

    def unpack(self, keys: torch.Tensor) -> torch.Tensor:
        """Logical int64 rows of keys (inverse of :meth:`pack`)."""
        _, sx, sy, sz = self.size
        z = keys % sz
        rest = keys // sz
        y = rest % sy
        rest = rest // sy
        x = rest % sx
        b = rest // sx
        lo = torch.tensor(self.lo, dtype=torch.int64, device=keys.device)
        return torch.stack([b, x, y, z], dim=1) + lo

    def shift(self, offset: Sequence[int]) -> int:
        """Key difference of a spatial offset (dx, dy, dz)."""
        st = self.strides
        return int(offset[0]) * st[1] + int(offset[1]) * st[2] + int(offset[2])

    def contains(self, lo: Sequence[int], hi: Sequence[int]) -> bool:
        """Whether the inclusive box ``[lo, hi]`` lies inside the packed box."""
        return all(lo[a] >= self.lo[a] and hi[a] < self.lo[a] + self.size[a] for a in range(4))

    def inside(self, logical: torch.Tensor) -> torch.Tensor:
        """Row mask of logical rows inside the packed box."""
        lo = torch.tensor(self.lo, dtype=torch.int64, device=logical.device)
        hi = lo + torch.tensor(self.size, dtype=torch.int64, device=logical.device)
        return ((logical >= lo) & (logical < hi)).all(dim=1)


def bounds(logical: torch.Tensor) -> tuple[list[int], list[int]]:
    """Per-axis inclusive min and max of non-empty logical rows (one fused pass, one sync)."""
    both = torch.stack(torch.aminmax(logical, dim=0)).cpu().tolist()
    return [int(v) for v in both[0]], [int(v) for v in both[1]]


class CoordinateTable:
    """Sorted packed keys of one support, for exact row lookups of logical coordinates."""

    def __init__(self, logical: torch.Tensor) -> None:
        self.num_rows = int(logical.shape[0])
        self.device = logical.device
        if self.num_rows == 0:
            self.packing = Packing((0, 0, 0, 0), (1, 1, 1, 1))
            self.keys = torch.empty(0, dtype=torch.int64, device=logical.device)
            self.order = torch.empty(0, dtype=torch.int64, device=logical.device)
            self.row_keys = self.keys
            self._in_key_order = True
            return
        lo, hi = bounds(logical)
        self.packing = Packing.covering(lo, hi)
        self.row_keys = self.packing.pack(logical)
        # Supports made by this runtime (conv outputs) and x-y-z sorted inputs are
        # already in key order: one comparison pass then replaces the sort, and
        # lookups skip their permutation gathers.
        self._in_key_order = bool(torch.all(self.row_keys[1:] > self.row_keys[:-1]))
        if self._in_key_order:
            self.keys = self.row_keys
            self.order = torch.arange(self.num_rows, device=logical.device)
        else:
            self.keys, self.order = torch.sort(self.row_keys)

    def rows_in_key_order(self) -> bool:
        """Whether row i holds the i-th smallest key (``order`` is the identity)."""
        return self._in_key_order

    def duplicate_rows(self) -> torch.Tensor:
        """Indices of rows whose coordinates repeat an earlier sorted row."""
        same = self.keys[1:] == self.keys[:-1]
        return self.order[1:][same]

    def find_keys(self, query: torch.Tensor) -> torch.Tensor:
        """Row index of each packed query key, -1 where absent."""
        if self.num_rows == 0 or query.numel() == 0:
            return torch.full_like(query, -1)
        pos = torch.searchsorted(self.keys, query).clamp_(max=self.num_rows - 1)
        hit = self.keys[pos] == query
        return torch.where(hit, self.order[pos], torch.full_like(pos, -1))

    def find(self, logical: torch.Tensor) -> torch.Tensor:
        """Row index of each logical query row, -1 where absent (any row, any box)."""
        out = torch.full((logical.shape[0],), -1, dtype=torch.int64, device=logical.device)
        if self.num_rows == 0 or logical.shape[0] == 0:
            return out
        inside = self.packing.inside(logical)
        rows = inside.nonzero().squeeze(1)
        out[rows] = self.find_keys(self.packing.pack(logical[rows]))
        return out

    def _own_column_bound(self, dz: int) -> torch.Tensor:
        """``searchsorted(keys, keys + dz)`` for ``dz`` in {-1, 0, 1}, without a search.

        Keys are distinct integers, so ``keys[i] + 1`` can only sit at i + 1 and
        ``keys[i] - 1`` only at i - 1: the lower bound is i + 1 for dz = 1, i for
        dz = 0, and for dz = -1 it is i - 1 exactly when that key is present.
        """
        pos = torch.arange(self.num_rows, device=self.keys.device)
        if dz == 1:
            pos += 1
        elif dz == -1:
            pos[1:] -= (self.keys[1:] - 1 == self.keys[:-1]).to(pos.dtype)
        return pos

    def lookup_offsets(
        self, base: torch.Tensor, offsets: Sequence[Triple], *, base_is_table: bool = False
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """For each offset, the pairs (query row q, table row r) with ``base[q] + offset == row r``.

        Offsets that share (dx, dy) and step z by one are resolved together:
        one ``searchsorted`` for the lowest z, then each next z is either the
        next sorted key or absent, so a 3×3×3 neighbourhood costs nine binary
        searches instead of 27.  Queries that could leave the padded box are
        handled by the exact (masked) path.  Queries are issued in sorted key
        order (the table's own order when ``base_is_table``), which keeps the
        binary searches cache-friendly whatever the row order of ``base``.
        """
        results: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(offsets)
        empty = torch.empty(0, dtype=torch.int64, device=base.device)
        if self.num_rows == 0 or base.shape[0] == 0 or not offsets:
            return [(empty, empty) for _ in offsets]
        blo, bhi = bounds(base)
        olo = [min(o[a] for o in offsets) for a in range(3)]
        ohi = [max(o[a] for o in offsets) for a in range(3)]
        safe = self.packing.contains(
            [blo[0]] + [blo[a + 1] + olo[a] for a in range(3)],
            [bhi[0]] + [bhi[a + 1] + ohi[a] for a in range(3)],
        )
        if not safe:
            for i, off in enumerate(offsets):
                shift = torch.tensor((0, *off), dtype=torch.int64, device=base.device)
                found = self.find(base + shift)
                q = (found >= 0).nonzero().squeeze(1)
                results[i] = (q, found[q])
            return [r if r is not None else (empty, empty) for r in results]

        if base_is_table:
            base_keys, base_order = self.keys, self.order
        else:
            base_keys, base_order = torch.sort(self.packing.pack(base))
        # With the table in row order both permutations are the identity.
        identity = base_is_table and self._in_key_order
        columns: dict[tuple[int, int], list[int]] = {}
        for i, off in enumerate(offsets):
            columns.setdefault((off[0], off[1]), []).append(i)
        sentinel = torch.full((1,), _KEY_LIMIT, dtype=torch.int64, device=base.device)
        keys_padded = torch.cat([self.keys, sentinel])
        for (dx, dy), members in columns.items():
            members = sorted(members, key=lambda i: offsets[i][2])
            zs = [offsets[i][2] for i in members]
            consecutive = all(b - a == 1 for a, b in itertools.pairwise(zs))
            if not consecutive:
                for i in members:
                    found = self.find_keys(base_keys + self.packing.shift(offsets[i]))
                    q = (found >= 0).nonzero().squeeze(1)
                    results[i] = (q if identity else base_order[q], found[q])
                continue
            query = base_keys + self.packing.shift((dx, dy, zs[0]))
            if base_is_table and (dx, dy) == (0, 0) and -1 <= zs[0] <= 1:
                pos = self._own_column_bound(zs[0])
            else:
                pos = torch.searchsorted(self.keys, query)
            for i in members:
                # keys_padded ends in a sentinel no query equals, so pos == N needs no clamp
                hit = torch.eq(keys_padded[pos], query)
                q = hit.nonzero().squeeze(1)
                if identity:
                    results[i] = (q, pos[q])
                else:
                    results[i] = (base_order[q], self.order[pos[q]])
                pos += hit
                query += 1
        return [r if r is not None else (empty, empty) for r in results]
