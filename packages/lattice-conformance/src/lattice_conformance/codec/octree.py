"""Octree serialisation of a voxel set: per-level 8-bit child masks in Morton order.

A level-``L`` voxel set (integer ``x, y, z`` in ``[0, 2^L)``) is sent as its
occupancy hierarchy: level 0 is the root, and every occupied voxel of level
``l`` carries one byte saying which of its 2x2x2 children are occupied.  Bit
``x + 2y + 4z`` of the byte is the child at offset ``(x, y, z)``.  Voxels of a
level are in Morton order (x the most significant bit of every triple), so the
decoder rebuilds the children of a level in the same order the encoder saw
them.  Everything is vectorised over voxels; loops run over levels only.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MAX_LEVELS",
    "build_octree",
    "expand_level",
    "morton_decode",
    "morton_encode",
    "neighbours",
    "octree_stream",
    "off_index",
]

MAX_LEVELS = 16

# Morton triple t = x*4 + y*2 + z; mask bit b = x + 2y + 4z.
TAP_BITS = np.array([(t >> 2) | (((t >> 1) & 1) << 1) | ((t & 1) << 2) for t in range(8)], np.int64)

# The 27 neighbour offsets, index (dx + 1) * 9 + (dy + 1) * 3 + (dz + 1).
OFFSETS = np.array(
    [(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)], np.int64
)


def off_index(d: tuple[int, ...] | list[int]) -> int:
    """Column of :func:`neighbours` for the offset ``d``."""
    return (d[0] + 1) * 9 + (d[1] + 1) * 3 + (d[2] + 1)


def morton_encode(xyz: np.ndarray, levels: int) -> np.ndarray:
    """Morton keys (uint64) of integer coordinates in ``[0, 2^levels)``."""
    one = np.uint64(1)
    x, y, z = (xyz[:, i].astype(np.uint64) for i in range(3))
    m = np.zeros(len(xyz), np.uint64)
    for b in range(levels - 1, -1, -1):
        s = np.uint64(b)
        m = (m << np.uint64(3)) | (((x >> s) & one) << np.uint64(2)) | (((y >> s) & one) << one)
        m |= (z >> s) & one
    return m


def morton_decode(m: np.ndarray, levels: int) -> np.ndarray:
    """Integer coordinates ``(N, 3)`` int64 of Morton keys."""
    out = np.zeros((len(m), 3), np.int64)
    keys = m.astype(np.uint64)
    for b in range(levels):
        t = ((keys >> np.uint64(3 * b)) & np.uint64(7)).astype(np.int64)
        out[:, 0] |= ((t >> 2) & 1) << b
        out[:, 1] |= ((t >> 1) & 1) << b
        out[:, 2] |= (t & 1) << b
    return out


def build_octree(xyz: np.ndarray, levels: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(keys, codes)``: Morton keys of levels ``0..L`` and child masks of levels ``0..L-1``.

    Duplicate voxels collapse (a voxel set has no multiplicity).  An empty
    input gives empty levels.
    """
    cur = np.unique(morton_encode(xyz, levels))
    found = [cur]
    codes: list[np.ndarray] = []
    for _ in range(levels):
        parent = cur >> np.uint64(3)
        bit = TAP_BITS[(cur & np.uint64(7)).astype(np.int64)]
        if len(cur) == 0:
            found.append(parent)
            codes.append(np.zeros(0, np.uint8))
            continue
        start = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
        code = np.bitwise_or.reduceat(np.left_shift(1, bit), start).astype(np.uint8)
        cur = parent[start]
        found.append(cur)
        codes.append(code)
    return found[::-1], codes[::-1]


def expand_level(parents: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Children (Morton keys, in order) of ``parents`` given their child masks."""
    occ = ((codes.astype(np.int64)[:, None] >> TAP_BITS[None, :]) & 1).astype(bool)
    cand = (parents[:, None] << np.uint64(3)) | np.arange(8, dtype=np.uint64)[None, :]
    children: np.ndarray = cand[occ]
    return children


def octree_stream(codes: list[np.ndarray]) -> bytes:
    """The uncompressed octree: every level's child masks, coarsest first, one byte each."""
    return b"".join(c.astype(np.uint8).tobytes() for c in codes)


def neighbours(xyz: np.ndarray, level: int) -> np.ndarray:
    """``(M, 27)`` row of each voxel's neighbour at :data:`OFFSETS`, ``-1`` where empty."""
    if len(xyz) == 0:
        return np.zeros((0, 27), np.int64)
    side = (1 << level) + 2
    key = ((xyz[:, 0] + 1) * side + (xyz[:, 1] + 1)) * side + (xyz[:, 2] + 1)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    shift = (OFFSETS[:, 0] * side + OFFSETS[:, 1]) * side + OFFSETS[:, 2]
    q = key[:, None] + shift[None, :]
    pos = np.minimum(np.searchsorted(skey, q), len(skey) - 1)
    found: np.ndarray = np.where(skey[pos] == q, order[pos], -1)
    return found
