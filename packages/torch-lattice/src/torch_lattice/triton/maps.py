"""Kernel maps of the CUDA path, built on the device as slot tables.

A :class:`SlotMap` holds ``slots[o, k]``: the input row that feeds output row
o through tap k, or -1.  Every relation of the contract (centred, indexed,
submanifold, transposed, generative, and their target forms) has at most one
input per (output, tap) and one output per (input, tap), so this table is the
whole map, and its transpose (:meth:`SlotMap.transposed`) is the map of the
input gradient (one scatter launch).

Lookups go through a hash table of each searched support's physical rows
(built once per support in two launches) and one Triton launch that resolves
every (output row, tap) query.  A support that a conv generates comes from
one candidates launch, a sort, a marking launch, a cumulative sum and one
emitting launch that writes its rows (in sorted (batch, x, y, z) order, as
the reference path emits them) and its slot table; the output size, the
int32 range flag and the packing's overflow flag are read back together,
the layer's only host synchronisation (:mod:`.map_kernels`).  A map whose
output support is known (submanifold, targets, stride-1 ``conv3d``) reads
nothing back.

A *padded* support (``Support.active`` set: a captured forward's, see
:mod:`.capture`) reads nothing back at all: a support it generates is sized to
its candidates (an upper bound on its rows), its row count stays on the device
as its own ``active``, and the range and overflow flags are checked after the
forward (:func:`deferred_checks`).  Every launch skips the padding, so the
real rows, their order and their maps are those of the unpadded support.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from lattice_contract.dialect import (
    INT32_MAX,
    INT32_MIN,
    Int32CoordinateError,
    centred_tap_offsets,
    kernel_volume,
    subm_offsets,
    tap_offsets,
    transposed_stride,
)

from torch_lattice.coords import Packing
from torch_lattice.sparse import Support
from torch_lattice.triton.map_kernels import (
    first_bad,
    launch_candidates,
    launch_direct,
    launch_emit,
    launch_insert,
    launch_mark,
    launch_pairs,
    launch_probe,
    launch_transpose,
    new_info,
)

__all__ = ["RowBounds", "SlotMap", "build", "deferred_checks", "row_bounds"]

Triple = tuple[int, int, int]
_TAG = "triton"

SORT_MIN_MACS = 1 << 34
"""Dense multiply-adds (output rows x taps x C_in x C_out) of a conv from which its
reused map is sorted by tap pattern (:meth:`SlotMap.sorted_tiles`).

