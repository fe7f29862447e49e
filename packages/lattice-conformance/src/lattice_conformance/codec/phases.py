"""The parity-phase context model: same-level context, with a backoff estimator.

The plain context model (:mod:`.context`) codes bit ``k`` of *every* parent of
a level in one pass, so a bit only sees the parent level and the bits
``< k`` of the neighbouring parents.  On axis-aligned faces (CAD parts, walls)
that is too little: which half of a parent a plane lies in is only visible in
the *complete* masks of the neighbouring parents, which is what LZMA's exact
repeats exploit.

Here the parents of a level are split into 8 phases by coordinate parity,
``(x & 1) * 4 + (y & 1) * 2 + (z & 1)``, and coded phase by phase (bit by bit
inside a phase), so a parent of phase ``f`` sees the complete masks of its
neighbours of phases ``< f``.  The decoder runs the same 64 vectorised passes
per level.  Context of bit ``k`` of a parent:

* ``nocc``: its known occupied face neighbours at the child level (0..6),
* ``fcp``: the 3-bit pattern of the parent's face neighbours on the child's
  outward side, ``ec`` its outward edge/corner neighbours (0..4),
* ``sc``: the sibling bits set so far (0..3+; bit 7 is forced when 0),
* ``par``: how many complete face-neighbour parents there are (0, 1, 2+) and
  how many of them hold the child at the same offset (0, 1, 2+).

That is 7840 contexts per bit, too many for a few thousand parents, so the
estimate backs off: ``p = (n1 + 2 p_c) / (n + 2)`` with ``p_c`` the estimate of
the coarse context ``(nocc, fcp, sc)`` (224 contexts).  Everything is integer
(16-bit fixed point), so both sides compute identical probabilities.
"""

from __future__ import annotations

import itertools

import numpy as np

from lattice_conformance.codec.coder import PONE, Coder, code_bits
from lattice_conformance.codec.context import chunk_bounds
from lattice_conformance.codec.octree import off_index

__all__ = ["PhaseTables", "code_level_phases", "halve_phases", "parity_phase"]

FINE, COARSE = 7 * 8 * 5 * 4 * 7, 7 * 8 * 4
# Per bit k: (fine ones, fine totals, coarse ones, coarse totals), or None before any level.
PhaseTables = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None]


def _contexts(
    nbr: np.ndarray, known: np.ndarray, phase: np.ndarray, rows: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fine, coarse, forced)`` of bit ``k`` of the parents ``rows`` (all of one phase).

    Only reads what the decoder has: complete masks of earlier phases, bits
    ``< k`` of this phase.
    """
    o = (k & 1, (k >> 1) & 1, (k >> 2) & 1)
    s = tuple(2 * v - 1 for v in o)
    nb = nbr[rows]
    occ = nb >= 0
    me = phase[rows]
    fcp = np.zeros(len(rows), np.int64)
    for a in range(3):
        d = [0, 0, 0]
        d[a] = s[a]
        fcp |= occ[:, off_index(d)].astype(np.int64) << a
    ec = np.zeros(len(rows), np.int64)
    for e in ((s[0], s[1], 0), (s[0], 0, s[2]), (0, s[1], s[2]), s):
        ec += occ[:, off_index(e)]
    own = known[rows]
    nocc = np.zeros(len(rows), np.int64)
    pocc = np.zeros(len(rows), np.int64)
    pkn = np.zeros(len(rows), np.int64)
    for a in range(3):
        bn = k ^ (1 << a)
        for direction in (-1, 1):
            d = [0, 0, 0]
            d[a] = direction
            j = nb[:, off_index(d)]
            jj = np.maximum(j, 0)
            done = (j >= 0) & (phase[jj] < me)
            pocc += np.where(done, (known[jj] >> k) & 1, 0)
            pkn += done
            if (o[a] == 1) != (direction == 1):  # the neighbour child is a sibling
                if bn < k:
                    nocc += (own >> bn) & 1
                continue
            seen = done | ((j >= 0) & (phase[jj] == me) & (bn < k))
            nocc += np.where(seen, (known[jj] >> bn) & 1, 0)
    low = own & ((1 << k) - 1)
    sc = np.zeros(len(rows), np.int64)
    for b in range(k):
        sc += (low >> b) & 1
    forced = (sc == 0) if k == 7 else np.zeros(len(rows), bool)
    sc = np.minimum(sc, 3)
    pk = np.minimum(pkn, 2)
    par = np.where(pk == 0, 0, 1 + (pk - 1) * 3 + np.minimum(pocc, 2))
    coarse = (nocc * 8 + fcp) * 4 + sc
    fine = (((nocc * 8 + fcp) * 5 + ec) * 4 + sc) * 7 + par
    return fine, coarse, forced


def parity_phase(rows_xyz: np.ndarray) -> np.ndarray:
    """Each parent's phase, ``(x & 1) * 4 + (y & 1) * 2 + (z & 1)``: the coding order of a level."""
    out: np.ndarray = (rows_xyz[:, 0] & 1) * 4 + (rows_xyz[:, 1] & 1) * 2 + (rows_xyz[:, 2] & 1)
    return out


