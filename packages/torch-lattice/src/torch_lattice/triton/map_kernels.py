# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (Triton jit kernels take untyped pointer and constexpr arguments.)
"""Triton kernels that build kernel maps on the device, in a handful of launches per layer.

* **Hash table of a support** (:func:`launch_insert`): one int32 slot per
  power-of-two bucket holds a row index, claimed with a compare-and-swap and
  linear probing; keys are the rows' physical ``(batch, x, y, z)`` themselves
  (no bounding box, no sort, no host read), compared against the coordinate
  array on lookup.
* **All (output row, tap) lookups at once** (:func:`launch_probe`): one 2-D
  launch over rows x taps computes each tap's input coordinate in int64
  (coordinates that leave int32 cannot be present and are absent), probes the
  table and writes the slot table and, per row, the bit mask of its present
  taps (what the tap-skipping conv tiles sort by).
* **A generated support** (:func:`launch_candidates`, :func:`launch_mark`,
  :func:`launch_emit`): one launch computes every candidate output row of
  every (input row, tap) in int64, checks that it fits int32 (a device flag
  and the first offending candidate, read with the output size), and packs
  it into an int64 key over a box derived on the device from the input's
  bounds; after ``torch.sort`` one launch marks each distinct key and counts
  them, and after a cumulative sum one launch writes the output coordinates
  and the slot table.  The output size, the range flag and the overflow flag
  of the packing come back in one read: the layer's only host
  synchronisation.  The indexed relation (``full_conv3d``) makes only the
  taps whose division by the stride can be exact (8 of 27 per row for k3s2),
  so the sort sees a third of the keys.
* **The adjoint table** (:func:`launch_transpose`): one scatter launch, which
  also writes the adjoint's present-tap masks.

Geometry that selects integer divisions (strides, divisors, kernel sizes,
candidates per row) is passed as compile-time constants, so int64 divisions
by them compile to multiplies and shifts (they bounded these launches).
Integer division here only ever divides exact multiples or goes through
:func:`_floor_div`, because compiled Triton truncates towards zero where the
interpreter (NumPy) floors.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from torch_lattice.triton.kernels import cdiv, interpreting, next_pow2

__all__ = [
    "KEY_SENTINEL",
    "first_bad",
    "launch_candidates",
    "launch_direct",
    "launch_emit",
    "launch_insert",
    "launch_mark",
    "launch_pairs",
    "launch_probe",
    "launch_transpose",
    "new_info",
    "pattern_dtype",
]

KEY_SENTINEL = (1 << 63) - 1
"""Key of a candidate that produces no row (sorted last, never counted)."""

INFO_COUNT, INFO_RANGE, INFO_OVERFLOW, INFO_FIRST_BAD = range(4)
"""Slots of the int32 info vector a generated support reports through (read once)."""


def _block() -> int:
    return 128 if interpreting() else 1024


@triton.jit
def _hash(b, x, y, z, cap_mask):
    """Bucket of a row: a spatial hash of the four int64 coordinates, mixed (no overflow)."""
    h = (x * 73856093) ^ (y * 19349663) ^ (z * 83492791) ^ (b * 1000003)
    h = h ^ (h >> 29)
    h = (h & 0x7FFFFFFF) * 0x45D9F3B
    h = h ^ (h >> 16)
    h = (h & 0x7FFFFFFF) * 0x45D9F3B
    h = h ^ (h >> 16)
    return h & cap_mask


@triton.jit
def _floor_div(a, d):
    """(floor(a / d), a mod d) for d > 0, the same compiled and interpreted."""
    r = ((a % d) + d) % d
    return (a - r) // d, r


@triton.jit
def _in_int32(v):
    return (v >= -2147483648) & (v <= 2147483647)


# --------------------------------------------------------------------------- hash table


@triton.jit
def _insert_kernel(
    coords_ptr, table_ptr, live_ptr, n_rows, cap_mask, LIVE: tl.constexpr, BLOCK: tl.constexpr
):
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if LIVE:  # a padded support: only its first live_ptr[0] rows are rows
        n_rows = tl.minimum(tl.load(live_ptr), n_rows)
    live = r < n_rows
    b = tl.load(coords_ptr + r * 4, mask=live, other=0).to(tl.int64)
    x = tl.load(coords_ptr + r * 4 + 1, mask=live, other=0).to(tl.int64)
    y = tl.load(coords_ptr + r * 4 + 2, mask=live, other=0).to(tl.int64)
    z = tl.load(coords_ptr + r * 4 + 3, mask=live, other=0).to(tl.int64)
    # Lanes past the end start on distinct slots: a compare-and-swap cannot be masked, and
    # lanes that share one address would serialise on it.
    h = tl.where(live, _hash(b, x, y, z, cap_mask), r & cap_mask)
    pending = live
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        # Finished lanes (and those past the end) compare against -2, which no slot holds,
        # on their own slot: no write, no contention.
        want = tl.where(pending, -1, -2)
        old = tl.atomic_cas(table_ptr + h, want, tl.where(pending, r, -2).to(tl.int32))
        pending = pending & (old != -1)
        h = tl.where(pending, (h + 1) & cap_mask, h)


def launch_insert(coords: torch.Tensor, live: torch.Tensor | None = None) -> torch.Tensor:
    """Hash table (``capacity + 1`` int32, -1 empty) of the rows of ``coords`` (N, 4) int32.

    The capacity is a power of two of at least four times the rows (load at
    most a quarter, so probe runs stay short for every lane of a block); the
    extra last slot is never used (kept so the layout has room for a sentinel).
    ``live`` (int32 ``(1,)`` on the device) keeps only that many leading rows:
    a padded support's (:class:`torch_lattice.sparse.Support`), whose padding
    must never be found.
    """
    n = int(coords.shape[0])
    cap = max(64, next_pow2(4 * max(n, 1)))
    table = torch.full((cap + 1,), -1, dtype=torch.int32, device=coords.device)
    if n:
        block = _block()
        _insert_kernel[(cdiv(n, block),)](
            coords, table, table if live is None else live, n, cap - 1, LIVE=live is not None,
            BLOCK=block,
        )  # fmt: skip
    return table


@triton.jit
def _probe_kernel(
    q_ptr,  # (M, 4) int32 physical rows of the queried (output) support
    term_ptr,  # (K, 3) int64 additive term of each tap
    c_ptr,  # (N, 4) int32 physical rows of the searched support
    table_ptr,  # its hash table
    slots_ptr,  # (M, K) int32 result
    pattern_ptr,  # (M,) bit mask of present taps (int32 up to 31 taps), or a dummy
    live_ptr,  # (1,) int32: queried rows at and past it are padding, all -1 (LIVE)
    m_rows,
    cap_mask,
    u0: tl.constexpr,
    u1: tl.constexpr,
    u2: tl.constexpr,  # stride of the queried support (divides its coordinates)
    a0: tl.constexpr,
    a1: tl.constexpr,
    a2: tl.constexpr,  # multiplier of the queried logical coordinate
    d0: tl.constexpr,
    d1: tl.constexpr,
    d2: tl.constexpr,  # exact divisor
    t0: tl.constexpr,
    t1: tl.constexpr,
    t2: tl.constexpr,  # stride of the searched support
    K: tl.constexpr,
    KP: tl.constexpr,
    PATTERN: tl.constexpr,
    WIDE: tl.constexpr,
    LIVE: tl.constexpr,
    BR: tl.constexpr,
):
    """slots[o, k] = row of ``(b, t * (o * a + B_k) / d)`` in the searched support, else -1."""
    o = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    k = tl.arange(0, KP)
    live_o = o < m_rows
    live_k = k < K
    live = live_o[:, None] & live_k[None, :]
    asked = live
    if LIVE:
        asked = asked & (o < tl.load(live_ptr))[:, None]
    b = tl.load(q_ptr + o * 4, mask=live_o, other=0).to(tl.int64)[:, None]
    x = (tl.load(q_ptr + o * 4 + 1, mask=live_o, other=0).to(tl.int64) // u0)[:, None]
    y = (tl.load(q_ptr + o * 4 + 2, mask=live_o, other=0).to(tl.int64) // u1)[:, None]
    z = (tl.load(q_ptr + o * 4 + 3, mask=live_o, other=0).to(tl.int64) // u2)[:, None]
    n0 = x * a0 + tl.load(term_ptr + k * 3, mask=live_k, other=0)[None, :]
    n1 = y * a1 + tl.load(term_ptr + k * 3 + 1, mask=live_k, other=0)[None, :]
    n2 = z * a2 + tl.load(term_ptr + k * 3 + 2, mask=live_k, other=0)[None, :]
    ok = asked & (n0 % d0 == 0) & (n1 % d1 == 0) & (n2 % d2 == 0)
    c0 = (n0 // d0) * t0  # exact wherever ok
    c1 = (n1 // d1) * t1
    c2 = (n2 // d2) * t2
    ok = ok & _in_int32(c0) & _in_int32(c1) & _in_int32(c2)
    h = _hash(b, c0, c1, c2, cap_mask)
    result = tl.full([BR, KP], -1, dtype=tl.int32)
    pending = ok
    while tl.max(tl.max(pending.to(tl.int32), axis=1), axis=0) > 0:
        r = tl.load(table_ptr + h, mask=pending, other=-1)
        pending = pending & (r >= 0)
        row = r.to(tl.int64) * 4
        miss = tl.load(c_ptr + row, mask=pending, other=0) != b
        miss = miss | (tl.load(c_ptr + row + 1, mask=pending, other=0) != c0)
        miss = miss | (tl.load(c_ptr + row + 2, mask=pending, other=0) != c1)
        miss = miss | (tl.load(c_ptr + row + 3, mask=pending, other=0) != c2)
        result = tl.where(pending & (miss.to(tl.int32) == 0), r, result)
        pending = pending & miss
        h = (h + 1) & cap_mask
    tl.store(slots_ptr + o[:, None] * K + k[None, :], result, mask=live)
    if PATTERN:
        one = tl.full([BR, KP], 1, tl.int64 if WIDE else tl.int32)
        bits = tl.where(result >= 0, one << k[None, :].to(one.dtype), 0)
        tl.store(pattern_ptr + o, tl.sum(bits, axis=1), mask=live_o)


def launch_probe(
    queried: torch.Tensor,
    queried_stride: tuple[int, int, int],
    terms: torch.Tensor,
    searched: torch.Tensor,
    searched_stride: tuple[int, int, int],
    table: torch.Tensor,
    mul: tuple[int, int, int],
    div: tuple[int, int, int],
    live: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(slots (M, K) int32, present-tap bit mask per row (M,) or None when K > 62).

    Tap k of output row o reads the searched row at logical ``(o * mul +
    terms[k]) / div`` (exact division; an inexact one is absent).  With
    ``live`` (int32 ``(1,)`` on the device) the queried rows at and past it
    are padding and get no taps.
    """
    m = int(queried.shape[0])
    k = int(terms.shape[0])
    device = queried.device
    slots = torch.empty(m, k, dtype=torch.int32, device=device)
    kind = pattern_dtype(k)
    with_pattern = kind is not None
    pattern = torch.empty(m, dtype=kind, device=device) if kind is not None else None
    if m == 0 or k == 0:
        return slots, pattern
    if int(searched.shape[0]) == 0:
        return slots.fill_(-1), None if pattern is None else pattern.zero_()
    kp = next_pow2(k)
    br = max(1, (2048 if interpreting() else 1024) // kp)
    _probe_kernel[(cdiv(m, br),)](
        queried,
        terms,
        searched,
        table,
        slots,
        pattern if pattern is not None else slots,
        live if live is not None else slots,
        m,
        int(table.numel()) - 2,
        *queried_stride,
        *mul,
        *div,
        *searched_stride,
        K=k,
        KP=kp,
        PATTERN=with_pattern,
        WIDE=kind is torch.int64,
        LIVE=live is not None,
        BR=br,
    )
    return slots, pattern


# --------------------------------------------------------------------------- generated supports


@triton.jit
def _candidate(
    coords_ptr,
    off_ptr,
    e,
    live,
    G,
    t0,
    t1,
    t2,
    m0,
    m1,
    m2,
    p0,
    p1,
    p2,
    d0,
    d1,
    d2,
    k0,
    k1,
    k2,
    e0,
    e1,
    e2,
    w0,
    w1,
    w2,
    q0,
    q1,
    q2,
    STEP: tl.constexpr,
    DISJOINT: tl.constexpr,
):
    """Candidate e = n * G + j: ``o = floor((c_n * m + p + off_j) / d)`` per axis, int64.

    STEP (the indexed relation ``o = (c * m + p - k * e) / d``, exact) walks
    only the taps whose division is exact: on each axis those are ``k =
    first[r] + i * w`` for ``i < q``, where r is ``(c * m + p) mod d`` and
    ``first`` (at ``off_ptr``, d0 + d1 + d2 entries) the smallest such tap per
    residue (the kernel size where there is none); j enumerates the ``i`` of
    the three axes, so candidates that could never be exact are not made.
    DISJOINT keeps remainders below the kernel size and returns the tap they
    select (downsampling whose windows do not overlap); otherwise the tap is j.
    """
    n = e // G
    j = e % G
    b = tl.load(coords_ptr + n * 4, mask=live, other=0).to(tl.int64)
    c0 = tl.load(coords_ptr + n * 4 + 1, mask=live, other=0).to(tl.int64) // t0
    c1 = tl.load(coords_ptr + n * 4 + 2, mask=live, other=0).to(tl.int64) // t1
    c2 = tl.load(coords_ptr + n * 4 + 3, mask=live, other=0).to(tl.int64) // t2
    if STEP:
        a0 = c0 * m0 + p0
        a1 = c1 * m1 + p1
        a2 = c2 * m2 + p2
        _, r0 = _floor_div(a0, d0)
        _, r1 = _floor_div(a1, d1)
        _, r2 = _floor_div(a2, d2)
        i0 = j // (q1 * q2)
        i1 = (j // q2) % q1
        i2 = j % q2
        s0 = tl.load(off_ptr + r0, mask=live, other=0) + i0 * w0
        s1 = tl.load(off_ptr + d0 + r1, mask=live, other=0) + i1 * w1
        s2 = tl.load(off_ptr + d0 + d1 + r2, mask=live, other=0) + i2 * w2
        valid = live & (s0 < k0) & (s1 < k1) & (s2 < k2)
        o0, _ = _floor_div(a0 - s0 * e0, d0)  # exact wherever valid
        o1, _ = _floor_div(a1 - s1 * e1, d1)
        o2, _ = _floor_div(a2 - s2 * e2, d2)
        tap = (s0 * k1 + s1) * k2 + s2
    else:
        o0, r0 = _floor_div(c0 * m0 + p0 + tl.load(off_ptr + j * 3, mask=live, other=0), d0)
        o1, r1 = _floor_div(c1 * m1 + p1 + tl.load(off_ptr + j * 3 + 1, mask=live, other=0), d1)
        o2, r2 = _floor_div(c2 * m2 + p2 + tl.load(off_ptr + j * 3 + 2, mask=live, other=0), d2)
        valid = live
        tap = j
        if DISJOINT:
            valid = valid & (r0 < k0) & (r1 < k1) & (r2 < k2)
            tap = (r0 * k1 + r1) * k2 + r2
    return n, b, o0, o1, o2, valid, tap


@triton.jit
def _candidates_kernel(
    coords_ptr,
    off_ptr,
    lo_ptr,  # (4,) int32 physical minimum of the input rows
    hi_ptr,  # (4,) int32 physical maximum
    keys_ptr,  # (total,) int64 result
    info_ptr,  # (4,) int32: count, range flag, overflow flag, first bad candidate
    live_ptr,  # (1,) int32: input rows at and past it are padding, no candidates (LIVE)
    total,
    G: tl.constexpr,
    t0: tl.constexpr,
    t1: tl.constexpr,
    t2: tl.constexpr,
    m0: tl.constexpr,
    m1: tl.constexpr,
    m2: tl.constexpr,
    p0,
    p1,
    p2,
    d0: tl.constexpr,
    d1: tl.constexpr,
    d2: tl.constexpr,
    k0: tl.constexpr,
    k1: tl.constexpr,
    k2: tl.constexpr,
    e0: tl.constexpr,
    e1: tl.constexpr,
    e2: tl.constexpr,
    w0: tl.constexpr,
    w1: tl.constexpr,
    w2: tl.constexpr,
    q0: tl.constexpr,
    q1: tl.constexpr,
    q2: tl.constexpr,
    u0,
    u1,
    u2,  # output stride
    f0,
    f1,
    f2,  # smallest offset per axis
    g0,
    g1,
    g2,  # largest offset per axis
    STEP: tl.constexpr,
    DISJOINT: tl.constexpr,
    LIVE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    stored = e < total
    made = total
    if LIVE:
        made = tl.minimum(tl.load(live_ptr).to(tl.int64) * G, total)
    live = e < made
    _n, b, o0, o1, o2, valid, _tap = _candidate(
        coords_ptr, off_ptr, e, live, G, t0, t1, t2, m0, m1, m2, p0, p1, p2, d0, d1, d2, k0, k1,
        k2, e0, e1, e2, w0, w1, w2, q0, q1, q2, STEP, DISJOINT,
    )  # fmt: skip
    fits = _in_int32(o0 * u0) & _in_int32(o1 * u1) & _in_int32(o2 * u2)
    bad = valid & (fits.to(tl.int32) == 0)
    if tl.sum(bad.to(tl.int32), axis=0) > 0:  # rare: no atomics on the common path
        tl.atomic_max(info_ptr + 1, 1)
        tl.atomic_max(info_ptr + 3, tl.max(tl.where(bad, 2147483647 - e, 0), axis=0).to(tl.int32))
    # The output box, from the input's: the relation is monotone in c and in the offset.
    lob = tl.load(lo_ptr).to(tl.int64)
    hib = tl.load(hi_ptr).to(tl.int64)
    l0, _ = _floor_div(tl.load(lo_ptr + 1).to(tl.int64) // t0 * m0 + p0 + f0, d0)
    l1, _ = _floor_div(tl.load(lo_ptr + 2).to(tl.int64) // t1 * m1 + p1 + f1, d1)
    l2, _ = _floor_div(tl.load(lo_ptr + 3).to(tl.int64) // t2 * m2 + p2 + f2, d2)
    h0, _ = _floor_div(tl.load(hi_ptr + 1).to(tl.int64) // t0 * m0 + p0 + g0, d0)
    h1, _ = _floor_div(tl.load(hi_ptr + 2).to(tl.int64) // t1 * m1 + p1 + g1, d1)
    h2, _ = _floor_div(tl.load(hi_ptr + 3).to(tl.int64) // t2 * m2 + p2 + g2, d2)
    s1 = h1 - l1 + 1
    s2 = h2 - l2 + 1
    volume = (hib - lob + 1).to(tl.float64) * (h0 - l0 + 1).to(tl.float64)
    volume = volume * s1.to(tl.float64) * s2.to(tl.float64)
    if (tl.program_id(0) == 0) & (made > 0):  # one box for every program (none without rows)
        tl.atomic_max(info_ptr + 2, (volume >= 4.611686018427387904e18).to(tl.int32))
    key = (((b - lob) * (h0 - l0 + 1) + (o0 - l0)) * s1 + (o1 - l1)) * s2 + (o2 - l2)
    tl.store(keys_ptr + e, tl.where(valid, key, 9223372036854775807), mask=stored)


@triton.jit
def _mark_kernel(sorted_ptr, first_ptr, info_ptr, total, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = i < total
    key = tl.load(sorted_ptr + i, mask=live, other=9223372036854775807)
    prev = tl.load(sorted_ptr + i - 1, mask=live & (i > 0), other=9223372036854775807)
    first = live & (key != 9223372036854775807) & ((i == 0) | (key != prev))
    tl.store(first_ptr + i, first.to(tl.int32), mask=live)
    tl.atomic_add(info_ptr, tl.sum(first.to(tl.int32), axis=0))


@triton.jit
def _emit_kernel(
    coords_ptr,
    off_ptr,
    sorted_ptr,
    perm_ptr,
    first_ptr,
    rank_ptr,
    out_ptr,  # (count, 4) int32 output coordinates
    slots_ptr,  # (count, K) int32, pre-filled with -1
    pattern_ptr,  # (count,) bit mask of present taps, pre-filled with 0, or a dummy
    back_ptr,  # (total, K) int32 adjoint table, every row written (BACK), or a dummy
    back_pattern_ptr,  # (total,) int32 its present-tap masks (BACK), or a dummy
    total,
    rows,  # the output's rows (count): distinct candidates past it are not written
    G: tl.constexpr,
    t0: tl.constexpr,
    t1: tl.constexpr,
    t2: tl.constexpr,
    m0: tl.constexpr,
    m1: tl.constexpr,
    m2: tl.constexpr,
    p0,
    p1,
    p2,
    d0: tl.constexpr,
    d1: tl.constexpr,
    d2: tl.constexpr,
    k0: tl.constexpr,
    k1: tl.constexpr,
    k2: tl.constexpr,
    e0: tl.constexpr,
    e1: tl.constexpr,
    e2: tl.constexpr,
    w0: tl.constexpr,
    w1: tl.constexpr,
    w2: tl.constexpr,
    q0: tl.constexpr,
    q1: tl.constexpr,
    q2: tl.constexpr,
    u0,
    u1,
    u2,
    K: tl.constexpr,
    STEP: tl.constexpr,
    DISJOINT: tl.constexpr,
    SLOTS: tl.constexpr,
    PATTERN: tl.constexpr,
    WIDE: tl.constexpr,
    BACK: tl.constexpr,
    KP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_total = i < total
    live = in_total & (tl.load(sorted_ptr + i, mask=in_total, other=0) != 9223372036854775807)
    e = tl.load(perm_ptr + i, mask=in_total, other=0)
    n, b, o0, o1, o2, valid, tap = _candidate(
        coords_ptr, off_ptr, e, live, G, t0, t1, t2, m0, m1, m2, p0, p1, p2, d0, d1, d2, k0, k1,
        k2, e0, e1, e2, w0, w1, w2, q0, q1, q2, STEP, DISJOINT,
    )  # fmt: skip
    r = tl.load(rank_ptr + i, mask=valid, other=1).to(tl.int64) - 1
    valid = valid & (r < rows)  # a bounded padded support overflowed: flagged, not written
    head = valid & (tl.load(first_ptr + i, mask=valid, other=0) != 0)
    tl.store(out_ptr + r * 4, b.to(tl.int32), mask=head)
    tl.store(out_ptr + r * 4 + 1, (o0 * u0).to(tl.int32), mask=head)
    tl.store(out_ptr + r * 4 + 2, (o1 * u1).to(tl.int32), mask=head)
    tl.store(out_ptr + r * 4 + 3, (o2 * u2).to(tl.int32), mask=head)
    if SLOTS:
        tl.store(slots_ptr + r * K + tap, n.to(tl.int32), mask=valid)
    if PATTERN:
        one = tl.full([BLOCK], 1, tl.int64 if WIDE else tl.int32)
        tl.atomic_or(pattern_ptr + r, one << tap.to(one.dtype), mask=valid)
    if BACK:  # disjoint windows: candidate e is input row e, which feeds row r through tap
        kk = tl.arange(0, KP)
        hit = (kk[None, :] == tap[:, None]) & valid[:, None]
        tl.store(
            back_ptr + e[:, None] * K + kk[None, :],
            tl.where(hit, r[:, None], -1).to(tl.int32),
            mask=in_total[:, None] & (kk < K)[None, :],
        )
        bit = tl.where(valid, tl.full([BLOCK], 1, tl.int32) << tap.to(tl.int32), 0)
        tl.store(back_pattern_ptr + e, bit, mask=in_total)


@triton.jit
def _direct_kernel(
    coords_ptr,
    off_ptr,
    out_ptr,  # (N * K, 4) int32
    slots_ptr,  # (N * K, K) int32
    info_ptr,
    live_ptr,  # (1,) int32: input rows at and past it are padding (LIVE)
    total,
    G: tl.constexpr,
    t0: tl.constexpr,
    t1: tl.constexpr,
    t2: tl.constexpr,
    m0: tl.constexpr,
    m1: tl.constexpr,
    m2: tl.constexpr,
    p0,
    p1,
    p2,
    u0,
    u1,
    u2,
    K: tl.constexpr,
    KP: tl.constexpr,
    LIVE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """Candidates that never meet: output row e is candidate e, fed by row e // K via tap e % K.

    Rows made from padding (LIVE) are padding too: no flags, no taps.
    """
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    stored = e < total
    live = stored
    if LIVE:
        live = live & (e < tl.load(live_ptr).to(tl.int64) * G)
    n, b, o0, o1, o2, valid, tap = _candidate(
        coords_ptr, off_ptr, e, live, G, t0, t1, t2, m0, m1, m2, p0, p1, p2, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, False, False,
    )  # fmt: skip
    x0 = o0 * u0
    x1 = o1 * u1
    x2 = o2 * u2
    fits = _in_int32(x0) & _in_int32(x1) & _in_int32(x2)
    bad = valid & (fits.to(tl.int32) == 0)
    tl.atomic_max(info_ptr + 1, tl.minimum(tl.sum(bad.to(tl.int32), axis=0), 1))
    tl.atomic_max(info_ptr + 3, tl.max(tl.where(bad, 2147483647 - e, 0), axis=0).to(tl.int32))
    tl.store(out_ptr + e * 4, b.to(tl.int32), mask=stored)
    tl.store(out_ptr + e * 4 + 1, x0.to(tl.int32), mask=stored)
    tl.store(out_ptr + e * 4 + 2, x1.to(tl.int32), mask=stored)
    tl.store(out_ptr + e * 4 + 3, x2.to(tl.int32), mask=stored)
    kk = tl.arange(0, KP)
    row = tl.where((kk[None, :] == tap[:, None]) & live[:, None], n[:, None], -1).to(tl.int32)
    tl.store(
        slots_ptr + e[:, None] * K + kk[None, :], row, mask=stored[:, None] & (kk < K)[None, :]
    )


def new_info(device: torch.device) -> torch.Tensor:
    """The info vector, all zero (one fill; a host-to-device copy would synchronise).

    Slot 3 holds ``2^31 - 1 - e`` of the first out-of-range candidate e (see
    :func:`first_bad`), so that zero means none and a maximum finds the first.
    """
    return torch.zeros(4, dtype=torch.int32, device=device)


def first_bad(info_value: int) -> int:
    """The first out-of-range candidate from info slot 3."""
    return 2**31 - 1 - info_value


Geometry = tuple[int, ...]
"""Flattened per-axis integers of a candidate relation (see :func:`launch_candidates`)."""


def launch_candidates(
    coords: torch.Tensor,
    table: torch.Tensor,
    g: int,
    lo: torch.Tensor,
    hi: torch.Tensor,
    info: torch.Tensor,
    geometry: Geometry,
    out_stride: tuple[int, int, int],
    off_range: tuple[Geometry, Geometry],
    step: bool,
    disjoint: bool,
    live: torch.Tensor | None = None,
) -> torch.Tensor:
    """int64 key of every candidate ``n * g + j`` (``KEY_SENTINEL`` where none).

    ``geometry`` is ``(t, m, p, d, k, e, w, q)`` flattened (24 ints): input
    stride, multiplier, additive term, divisor, kernel size, dilation, tap
    period and taps per residue on each axis (the last three used by
    ``step`` only); ``table`` the (g, 3) int64 offsets of the candidates, or
    with ``step`` the first exact tap per residue (see :func:`_candidate`);
    ``off_range`` the offsets' per-axis minimum and maximum.  Flags land in
    ``info``.  With ``live`` (int32 ``(1,)`` on the device) the input rows at
    and past it are padding: their candidates are ``KEY_SENTINEL``.
    """
    total = int(coords.shape[0]) * g
    keys = torch.empty(total, dtype=torch.int64, device=coords.device)
    block = _block()
    _candidates_kernel[(cdiv(total, block),)](
        coords, table, lo, hi, keys, info, keys if live is None else live, total, g, *geometry,
        *out_stride, *off_range[0], *off_range[1], STEP=step, DISJOINT=disjoint,
        LIVE=live is not None, BLOCK=block,
    )  # fmt: skip
    return keys


def launch_mark(sorted_keys: torch.Tensor, info: torch.Tensor) -> torch.Tensor:
    """int32 flags of the first occurrence of each distinct real key; their count into info[0]."""
    total = int(sorted_keys.numel())
    first = torch.empty(total, dtype=torch.int32, device=sorted_keys.device)
    block = _block()
    _mark_kernel[(cdiv(total, block),)](sorted_keys, first, info, total, BLOCK=block)
    return first


def pattern_dtype(volume: int) -> torch.dtype | None:
    """dtype of the present-tap bit masks of a ``volume``-tap map, None past 62 taps.

    int32 up to 31 taps: the tap-pattern sort then radix-sorts 4-byte keys
    (half the passes of int64).
    """
    if volume <= 31:
        return torch.int32
    return torch.int64 if volume <= 62 else None


def launch_emit(
    coords: torch.Tensor,
    table: torch.Tensor,
    g: int,
    sorted_keys: torch.Tensor,
    perm: torch.Tensor,
    first: torch.Tensor,
    rank: torch.Tensor,
    out: torch.Tensor,
    slots: torch.Tensor | None,
    geometry: Geometry,
    out_stride: tuple[int, int, int],
    step: bool,
    disjoint: bool,
) -> tuple[torch.Tensor | None, tuple[torch.Tensor, torch.Tensor] | None]:
    """Write each distinct candidate's output row and (with ``slots``) every pair's slot.

    Returns each output row's present-tap bit mask where the slots have at
    most 62 taps (what the tap-skipping conv tiles sort by;
    :func:`pattern_dtype`), and, for disjoint windows with slots, the adjoint
    table with its masks: there candidate e is input row e and feeds one
    output row through one tap, so the same launch writes every input row's
    adjoint row (the input gradient's and a U-Net decoder's map) without a
    fill or a transposing launch.
    """
    total = int(sorted_keys.numel())
    block = _block()
    volume = 1 if slots is None else int(slots.shape[1])
    pattern = None
    kind = pattern_dtype(volume)
    if slots is not None and kind is not None:
        pattern = torch.zeros(int(slots.shape[0]), dtype=kind, device=out.device)
    back = None
    if disjoint and slots is not None and volume <= 31:
        back = (
            torch.empty(total, volume, dtype=torch.int32, device=out.device),
            torch.empty(total, dtype=torch.int32, device=out.device),
        )
    _emit_kernel[(cdiv(total, block),)](
        coords, table, sorted_keys, perm, first, rank, out,
        slots if slots is not None else out, pattern if pattern is not None else out,
        *(back if back is not None else (out, out)), total, int(out.shape[0]), g,
        *geometry, *out_stride, K=volume, STEP=step, DISJOINT=disjoint, SLOTS=slots is not None,
        PATTERN=pattern is not None, WIDE=kind is torch.int64, BACK=back is not None,
        KP=next_pow2(volume), BLOCK=block,
    )  # fmt: skip
    return pattern, back


@triton.jit
def _transpose_kernel(
    slots_ptr,  # (M, K) int32 forward table
    back_ptr,  # (N, K) int32 result, pre-filled with -1
    pattern_ptr,  # (N,) present-tap bit masks, pre-filled with 0, or a dummy
    m_rows,
    K: tl.constexpr,
    KP: tl.constexpr,
    PATTERN: tl.constexpr,
    WIDE: tl.constexpr,
    BR: tl.constexpr,
):
    """back[slots[o, k], k] = o: every (input, tap) has at most one output, so no conflicts."""
    o = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    k = tl.arange(0, KP)
    live = (o < m_rows)[:, None] & (k < K)[None, :]
    src = tl.load(slots_ptr + o[:, None] * K + k[None, :], mask=live, other=-1).to(tl.int64)
    hit = live & (src >= 0)
    rows = tl.broadcast_to(o[:, None], [BR, KP]).to(tl.int32)
    tl.store(back_ptr + src * K + k[None, :], rows, mask=hit)
    if PATTERN:
        one = tl.full([BR, KP], 1, tl.int64 if WIDE else tl.int32)
        tl.atomic_or(pattern_ptr + src, one << k[None, :], mask=hit)


def launch_transpose(slots: torch.Tensor, num_in: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(adjoint table (num_in, K) int32, its present-tap masks or None): one fill and one launch.

    The masks come from the same launch, so the adjoint's tap-pattern order
    (:meth:`SlotMap.order`) needs only its sort.
    """
    m, k = (int(v) for v in slots.shape)
    device = slots.device
    back = torch.full((num_in, k), -1, dtype=torch.int32, device=device)
    kind = pattern_dtype(k)
    pattern = None if kind is None else torch.zeros(num_in, dtype=kind, device=device)
    if m and k and num_in:
        kp = next_pow2(k)
        br = max(1, (2048 if interpreting() else 1024) // kp)
        _transpose_kernel[(cdiv(m, br),)](
            slots, back, pattern if pattern is not None else back, m, K=k, KP=kp,
            PATTERN=pattern is not None, WIDE=kind is torch.int64, BR=br,
        )  # fmt: skip
    return back, pattern


def launch_direct(
    coords: torch.Tensor,
    offsets: torch.Tensor,
    info: torch.Tensor,
    geometry: Geometry,
    out_stride: tuple[int, int, int],
    live: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output coordinates (N*K, 4), slots (N*K, K)) of a transposed conv whose outputs never meet.

    ``geometry`` is ``(t, m, p)`` flattened (9 ints).  With ``live`` (int32
    ``(1,)`` on the device) the rows made from padding input rows are padding.
    """
    k = int(offsets.shape[0])
    total = int(coords.shape[0]) * k
    device = coords.device
    out = torch.empty(total, 4, dtype=torch.int32, device=device)
    slots = torch.empty(total, k, dtype=torch.int32, device=device)
    if total:
        kp = next_pow2(k)
        block = max(16, _block() // kp)
        _direct_kernel[(cdiv(total, block),)](
            coords, offsets, out, slots, info, info if live is None else live, total, k,
            *geometry, *out_stride, K=k, KP=kp, LIVE=live is not None, BLOCK=block,
        )  # fmt: skip
    return out, slots


@triton.jit
def _pairs_kernel(
    slots_ptr,  # (M, K) int32
    pos_ptr,  # (K * M,) inclusive running count of present pairs, tap-major
    pin_ptr,  # (M * K,) int32 result: input rows, tap by tap
    pout_ptr,  # (M * K,) int32 result: output rows, tap by tap
    m_rows,
    K: tl.constexpr,
    BLOCK: tl.constexpr,
):
    k = tl.program_id(1).to(tl.int64)  # K * M may pass int32
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = o < m_rows
    src = tl.load(slots_ptr + o * K + k, mask=live, other=-1)
    at = tl.load(pos_ptr + k * m_rows + o, mask=live, other=1).to(tl.int64) - 1
    hit = live & (src >= 0)
    tl.store(pin_ptr + at, src, mask=hit)
    tl.store(pout_ptr + at, o.to(tl.int32), mask=hit)


def launch_pairs(slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input rows, output rows, tap starts) of the present pairs, compacted tap by tap.

    A running count over the tap-major presence flags places every pair (its
    value at each tap's last row starts the next tap); one launch writes both
    row lists.
    """
    m, k = (int(v) for v in slots.shape)
    device = slots.device
    pin = torch.empty(m * k, dtype=torch.int32, device=device)
    pout = torch.empty(m * k, dtype=torch.int32, device=device)
    starts = torch.zeros(k + 1, dtype=torch.int64, device=device)
    if m == 0 or k == 0:
        return pin, pout, starts
    wide = m * k >= 2**31 - 1
    # Presence flags written tap-major by the comparison itself (one launch, no transposed copy).
    present = torch.empty(k, m, dtype=torch.bool, device=device)
    torch.ge(slots.t(), 0, out=present)
    pos = torch.cumsum(present.view(-1), 0, dtype=torch.int64 if wide else torch.int32)
    starts[1:] = pos.view(k, m)[:, -1]
    block = _block()
    _pairs_kernel[(cdiv(m, block), k)](slots, pos, pin, pout, m, K=k, BLOCK=block)
    return pin, pout, starts