A third of 2^34 multiply-adds is about 0.1 ms of f16 tensor-core work at the
rate these kernels reach on an H100, the order of the sort's cost: below it a
network is bound by the host's launches (a 100k-voxel MinkUNet's forward, maps
built, issues work for longer than the GPU runs it), so the sort only adds host
time.  In the benchmark's MinkUNet at 100k voxels only the decoder's two 3x3x3
convs on the finest rows (128 -> 96 and 96 -> 96 channels) reach it.
"""

SORT_MIN_MACS_PADDED = 1 << 33
""":data:`SORT_MIN_MACS` for a padded map (a captured call's), counted on its bound rows.

A captured call spends no host time, so the sort costs only its GPU time: a
device radix sort of the map's rows and one tile-listing launch, tens of
microseconds at 100k rows (an estimate, not timed apart).  Sorted tiles save
about a third of each use's tap work, and the maps worth it are used twice
(the conv and its input gradient): at the rate these kernels reach on an
H100 (about 95 TFLOP/s on a 128-channel subm layer) 2^33 half multiply-adds
take about 0.18 ms.  An f32 map sorts from an eighth of it
(:meth:`SlotMap.sorted_tiles`); in the benchmark's MinkUNet at 100k voxels
that is every 3x3x3 map of an f32 step.  The rows counted are the bound's,
which overstates the coarse levels of a capture without ``headroom``.
"""


@dataclass(frozen=True)
class SlotMap:
    """``slots`` (num_out, K) int32: input row per (output row, tap), -1 where none.

    ``live`` is the output support's ``active`` (None unless padded): output
    rows at and past it are padding, whose slots are all -1 and which the
    conv kernel does not compute (it writes them as zeros), sorted or not.
    """

    slots: torch.Tensor
    num_in: int
    live: torch.Tensor | None = None
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_out(self) -> int:
        """Number of output rows."""
        return int(self.slots.shape[0])

    @property
    def volume(self) -> int:
        """Number of taps."""
        return int(self.slots.shape[1])

    def sorted_tiles(self, more_uses: bool, macs: int, f32: bool = False) -> bool:
        """Whether this use of the map runs on tiles sorted by tap pattern (sorting once).

        Sorted tiles skip the taps none of their rows has (a 3x3x3 map's tiles
        then hold 18-19 of the 27 taps), which saves about a third of a conv's
        tap work on every use; the sort costs a device radix sort, about 0.2 ms
        of host time and a few tens of microseconds of GPU time, once.  It pays
        back only for a map used again (a second conv on it, or the backward
        pass: ``more_uses``) by a conv of at least :data:`SORT_MIN_MACS`
        multiply-adds (``macs``, counted densely); a map already sorted is
        always used sorted.  A fresh scan per frame in inference therefore
        runs its maps as they are, except under the network's heavy layers.
        A padded map (a captured call's) pays no host time for its sort and
        sorts from :data:`SORT_MIN_MACS_PADDED`; padding rows have no taps, so
        they sort into tiles that do no work.  Both thresholds are for half
        products: ``f32`` products on the CUDA cores cost about eight times as
        much GPU time each, so f32 maps sort from an eighth of them (an f32
        training step is bound by the GPU, not by the host).
        """
        seen = bool(self.cache.get("used"))
        self.cache["used"] = True
        if "order" in self.cache:
            return True
        least = SORT_MIN_MACS if self.live is None else SORT_MIN_MACS_PADDED
        return (more_uses or seen) and macs >= (least >> 3 if f32 else least)

    def order(self) -> torch.Tensor:
        """Output rows sorted by their set of present taps (int64 permutation), cached.

        Rows with the same taps land in the same tiles, so the conv kernel
        skips a tap for a whole tile whenever none of its rows has it (the
        reordering TorchSparse++ and spconv's implicit GEMM use).  The sort is
        stable, so rows keep their spatial order inside a pattern.
        """
        found = self.cache.get("order")
        if found is None and self.cache.get("mirror") and "pattern" not in self.cache:
            # A mirrored adjoint's rows are the forward's, its tap masks theirs reversed
            # bit for bit: rows grouped by one are grouped by the other, so no sort.
            twin = self.transposed()
            if "pattern" in twin.cache:
                found = twin.order()
                self.cache["order"] = found
        if found is None:
            pattern = self.cache.get("pattern")  # written by the lookup launch
            if pattern is None:
                k = min(self.volume, 62)
                device = self.slots.device
                weights = torch.ones(k, dtype=torch.int64, device=device) << torch.arange(
                    k, device=device
                )
                pattern = ((self.slots[:, :k] >= 0).to(torch.int64) * weights).sum(1)
            found = torch.sort(pattern, stable=True).indices  # int64: the kernels read either
            self.cache["order"] = found
        result: torch.Tensor = found
        return result

    def transposed(self, live: torch.Tensor | None = None) -> SlotMap:
        """The adjoint map: per (input row, tap) the output row it feeds, cached both ways.

        A submanifold map with odd kernels is its own adjoint with the taps
        reversed (offset -d of tap K-1-k undoes offset d of tap k): one flip.
        Otherwise one launch scatters the table and writes the adjoint's
        present-tap masks (what its :meth:`order` sorts), after one fill.
        ``live`` is the input support's ``active`` where it is padded (the
        adjoint's output rows are the input's rows).
        """
        found = self.cache.get("transposed")
        if isinstance(found, weakref.ref):  # the twin points back weakly: no cycle
            found = found()
        if found is None and self.cache.get("mirror"):
            found = SlotMap(self.slots.flip(1).contiguous(), self.num_out, self.live)
            found.cache["mirror"] = True
            found.cache["transposed"] = weakref.ref(self)
            self.cache["transposed"] = found
        if found is None:
            table, pattern = launch_transpose(self.slots, self.num_in)
            found = _slot_map(table, self.num_out, pattern, live)
            found.cache["transposed"] = weakref.ref(self)
            self.cache["transposed"] = found
        result: SlotMap = found
        return result

    def pairs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input rows, output rows, tap starts): the pairs compacted tap by tap, cached.

        Pair ``starts[k]:starts[k+1]`` belong to tap k (int64 starts on the
        device, so nothing is read back), in ascending output row; the weight
        gradient walks them.  Three device operations (:func:`launch_pairs`).
        """
        found = self.cache.get("pairs")
        if found is None:
            found = launch_pairs(self.slots)
            self.cache["pairs"] = found
        result: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = found
        return result


# --------------------------------------------------------------------------- device helpers


_CONSTANTS: dict[tuple[Any, ...], torch.Tensor] = {}


def _const(values: Sequence[Any], device: torch.device) -> torch.Tensor:
    """A small int64 tensor of geometry constants on the device, made once per value.

    Each ``torch.tensor(..., device=cuda)`` is a host-to-device copy; a layer
    needs a handful, so they are kept (a few hundred bytes per geometry).
    """
    key = (tuple(tuple(v) if isinstance(v, Sequence) else v for v in values), str(device))
    found = _CONSTANTS.get(key)
    if found is None:
        found = torch.tensor(list(values), dtype=torch.int64, device=device)
        _CONSTANTS[key] = found
    return found


def _coords(support: Support) -> torch.Tensor:
    return support.coords if support.coords.is_contiguous() else support.coords.contiguous()


def _hash_table(support: Support) -> torch.Tensor:
    """The support's hash table (two launches, no host read), cached on it."""
    found = support.maps.get((_TAG, "hash"))
    if isinstance(found, torch.Tensor):
        return found
    table = launch_insert(_coords(support), support.active)
    support.maps[(_TAG, "hash")] = table
    return table


def _device_box(support: Support) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-column minimum and maximum of the physical rows, on the device, cached on it.

    A padded support's padding takes the value of its first row, so it moves
    neither bound (without rows the box is unused: no candidate reads it).
    """
    found = support.maps.get((_TAG, "box"))
    if isinstance(found, tuple):
        return found
    coords = _coords(support)
    if support.active is not None:
        rows = torch.arange(support.num_rows, device=coords.device, dtype=torch.int32)
        coords = torch.where((rows < support.active)[:, None], coords, coords[:1])
    lo, hi = torch.aminmax(coords, dim=0)
    support.maps[(_TAG, "box")] = (lo, hi)
    return lo, hi


def _probe(
    out: Support, source: Support, terms: Sequence[Triple], mul: Triple, div: Triple
) -> SlotMap:
    """Slot map ``c = (o * mul + terms[k]) / div`` (exact), every lookup in one launch."""
    table = _hash_table(source)
    t = _const(terms, out.coords.device).reshape(-1, 3)
    slots, pattern = launch_probe(
        _coords(out), out.stride, t, _coords(source), source.stride, table, mul, div, out.active
    )
    return _slot_map(slots, source.num_rows, pattern, out.active)


@dataclass(frozen=True)
class _Relation:
    """Candidates ``o = floor((c * mul + add + offsets[j]) / div)`` per input row c and j.

    ``step`` is the indexed relation ``o = (c * mul + add - k * dilation) /
    div`` (exact divisions only), whose offsets are ``-k * dilation``: its
    candidates are only the taps that can divide exactly (on each axis, one
    tap in every ``period``, found per residue of ``c * mul + add``), e.g. 8
    per row instead of 27 for k3s2, so the sort sees a third as many keys.
    ``disjoint`` keeps remainders below ``kernel`` and takes the tap from them
    (downsampling whose windows do not overlap); otherwise candidate j is tap j.
    """

    offsets: tuple[Triple, ...]
    mul: Triple
    add: Triple
    div: Triple
    kernel: Triple = (1, 1, 1)
    dilation: Triple = (1, 1, 1)
    step: bool = False
    disjoint: bool = False

    @property
    def period(self) -> Triple:
        """Per axis, the tap distance between exact divisions (``div / gcd(dilation, div)``)."""
        return tuple(  # type: ignore[return-value]
            self.div[a] // math.gcd(self.dilation[a], self.div[a]) for a in range(3)
        )

    @property
    def reps(self) -> Triple:
        """Per axis, the most taps one residue can have (``ceil(kernel / period)``)."""
        return tuple(-(-self.kernel[a] // self.period[a]) for a in range(3))  # type: ignore[return-value]

    @property
    def candidates(self) -> int:
        """Candidates per input row."""
        if self.step:
            q = self.reps
            return q[0] * q[1] * q[2]
        return len(self.offsets)

    def table(self) -> list[int]:
        """What the kernels read per candidate: the offsets, or with ``step`` per axis and
        residue r of ``c * mul + add`` the smallest tap k with ``k * dilation = r (mod div)``
        (the kernel size where none)."""
        if not self.step:
            return [v for o in self.offsets for v in o]
        out: list[int] = []
        for a in range(3):
            for r in range(self.div[a]):
                taps = [
                    k
                    for k in range(self.period[a])
                    if (k * self.dilation[a] - r) % self.div[a] == 0
                ]
                out.append(taps[0] if taps and taps[0] < self.kernel[a] else self.kernel[a])
        return out

    def offset(self, c: Triple, j: int) -> Triple | None:
        """Host mirror of candidate j's offset for logical input c (None: no candidate)."""
        if not self.step:
            return self.offsets[j]
        q, first, base = self.reps, self.table(), (0, self.div[0], self.div[0] + self.div[1])
        index = (j // (q[1] * q[2]), j // q[2] % q[1], j % q[2])
        off = []
        for a in range(3):
            k = first[base[a] + (c[a] * self.mul[a] + self.add[a]) % self.div[a]]
            k += index[a] * self.period[a]
            if k >= self.kernel[a]:
                return None
            off.append(-k * self.dilation[a])
        return (off[0], off[1], off[2])

    def geometry(self, stride: Triple) -> tuple[int, ...]:
        return (
            *stride, *self.mul, *self.add, *self.div, *self.kernel, *self.dilation,
            *self.period, *self.reps,
        )  # fmt: skip

    def span(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        lo = tuple(min(o[a] for o in self.offsets) for a in range(3))
        hi = tuple(max(o[a] for o in self.offsets) for a in range(3))
        return lo, hi


def _generate(
    support: Support, rel: _Relation, out_stride: Triple, volume: int | None
) -> tuple[Support, SlotMap | None]:
    """The sorted distinct candidates as a support, and with ``volume`` their slot map.

    Launches: candidates, sort, mark, cumulative sum, fill, emit (which for
    disjoint windows also writes the adjoint map); one host read (the output
    size with the range and overflow flags).  Like the
    reference path it refuses outputs whose bounding box exceeds 2^62 cells.
    A padded input makes a padded output with one row per candidate and no
    read (:func:`deferred_checks`).
    """
    n = support.num_rows
    device = support.coords.device
    g = rel.candidates
    if n == 0:
        empty = Support(torch.empty(0, 4, dtype=torch.int32, device=device), out_stride)
        if support.active is not None:
            empty.active = torch.zeros(1, dtype=torch.int32, device=device)
        if volume is None:
            return empty, None
        no_slots = torch.empty(0, volume, dtype=torch.int32, device=device)
        return empty, SlotMap(no_slots, 0, empty.active)
    if n * g >= 2**31 - 1:
        raise ValueError(
            f"a conv layer with {n} rows and {g} candidates per row exceeds the Triton map "
            "builder's 2^31 candidates; split the batch"
        )
    coords = _coords(support)
    lo, hi = _device_box(support)
    info = new_info(device)
    table = _const(rel.table(), device)
    geometry = rel.geometry(support.stride)
    keys = launch_candidates(
        coords, table, g, lo, hi, info, geometry, out_stride, rel.span(), rel.step, rel.disjoint,
        support.active,
    )  # fmt: skip
    sorted_keys, perm = torch.sort(keys)
    first = launch_mark(sorted_keys, info)
    rank = torch.cumsum(first, 0, dtype=torch.int32)
    active = None
    if support.active is None:
        count, bad, overflow, worst = info.tolist()  # the layer's one host read
        _check_info(bad, overflow, worst, support, rel, out_stride)
    else:  # as many rows as candidates (or a bound), the count on the device, flags later
        count, active = n * g, info[:1]
        plan = _ROW_BOUNDS.get()
        if plan is not None:
            count = plan.take(count, info)
        _check_later(info, support, rel, out_stride)
    out = torch.empty(count, 4, dtype=torch.int32, device=device)
    slots = None
    if volume is not None:
        slots = torch.full((count, volume), -1, dtype=torch.int32, device=device)
    pattern, back = launch_emit(
        coords, table, g, sorted_keys, perm, first, rank, out, slots, geometry, out_stride,
        rel.step, rel.disjoint,
    )  # fmt: skip
    made = Support(out, out_stride, active)
    if slots is None:
        return made, None
    smap = _slot_map(slots, n, pattern, active)
    if back is not None:  # disjoint windows: the emit launch wrote the adjoint too
        twin = _slot_map(back[0], count, back[1], support.active)
        twin.cache["transposed"] = weakref.ref(smap)
        smap.cache["transposed"] = twin
    return made, smap


def _slot_map(
    slots: torch.Tensor, num_in: int, pattern: torch.Tensor | None, live: torch.Tensor | None
) -> SlotMap:
    """A slot map with the present-tap masks its launch wrote (for :meth:`SlotMap.order`)."""
    smap = SlotMap(slots, num_in, live)
    if pattern is not None:
        smap.cache["pattern"] = pattern
    return smap


# --------------------------------------------------------------------------- row bounds


@dataclass
class RowBounds:
    """Row bounds of the supports a padded forward generates, in the order it makes them.

    A padded support that a strided layer generates has as many rows as
    candidates unless bounded: the input's bound at every level of a U-Net,
    which is what a captured call's memory then holds.  Measured on an
    example (``sizes`` None: every generated support keeps its candidates
    and its real count is recorded), the bounds are applied to later calls:
    the i-th generated support gets at most ``sizes[i]`` rows.  ``counts``
    holds each one's real row count on the device, which the call reads with
    its other flags: a count past its bound (``exceeded``) means the call's
    results are not to be used.
    """

    sizes: list[int] | None = None
    counts: list[torch.Tensor] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)

    def take(self, candidates: int, info: torch.Tensor) -> int:
        """The rows of the next generated support (``info``: its device info vector)."""
        self.counts.append(info[:1])
        i = len(self.bounds)
        bound = candidates
        if self.sizes is not None and i < len(self.sizes):
            bound = min(candidates, self.sizes[i])
        self.bounds.append(bound)
        return bound

    def exceeded(self, counts: Sequence[int]) -> int | None:
        """The first generated support whose real count (read back) passed its bound, or None."""
        for i, (count, bound) in enumerate(zip(counts, self.bounds, strict=True)):
            if count > bound:
                return i
        return None


_ROW_BOUNDS: ContextVar[RowBounds | None] = ContextVar("lattice_row_bounds", default=None)


@contextmanager
def row_bounds(sizes: list[int] | None) -> Iterator[RowBounds]:
    """Bound (``sizes``) or measure (None) the supports generated inside; yields the plan."""
    plan = RowBounds(sizes)
    token = _ROW_BOUNDS.set(plan)
    try:
        yield plan
    finally:
        _ROW_BOUNDS.reset(token)


# --------------------------------------------------------------------------- deferred checks

_Check = tuple[torch.Tensor, Support, "_Relation", Triple]
_DEFERRED: ContextVar[list[_Check] | None] = ContextVar("lattice_deferred_checks", default=None)


@contextmanager
def deferred_checks() -> Iterator[list[_Check]]:
    """Collect, instead of reading, the flags of the padded supports generated inside.

    A captured forward cannot read the device mid-graph: each generated
    support's info vector (its count, int32 range flag and packing overflow
    flag) is appended here, and :func:`raise_flagged` checks them all after
    the forward, from one read.  Outside this context a padded support's flags
    are read at once.
    """
    found: list[_Check] = []
    token = _DEFERRED.set(found)
    try:
        yield found
    finally:
        _DEFERRED.reset(token)


def _check_later(info: torch.Tensor, support: Support, rel: _Relation, out_stride: Triple) -> None:
    pending = _DEFERRED.get()
    if pending is None:
        _, bad, overflow, worst = info.tolist()
        _check_info(bad, overflow, worst, support, rel, out_stride)
    else:
        pending.append((info, support, rel, out_stride))


def raise_flagged(checks: Sequence[_Check], values: Sequence[int]) -> None:
    """Raise the first flagged layer's error: ``values`` holds each check's info, read once.

    The input rows named in the error are the padded support's own, which are
    the unpadded ones (padding only follows them).
    """
    for i, (_, support, rel, out_stride) in enumerate(checks):
        _, bad, overflow, worst = values[4 * i : 4 * i + 4]
        _check_info(bad, overflow, worst, support, rel, out_stride)


def _check_info(
    bad: int, overflow: int, worst: int, support: Support, rel: _Relation, out_stride: Triple
) -> None:
    """Raise the int32 range error or the wide-box refusal that the info flags report."""
    if bad:
        _raise_out_of_range(support, rel, out_stride, first_bad(worst))
    if overflow:
        _refuse_wide(support, rel, out_stride)


def _raise_out_of_range(support: Support, rel: _Relation, out_stride: Triple, e: int) -> None:
    """The int32 error for candidate ``e`` (the first one out of range), computed exactly."""
    n, j = divmod(e, rel.candidates)
    row = tuple(int(v) for v in support.coords[n].tolist())
    c = (row[1] // support.stride[0], row[2] // support.stride[1], row[3] // support.stride[2])
    off = rel.offset(c, j)
    assert off is not None, "the device flagged a candidate that does not exist"
    for a in range(3):
        value = ((c[a] * rel.mul[a] + rel.add[a] + off[a]) // rel.div[a]) * out_stride[a]
        if not INT32_MIN <= value <= INT32_MAX:
            raise Int32CoordinateError("", a + 1, value, n, row)
    raise AssertionError("the device flagged a candidate that is in range")  # pragma: no cover


def _refuse_wide(support: Support, rel: _Relation, out_stride: Triple) -> None:
    """Raise the reference path's error for an output box beyond 2^62 cells (no int64 key)."""
    lo, hi = (t.tolist() for t in _device_box(support))  # the box of the real rows
    f, g = rel.span()
    olo, ohi = [lo[0]], [hi[0]]
    for a in range(3):
        olo.append((lo[a + 1] // support.stride[a] * rel.mul[a] + rel.add[a] + f[a]) // rel.div[a])
        ohi.append((hi[a + 1] // support.stride[a] * rel.mul[a] + rel.add[a] + g[a]) // rel.div[a])
    Packing.covering(olo, ohi, margin=0)  # raises, naming the extents and the fix
    raise AssertionError("the device flagged a box that packs")  # pragma: no cover


def _times(a: Triple, b: Triple) -> Triple:
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2])


def build(
    kind: str,
    support: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    target: Support | None = None,
) -> tuple[Support, SlotMap]:
    """Output support and slot map of one conv geometry, cached on the input support.

    ``kind`` is ``"subm"``, ``"centred"`` (conv3d / pool3d), ``"indexed"``
    (full_conv3d / full_pool3d) or ``"transpose"`` (conv_transpose3d and the
    generative form, p = 0 and d = 1); with ``target`` the output is the
    target's rows.
    """
    ref = None if target is None else weakref.ref(target)
    key = (_TAG, kind, kernel, stride, padding, dilation, ref)
    found = support.maps.get(key)
    if isinstance(found, _Adjoint):  # registered by the forward conv; transposed on first use
        found = found.forward.transposed(None if target is None else target.active)
        support.maps[key] = found
    if target is not None and isinstance(found, SlotMap):
        return target, found
    if isinstance(found, tuple):
        return found
    result = _build(kind, support, kernel, stride, padding, dilation, target)
    # A target's map is cached without the target itself: the cache holds it by a weak
    # reference only, so supports never keep each other alive.
    support.maps[key] = result[1] if target is not None else result
    return result


def _build(
    kind: str,
    support: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    target: Support | None,
) -> tuple[Support, SlotMap]:
    volume = kernel_volume(kernel)
    ones: Triple = (1, 1, 1)
    zero: Triple = (0, 0, 0)
    neg_p: Triple = (-padding[0], -padding[1], -padding[2])
    if kind == "subm":
        smap = _probe(support, support, subm_offsets(kernel, dilation), ones, ones)
        if all(k % 2 for k in kernel):  # symmetric taps: the adjoint is the table mirrored
            smap.cache["mirror"] = True
        return support, smap
    if kind in ("centred", "indexed"):
        offsets = (
            centred_tap_offsets(kernel, dilation)
            if kind == "centred"
            else tap_offsets(kernel, dilation)
        )
        terms = [(o[0] - padding[0], o[1] - padding[1], o[2] - padding[2]) for o in offsets]
        out_stride = _times(support.stride, stride)
        even_or_one = all(kernel[a] % 2 == 0 or kernel[a] == 1 for a in range(3))
        windows_apart = dilation == ones and all(kernel[a] <= stride[a] for a in range(3))
        if target is not None:
            out = target
        elif kind == "centred" and stride == ones:
            out = support
        elif windows_apart and (
            kind == "indexed" or (padding == zero and even_or_one and kernel == stride)
        ):
            # Windows that do not overlap (k2s2): input c feeds only tap (c + p) mod s of
            # output floor((c + p) / s), one candidate per row (centred and indexed agree
            # for even kernels without padding).  The centred support is every floor(c / s),
            # so there the windows must also tile (K = s): with K < s a coarse row can
            # have no input in its window and still be a row.
            rel = _Relation(((0, 0, 0),), ones, padding, stride, kernel, disjoint=True)
            out, made = _generate(support, rel, out_stride, volume)
            assert made is not None
            _register_back(out, support, kernel, stride, padding, dilation, made)
            return out, made
        elif kind == "centred":
            coarsen = _Relation(((0, 0, 0),), ones, zero, stride)
            out, _ = _generate(support, coarsen, out_stride, None)
        else:
            # Indexed: every o = (c + p - k*d) / s (exact) of an active c; the candidates
            # are exactly the pairs, so they give the map directly (no lookup).
            neg = tuple((-o[0], -o[1], -o[2]) for o in offsets)
            rel = _Relation(neg, ones, padding, stride, kernel, dilation, step=stride != ones)
            out, made = _generate(support, rel, out_stride, volume)
            assert made is not None
            _register_back(out, support, kernel, stride, padding, dilation, made)
            return out, made
        smap = _probe(out, support, terms, stride, ones)
        if (
            target is None
            and kind == "centred"
            and stride != ones
            and offsets == tap_offsets(kernel, dilation)
        ):
            _register_back(out, support, kernel, stride, padding, dilation, smap)
        return out, smap
    if kind == "transpose":
        t_stride: Triple = transposed_stride(support.stride, stride, "a transposed conv")
        offsets = tap_offsets(kernel, dilation)
        if target is not None:
            # Input c = (o + p - k*d) / s, exact.
            terms = [(padding[0] - o[0], padding[1] - o[1], padding[2] - o[2]) for o in offsets]
            return target, _probe(target, support, terms, ones, stride)
        if all((kernel[a] - 1) * dilation[a] < stride[a] for a in range(3)):
            # No two candidates meet: output row c*K + k is fed by input c through tap k only.
            return _direct(support, offsets, stride, neg_p, t_stride)
        rel = _Relation(tuple(offsets), stride, neg_p, ones)
        out, made = _generate(support, rel, t_stride, volume)
        assert made is not None
        return out, made
    raise ValueError(f"unknown conv kind {kind!r}")


def _direct(
    support: Support, offsets: Sequence[Triple], stride: Triple, add: Triple, out_stride: Triple
) -> tuple[Support, SlotMap]:
    """Transposed conv whose outputs never meet: rows in (input, tap) order, one launch.

    The int32 range flag is the one host read (none for a padded support,
    whose first ``active * K`` rows are real).
    """
    device = support.coords.device
    info = new_info(device)
    off = _const(offsets, device).reshape(-1, 3)
    geometry = (*support.stride, *stride, *add)
    out, slots = launch_direct(_coords(support), off, info, geometry, out_stride, support.active)
    rel = _Relation(tuple(offsets), stride, add, (1, 1, 1))
    active = None
    if support.active is not None:
        active = support.active * len(offsets)
        _check_later(info, support, rel, out_stride)
    elif support.num_rows and int(info[1]):
        _raise_out_of_range(support, rel, out_stride, first_bad(int(info[3])))
    return Support(out, out_stride, active), SlotMap(slots, support.num_rows, active)


def _register_back(
    out: Support,
    support: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    smap: SlotMap,
) -> None:
    """Register on ``out`` the map of the transposed conv back onto ``support`` (a U-Net decoder).

    ``target_conv_transpose3d`` reads ``c = (o + p - k*d) / s``: the same pairs
    as the indexed forward relation, so its map is this one transposed.
    """
    key = (_TAG, "transpose", kernel, stride, padding, dilation, weakref.ref(support))
    out.maps[key] = _Adjoint(smap)


@dataclass(frozen=True)
class _Adjoint:
    """A transposed conv's map still to be derived from its forward conv's (see :func:`build`)."""

    forward: SlotMap