def _backoff_q(f1: np.ndarray, fn: np.ndarray, c1: np.ndarray, cn: np.ndarray) -> np.ndarray:
    """``(f1 + 2 p_c) / (fn + 2)`` in 16-bit fixed point, ``p_c = (c1 + .4) / (cn + .8)``."""
    pc = ((5 * c1 + 2) * PONE) // (5 * cn + 4)
    q: np.ndarray = np.clip((f1 * PONE + 2 * pc + (fn + 2) // 2) // (fn + 2), 1, PONE - 1)
    return q


def _pass(
    coder: Coder | None,
    fine: np.ndarray,
    coarse: np.ndarray,
    y: np.ndarray | None,
    tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], float]:
    f1, fn, c1, cn = (t.copy() for t in tables)
    out = np.zeros(len(fine), np.int64)
    bits = 0.0
    for lo, hi in itertools.pairwise(chunk_bounds(len(fine))):
        ff, cc = fine[lo:hi], coarse[lo:hi]
        q = _backoff_q(f1[ff], fn[ff], c1[cc], cn[cc])
        yy, cost = code_bits(coder, None if y is None else y[lo:hi], q)
        bits += cost
        out[lo:hi] = yy
        fn += np.bincount(ff, minlength=FINE)
        f1 += np.bincount(ff, weights=yy, minlength=FINE).astype(np.int64)
        cn += np.bincount(cc, minlength=COARSE)
        c1 += np.bincount(cc, weights=yy, minlength=COARSE).astype(np.int64)
    return out, (f1, fn, c1, cn), bits


def code_level_phases(
    coder: Coder | None,
    rows_xyz: np.ndarray,
    nbr: np.ndarray,
    codes: np.ndarray | None,
    tables: PhaseTables,
) -> tuple[np.ndarray, float]:
    """Code (``codes`` given) or decode one level; returns ``(codes, bits)``.

    ``tables`` is updated in place to what both sides hold after the level
    (before the per-level halving, which the caller does).
    """
    phase = parity_phase(rows_xyz)
    known = np.zeros(len(nbr), np.int64)
    full = None if codes is None else codes.astype(np.int64)
    bits = 0.0
    for f in range(8):
        rows = np.flatnonzero(phase == f)
        if len(rows) == 0:
            continue
        for k in range(8):
            fine, coarse, forced = _contexts(nbr, known, phase, rows, k)
            y = None if full is None else ((full[rows] >> k) & 1)[~forced]
            entry = tables[k]
            if entry is None:
                zf, zc = np.zeros(FINE, np.int64), np.zeros(COARSE, np.int64)
                entry = (zf, zf, zc, zc)
            yy, tables[k], b = _pass(coder, fine[~forced], coarse[~forced], y, entry)
            bits += b
            got = np.ones(len(rows), np.int64)
            got[~forced] = yy
            known[rows] |= got << k
    return known, bits


def halve_phases(tables: PhaseTables) -> PhaseTables:
    """Forget half of the past after a level (integer, so both sides agree)."""
    return [None if t is None else (t[0] >> 1, t[1] >> 1, t[2] >> 1, t[3] >> 1) for t in tables]
