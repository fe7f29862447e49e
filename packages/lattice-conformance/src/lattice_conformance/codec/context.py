"""The context-adaptive (non-neural) models: counts per context, learnt while coding.

Bit ``k`` of every parent of a level is coded in one vectorised pass, so in
pass ``k`` the bits ``j < k`` of *every* parent of the level are known.  The
context of a bit is

* the sibling bits already coded (``k`` bits: ``2^k`` patterns),
* how many of its (up to 3) face neighbours in the neighbouring parents on its
  outward side are already known to be occupied (0..3),
* how many of the parent's face neighbours on that side are occupied (0..3),
* how many of the parent's edge and corner neighbours on that side are (0..4),
* optionally one more index (the neural model's quantised logit bucket: the
  method that adapts the learnt model to the cloud at hand).

Probabilities come from integer counts: the counts of earlier levels (halved
after every level) plus those of earlier chunks of this pass; chunks grow
geometrically (1/64, 1/64, 2/64, ... of the pass), so decoding is one coder
call per (level, bit, chunk).  Everything is integer, so encoder and decoder
agree exactly.
"""

from __future__ import annotations

import itertools

import numpy as np

from lattice_conformance.codec.coder import Coder, code_bits, quant_from_counts
from lattice_conformance.codec.octree import off_index

__all__ = [
    "Tables",
    "adaptive_pass",
    "bit_contexts",
    "chunk_bounds",
    "context_size",
    "halve",
    "update_tables",
]

CHUNK_FRACTIONS = np.array([0, 1, 2, 4, 8, 16, 32, 64]) / 64

# Per bit k: (ones, totals) count tables, or None before the first level.
Tables = list[tuple[np.ndarray, np.ndarray] | None]


def context_size(k: int, extra: int = 1) -> int:
    """Number of contexts of bit ``k`` (times ``extra`` values of the extra index)."""
    return (1 << k) * 80 * extra


def bit_contexts(
    nbr: np.ndarray,
    codes_known: np.ndarray,
    k: int,
    extra: np.ndarray | None = None,
    extra_size: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``(ctx, forced)`` of bit ``k`` of every parent; only bits ``< k`` of the codes are read.

    ``forced`` marks bit 7 of a parent whose bits 0..6 are all zero: a parent
    has at least one child, so that bit is 1 and costs nothing.
    """
    o = ((k >> 0) & 1, (k >> 1) & 1, (k >> 2) & 1)
    s = tuple(2 * v - 1 for v in o)
    occ = (nbr >= 0).astype(np.int64)
    fc = np.zeros(len(nbr), np.int64)
    for a in range(3):
        d = [0, 0, 0]
        d[a] = s[a]
        fc += occ[:, off_index(d)]
    ec = np.zeros(len(nbr), np.int64)
    for e in ((s[0], s[1], 0), (s[0], 0, s[2]), (0, s[1], s[2]), s):
        ec += occ[:, off_index(e)]
    codes = codes_known.astype(np.int64)
    kx = np.zeros(len(nbr), np.int64)
    for a in range(3):
        if o[a] == 1:
            bn = k ^ (1 << a)
            d = [0, 0, 0]
            d[a] = 1
            j = nbr[:, off_index(d)]
            kx += np.where(j >= 0, (codes[np.maximum(j, 0)] >> bn) & 1, 0)
    sib = codes & ((1 << k) - 1)
    forced = (sib == 0) if k == 7 else np.zeros(len(nbr), bool)
    ctx = ((sib * 4 + kx) * 4 + fc) * 5 + ec
    if extra is not None:
        ctx = ctx * extra_size + extra
    return ctx, forced


def chunk_bounds(m: int) -> np.ndarray:
    """Chunk edges of a pass of ``m`` bits (1/64, 1/64, 2/64, ... 32/64 of it)."""
    return np.unique(np.floor(CHUNK_FRACTIONS * m).astype(np.int64))


def adaptive_pass(
    coder: Coder | None,
    ctx: np.ndarray,
    y: np.ndarray | None,
    ones: np.ndarray,
    total: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Code (``y`` given) or decode one pass chunk by chunk; returns ``(y, ones, total, bits)``.

    With ``coder=None`` nothing is coded and ``bits`` is the exact ideal code
    length, which is how the encoder compares methods before choosing one.
    """
    c1 = ones.copy()
    cn = total.copy()
    out = np.zeros(len(ctx), np.int64)
    bits = 0.0
    b = chunk_bounds(len(ctx))
    for lo, hi in itertools.pairwise(b):
        c = ctx[lo:hi]
        q = quant_from_counts(2 * c1[c] + 1, 2 * cn[c] + 2)
        yy, cost = code_bits(coder, None if y is None else y[lo:hi], q)
        bits += cost
        out[lo:hi] = yy
        cn += np.bincount(c, minlength=len(cn))
        c1 += np.bincount(c, weights=yy, minlength=len(cn)).astype(np.int64)
    return out, c1, cn, bits


def update_tables(tables: Tables, k: int, ctx: np.ndarray, y: np.ndarray, size: int) -> None:
    """Add a known pass to the tables of bit ``k`` (what a coded pass leaves behind)."""
    entry = tables[k]
    ones, total = entry if entry is not None else (np.zeros(size, np.int64),) * 2
    tables[k] = (
        ones + np.bincount(ctx, weights=y, minlength=size).astype(np.int64),
        total + np.bincount(ctx, minlength=size),
    )


def halve(tables: Tables) -> Tables:
    """Forget half of the past after a level (integer, so both sides agree)."""
    return [None if t is None else (t[0] >> 1, t[1] >> 1) for t in tables]
