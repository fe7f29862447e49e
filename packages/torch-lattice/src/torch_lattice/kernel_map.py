"""Kernel maps: which (input row, output row) pairs each kernel tap connects.

A :class:`KernelMap` is the rulebook of one convolution or pooling geometry:
per tap (in ``lattice_contract.dialect.kernel`` row order) two int64 index vectors of
equal length, stored back to back, so it holds O(pairs) integers and nothing
else.  Maps are built vectorised on the tensor's device and cached on the
input support under ``(kind, kernel, stride, dilation, padding, target)``.
On the CPU, where the rows' bounding box is small enough (surface data: tens
of cells a row), coordinate lookups and key deduplication go through a dense
index of the box instead of sorts and binary searches
(:mod:`torch_lattice._cpu_lookup`); the pairs and their order are the same.

Relations (per axis, logical units; docs/semantics.md), with the two offset
rules of :mod:`lattice_contract.dialect.kernel` (centred ``off_c(k)``: ``(k - K//2)*d``
for odd K, ``k*d`` for even K; indexed: ``k*d``):

- ``conv``      (``conv3d``/``pool3d``) ``c = o*s + off_c(k) - p``; the output
  support is the coarsened input support, every distinct ``floor(c/s)``
  (for s = 1 the input support itself, same rows, same order)
- ``full``      (``full_conv3d``/``full_pool3d``) ``c = o*s - p + k*d``; the
  output support is every o some active input reaches
- ``subm``      ``c = o + (k - floor((K-1)/2)) * d``, output rows = input rows
- ``transpose`` ``o = c*s - p + k*d``

The ``target`` variants evaluate the same relations at a given support.  Cache
keys name a target support by a weak reference: a cached map never keeps
another support alive, so input and output supports form no reference cycle
and are freed as soon as the values using them are (a dead reference never
equals a new support's, so a recycled address cannot hit a stale map).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from lattice_contract.dialect import Window, geometry, kernel_volume, subm_offsets
from lattice_contract.frontend import TapPairs, cached_relation, target_key

from torch_lattice import _cpu_lookup
from torch_lattice.coord_range import check_emitted
from torch_lattice.coords import Packing, bounds
from torch_lattice.sparse import Support

__all__ = [
    "KernelMap",
    "coarsened_support",
    "conv_map",
    "full_conv_map",
    "generative_transpose_map",
    "subm_map",
    "target_conv_map",
    "target_transpose_map",
    "transpose_map",
]

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class KernelMap(TapPairs[torch.Tensor]):
    """Pairs per tap: ``in_idx[starts[k]:starts[k+1]]`` feed ``out_idx[...]`` through tap k.

    The table's form and its accessors are the contract's
    (:class:`~lattice_contract.frontend.kernel_map.TapPairs`); ``identity_tap``
    names a tap whose pairs are exactly (i, i) for every row (the centre of an
    odd submanifold kernel); its pairs are not stored and the executor applies
    it as one dense matmul.

    ``outputs_sorted`` (``inputs_sorted``) promises that within every tap the
    output (input) rows strictly increase.  A map with sorted outputs can be
    executed without a scatter: the executor cuts the outputs into ranges,
    each tap's pairs for a range are one contiguous slice, and a segmented sum
    replaces ``index_add_`` (see ``ops.conv``).
    """

    outputs_sorted: bool = False
    inputs_sorted: bool = False
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fill(self) -> float:
        """Fraction of (output row, tap) slots that hold a pair."""
        slots = self.num_out * self.volume
        return self.num_pairs / slots if slots else 0.0

    def transposed(self) -> KernelMap:
        """The same pairs with inputs and outputs swapped (the adjoint's map), cached.

        The twin points back weakly: the pair forms no reference cycle, so a map
        is freed with the support that caches it, without the cyclic collector.
        """
        found = self.cache.get("transposed")
        if isinstance(found, weakref.ref):
            found = found()
        if found is None:
            found = KernelMap(
                self.out_idx,
                self.in_idx,
                self.starts,
                self.num_out,
                self.num_in,
                self.identity_tap,
                outputs_sorted=self.inputs_sorted,
                inputs_sorted=self.outputs_sorted,
            )
            found.cache["transposed"] = weakref.ref(self)
            self.cache["transposed"] = found
        result: KernelMap = found
        return result

    def slots(self) -> torch.Tensor:
        """(num_out, K) int32 table: the input row feeding each output through each tap.

        Absent pairs hold ``num_in`` (a zero row appended by the executor).
        Every relation here has at most one input per (output, tap), which is
        what makes this output-major view exact.  Built on first use, cached.
        """
        found = self.cache.get("slots")
        if found is None:
            device = self.in_idx.device
            k = self.volume
            table = torch.full((self.num_out * k,), self.num_in, dtype=torch.int32, device=device)
            counts = torch.tensor(
                [self.starts[i + 1] - self.starts[i] for i in range(k)], device=device
            )
            taps = torch.repeat_interleave(torch.arange(k, device=device), counts)
            table[self.out_idx.to(torch.int64) * k + taps] = self.in_idx.to(torch.int32)
            if self.identity_tap is not None:
                rows = torch.arange(self.num_out, device=device)
                table[rows * k + self.identity_tap] = rows.to(torch.int32)
            found = table.view(self.num_out, k)
            self.cache["slots"] = found
        result: torch.Tensor = found
        return result

    def pair_counts(self) -> torch.Tensor:
        """Number of contributing (input, tap) pairs per output row."""
        counts = torch.bincount(self.out_idx, minlength=self.num_out)
        if self.identity_tap is not None:
            counts = counts + 1
        return counts


def _assemble(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor]],
    num_in: int,
    num_out: int,
    device: torch.device,
    identity_tap: int | None = None,
    *,
    sorted_rows: bool = False,
) -> KernelMap:
    starts = [0]
    for a, _ in pairs:
        starts.append(starts[-1] + int(a.numel()))
    # int32 indices halve the map (the memory bar: O(pairs) int32); index_select and
    # index_add_ take them directly.  Beyond 2^31 rows int64 is kept.
    index_dtype = torch.int32 if max(num_in, num_out) < 2**31 - 1 else torch.int64
    if pairs:
        in_idx = torch.cat([a for a, _ in pairs]).to(index_dtype)
        out_idx = torch.cat([b for _, b in pairs]).to(index_dtype)
    else:
        in_idx = out_idx = torch.empty(0, dtype=index_dtype, device=device)
    return KernelMap(
        in_idx,
        out_idx,
        tuple(starts),
        num_in,
        num_out,
        identity_tap,
        outputs_sorted=sorted_rows,
        inputs_sorted=sorted_rows,
    )


# --------------------------------------------------------------------------- subm


def subm_map(support: Support, kernel: Triple, dilation: Triple) -> KernelMap:
    """Map of ``subm_conv3d``: output rows are the input rows, same order.

    For an odd kernel the offsets are symmetric: tap K-1-k reads offset -δ
    where tap k reads δ, so its pairs are tap k's pairs swapped; only the
    first half is looked up and the centre tap is the identity.
    """

    def build() -> KernelMap:
        n = support.num_rows
        offsets = subm_offsets(kernel, dilation)
        volume = len(offsets)
        logical = support.logical
        odd = all(k % 2 == 1 for k in kernel)
        centre = volume // 2 if odd else None
        # Queries run in sorted key order, so when the rows already are in key order
        # (conv outputs are; so are x-y-z sorted inputs) both sides of every tap
        # increase: each mirrored pair list is sorted too.
        if centre is not None:
            half, in_key_order = _self_lookup(support, offsets[:centre])
            # lookup gives (query row q, table row r) with r = q + offset: input r, output q.
            pairs = [(r, q) for q, r in half]
            pairs.append(_empty_pair(half[0][0] if half else logical))
            pairs.extend((q, r) for q, r in reversed(half))
            kmap = _assemble(
                pairs, n, n, logical.device, identity_tap=centre, sorted_rows=in_key_order
            )
        else:
            found_pairs, in_key_order = _self_lookup(support, offsets)
            kmap = _assemble(
                [(r, q) for q, r in found_pairs], n, n, logical.device, sorted_rows=in_key_order
            )
        return kmap

    key = ("subm", kernel, dilation)
    return cached_relation(support.maps, key, KernelMap, build)


def _self_lookup(
    support: Support, offsets: Sequence[Triple]
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], bool]:
    """The support's table looked up at its own rows plus each offset, and its key order.

    On the CPU a box small enough for a dense index answers without the
    table (:mod:`torch_lattice._cpu_lookup`), with the same pairs in the same order.
    """
    logical = support.logical
    dense = _cpu_lookup.lookup_offsets(logical, logical, offsets, base_is_table=True)
    if dense is not None:
        return dense
    table = support.table
    found = table.lookup_offsets(logical, offsets, base_is_table=True)
    return found, table.rows_in_key_order()


def _unique(keys: torch.Tensor, cells: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(keys, sorted=True, return_inverse=True)``, on the CPU without torch.unique.

    On the CPU ``torch.unique`` with an inverse costs about four times a
    (radix) sort of the same int64 keys; a stable sort, a first-occurrence
    mask and a cumulative sum give the same two arrays.  Keys known to lie in
    ``[0, cells)`` of a box small enough for a dense index skip the sort
    (:func:`torch_lattice._cpu_lookup.dense_unique`).
    """
    if keys.device.type != "cpu":
        uniq, inverse = torch.unique(keys, sorted=True, return_inverse=True)
        return uniq, inverse
    if keys.numel() == 0:
        return keys.clone(), torch.empty(0, dtype=torch.int64)
    if _cpu_lookup.dense_fits(cells, int(keys.numel()), _cpu_lookup.UNIQUE_CELLS_PER_KEY):
        return _cpu_lookup.dense_unique(keys, cells)
    ordered, perm = torch.sort(keys, stable=True)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    inverse = torch.empty_like(perm)
    inverse.index_copy_(0, perm, torch.cumsum(first, 0) - 1)
    return ordered[first], inverse


def _empty_pair(like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    e = torch.empty(0, dtype=like.dtype, device=like.device)
    return e, e


# --------------------------------------------------------------------------- conv


def full_conv_map(
    support: Support, kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> tuple[Support, KernelMap]:
    """Output support and map of ``full_conv3d`` / ``full_pool3d`` (indexed rule).

    Output rows are sorted by packed key (batch, x, y, z), which is
    deterministic.  The map back (the adjoint relation onto this input) is
    registered on the output support so that a ``target_conv_transpose3d``
    onto this input reuses it.
    """
    key = ("full", kernel, stride, padding, dilation)
    found = support.maps.get(key)
    if isinstance(found, tuple):
        return found
    out_stride = geometry.forward_stride(support.stride, stride)
    logical = support.logical
    device = logical.device
    n = support.num_rows
    volume = kernel_volume(kernel)
    if n == 0:
        out = Support.from_logical(torch.empty(0, 4, dtype=torch.int64, device=device), out_stride)
        kmap = _assemble([_empty_pair(logical)] * volume, 0, 0, device)
        support.maps[key] = (out, kmap)
        return out, kmap
    lo, hi = bounds(logical)
    packing = Packing.covering(
        *geometry.full_output_bounds(lo, hi, Window(kernel, stride, padding, dilation)), margin=0
    )
    s = torch.tensor(stride, dtype=torch.int64, device=device)
    cand_keys: list[torch.Tensor] = []
    cand_rows: list[torch.Tensor] = []
    spatial = logical[:, 1:]
    rows = torch.arange(n, device=device)
    identity_stride = stride == (1, 1, 1)
    if dilation == (1, 1, 1) and all(kernel[a] <= stride[a] for a in range(3)):
        # Downsampling windows do not overlap: input c feeds only tap (c + p) mod s,
        # at output floor((c + p) / s), so one pass replaces the loop over taps.
        shifted = spatial + torch.tensor(padding, dtype=torch.int64, device=device)
        tap3 = torch.remainder(shifted, s)
        o = torch.div(shifted, s, rounding_mode="floor")
        k = torch.tensor(kernel, dtype=torch.int64, device=device)
        valid = (tap3 < k).all(dim=1)
        check_emitted(o[valid], out_stride, rows[valid], support)
        tap = (tap3[:, 0] * kernel[1] + tap3[:, 1]) * kernel[2] + tap3[:, 2]
        tap = torch.where(valid, tap, torch.full_like(tap, kernel_volume(kernel)))
        order = torch.sort(tap, stable=True).indices
        counts = torch.bincount(tap, minlength=kernel_volume(kernel) + 1).tolist()
        keys = packing.pack(torch.cat([logical[:, :1], o], dim=1))[order]
        out_keys, inverse = _unique(keys[: n - counts[-1]], _cpu_lookup.cells(packing))
        out = Support.from_logical(packing.unpack(out_keys), out_stride)
        split = zip(
            torch.split(order[: n - counts[-1]], counts[:-1]),
            torch.split(inverse, counts[:-1]),
            strict=True,
        )
        kmap = _assemble(list(split), n, int(out_keys.numel()), device)
        support.maps[key] = (out, kmap)
        back = target_key("target_transpose", support, kernel, stride, padding, dilation)
        out.maps[back] = kmap.transposed()
        return out, kmap
    for shift in geometry.full_shifts(kernel, padding, dilation):
        num = spatial + torch.tensor(shift, dtype=torch.int64, device=device)
        if identity_stride:
            o = num
            r = rows
        else:
            ok = (torch.remainder(num, s) == 0).all(dim=1)
            r = ok.nonzero().squeeze(1)
            o = torch.div(num[r], s, rounding_mode="floor")
        check_emitted(o, out_stride, r, support)
        cand_rows.append(r)
        cand_keys.append(packing.pack(torch.cat([logical[r, :1], o], dim=1)))
    counts = [int(r.numel()) for r in cand_rows]
    all_keys = torch.cat(cand_keys)
    out_keys, inverse = _unique(all_keys, _cpu_lookup.cells(packing))
    out_logical = packing.unpack(out_keys)
    out = Support.from_logical(out_logical, out_stride)
    pairs = list(zip(cand_rows, torch.split(inverse, counts), strict=True))
    kmap = _assemble(pairs, n, int(out_keys.numel()), device)
    support.maps[key] = (out, kmap)
    back_key = target_key("target_transpose", support, kernel, stride, padding, dilation)
    out.maps[back_key] = kmap.transposed()
    return out, kmap


def coarsened_support(support: Support, stride: Triple) -> Support:
    """Every distinct ``floor(c / s)`` of the active rows, at stride ``t*s``; cached.

    For ``s = 1`` this is the input support itself (same rows, same order),
    so a stride-1 ``conv3d`` shares every map cached on its input.  Coarser
    rows come out sorted by packed key, which is deterministic.
    """
    if stride == (1, 1, 1):
        return support

    def build() -> Support:
        out_stride = geometry.forward_stride(support.stride, stride)
        logical = support.logical
        coarse = _cpu_lookup.floor_div(logical, stride)
        if coarse.shape[0]:
            lo, hi = bounds(coarse)
            packing = Packing.covering(lo, hi, margin=0)
            keys = packing.pack(coarse)
            cells = _cpu_lookup.cells(packing)
            per_key = _cpu_lookup.UNIQUE_CELLS_PER_KEY
            rows = int(coarse.shape[0])
            if keys.device.type == "cpu" and _cpu_lookup.dense_fits(cells, rows, per_key):
                uniq = _cpu_lookup.dense_unique(keys, cells)[0]
            else:
                uniq = torch.unique(keys, sorted=True)
            coarse = packing.unpack(uniq)
        out = Support.from_logical(coarse, out_stride)
        return out

    key = ("coarsen", stride)
    return cached_relation(support.maps, key, Support, build)


def conv_map(
    support: Support, kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> tuple[Support, KernelMap]:
    """Output support and map of ``conv3d`` / ``pool3d``: coarsened support, centred rule.

    With s = 1, p = 0 and an odd kernel the relation is the submanifold one,
    so the (symmetric, identity-tap) ``subm`` map is returned.  When the
    centred rule equals the indexed one (even or unit kernels), the adjoint
    map is registered on the output support so that a
    ``target_conv_transpose3d`` back onto this input reuses it.
    """

    def build() -> tuple[Support, KernelMap]:
        tiled = _tiled_map(support, kernel, stride, padding, dilation)
        if tiled is not None:
            out, kmap = tiled
        elif geometry.is_submanifold_relation(kernel, stride, padding):
            out = support
            kmap = subm_map(support, kernel, dilation)
        else:
            out = coarsened_support(support, stride)
            kmap = _centred_map(support, out, kernel, stride, padding, dilation)
        if geometry.indexed_equals_centred(kernel) and out is not support:
            back = target_key("target_transpose", support, kernel, stride, padding, dilation)
            out.maps[back] = kmap.transposed()
        return out, kmap

    key = ("conv", kernel, stride, padding, dilation)
    return cached_relation(support.maps, key, tuple, build)


def _tiled_map(
    support: Support, kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> tuple[Support, KernelMap] | None:
    """Output support and map of a conv whose windows tile the grid (CPU), without a search.

    When ``d = 1``, ``K <= s`` and the centred offset of tap 0 cancels the
    padding on every axis (k2s2 p0 is the common case), input ``c`` feeds
    exactly one output, ``floor(c / s)``, through tap ``c mod s`` (none when
    that tap is ``>= K``): one unique of the coarse keys (dense where the box
    fits) gives the coarsened support and every pair.  Pairs are tap-grouped
    in input row order; for inputs in key order the outputs of one tap
    increase too.  ``None`` where it does
    not apply (other geometry, not on the CPU, no rows, or a coarsened support
    cached already, whose rows this must not replace).
    """
    logical = support.logical
    n = support.num_rows
    if logical.device.type != "cpu" or not 0 < n < 2**31 - 1 or stride == (1, 1, 1):
        return None
    base = [k // 2 if k % 2 else 0 for k in kernel]
    if dilation != (1, 1, 1) or any(
        kernel[a] > stride[a] or padding[a] + base[a] != 0 for a in range(3)
    ):
        return None
    coarse_key = ("coarsen", stride)
    if isinstance(support.maps.get(coarse_key), Support):
        return None
    coarse = _cpu_lookup.floor_div(logical, stride)
    lo_in, hi_in = bounds(logical)
    # floor(c / s) is monotone, so the coarse rows' bounds are the bounds' images.
    lo = [lo_in[0]] + [lo_in[a] // stride[a - 1] for a in (1, 2, 3)]
    hi = [hi_in[0]] + [hi_in[a] // stride[a - 1] for a in (1, 2, 3)]
    packing = Packing.covering(lo, hi, margin=0)
    out_keys, inverse = _unique(_cpu_lookup.pack(packing, coarse), _cpu_lookup.cells(packing))
    # Row u of the output is the coarse row of any input whose key has rank u.
    out_logical = torch.empty(int(out_keys.numel()), 4, dtype=torch.int64)
    out_logical.index_copy_(0, inverse, coarse)
    out = Support.from_logical(out_logical, geometry.forward_stride(support.stride, stride))
    support.maps[coarse_key] = out
    offset = _cpu_lookup.remainder(logical, coarse, stride)  # (0, x mod sx, ...)
    tap = offset @ torch.tensor([0, kernel[1] * kernel[2], kernel[2], 1], dtype=torch.int64)
    volume = kernel_volume(kernel)
    if kernel != stride:  # taps >= K feed nothing: sort them past the last tap
        inside = (offset[:, 1:] < torch.tensor(kernel, dtype=torch.int64)).all(dim=1)
        tap = torch.where(inside, tap, volume)
    # A stable sort of small integers: uint8 keys take torch's radix path (4x faster).
    order = torch.sort(tap.to(torch.uint8) if volume < 256 else tap, stable=True).indices
    counts = torch.bincount(tap, minlength=volume + 1)[:volume].tolist()
    used = sum(counts)
    in_idx = order[:used].to(torch.int32)
    out_idx = inverse.index_select(0, order[:used]).to(torch.int32)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + int(c))
    keys = _cpu_lookup.pack(Packing.covering(lo_in, hi_in, margin=0), logical)
    in_order = bool(torch.all(keys[1:] > keys[:-1]))
    kmap = KernelMap(
        in_idx,
        out_idx,
        tuple(starts),
        n,
        out.num_rows,
        outputs_sorted=in_order,
        inputs_sorted=True,
    )
    return out, kmap


def _centred_map(
    support: Support,
    target: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> KernelMap:
    """Pairs of the centred relation ``c = o*s + off_c(k) - p`` at the target's rows."""
    device = support.logical.device
    offsets = geometry.centred_shifts(kernel, padding, dilation)
    s = torch.tensor((1, *stride), dtype=torch.int64, device=device)
    if target is support:  # s = 1: the queries are the table's own rows
        found_pairs, in_order = _self_lookup(support, offsets)
        return _assemble(
            [(r, q) for q, r in found_pairs],
            support.num_rows,
            support.num_rows,
            device,
            sorted_rows=in_order,
        )
    base = target.logical * s
    dense = _cpu_lookup.lookup_offsets(support.logical, base, offsets)
    found_pairs = dense[0] if dense is not None else support.table.lookup_offsets(base, offsets)
    return _assemble([(r, q) for q, r in found_pairs], support.num_rows, target.num_rows, device)


def target_conv_map(
    support: Support,
    target: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> KernelMap:
    """Map of ``target_conv3d``: the centred relation evaluated at the target's rows."""

    def build() -> KernelMap:
        # ``is`` first: torch.equal reads the device (a host sync on CUDA).
        if target is support or (
            stride == (1, 1, 1) and torch.equal(target.logical, support.logical)
        ):
            return conv_map(support, kernel, stride, padding, dilation)[1]
        return _centred_map(support, target, kernel, stride, padding, dilation)

    key = target_key("target_conv", target, kernel, stride, padding, dilation)
    return cached_relation(support.maps, key, KernelMap, build)


# --------------------------------------------------------------------------- transpose


def transpose_map(
    support: Support, kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> tuple[Support, KernelMap]:
    """Output support and map of a derived-support ``conv_transpose3d``: ``o = c*s - p + k*d``.

    When no two (input, tap) pairs can land on one output (``(K-1)*d < s`` on
    every axis) the candidates are already unique and are kept in
    input-major order; otherwise they are deduplicated and sorted by key.
    """
    key = ("transpose", kernel, stride, padding, dilation)
    found = support.maps.get(key)
    if isinstance(found, tuple):
        return found
    out_stride = geometry.transposed_stride(support.stride, stride, "conv_transpose3d")
    logical = support.logical
    device = logical.device
    n = support.num_rows
    volume = kernel_volume(kernel)
    if n == 0:
        out = Support.from_logical(torch.empty(0, 4, dtype=torch.int64, device=device), out_stride)
        kmap = _assemble([_empty_pair(logical)] * volume, 0, 0, device)
        support.maps[key] = (out, kmap)
        return out, kmap
    s = torch.tensor((1, *stride), dtype=torch.int64, device=device)
    base = logical * s
    shifts = geometry.transposed_shifts(kernel, padding, dilation)
    off = torch.tensor([(0, *o) for o in shifts], dtype=torch.int64, device=device)
    disjoint = geometry.disjoint_windows(kernel, stride, dilation)
    rows = torch.arange(n, device=device)
    if disjoint:
        cand = (base[:, None, :] + off[None, :, :]).reshape(-1, 4)
        check_emitted(cand, out_stride, rows.repeat_interleave(volume), support)
        out = Support.from_logical(cand, out_stride)
        pairs = [(rows, rows * volume + k) for k in range(volume)]
        kmap = _assemble(pairs, n, n * volume, device)
    else:
        lo, hi = bounds(logical)
        packing = Packing.covering(
            *geometry.transposed_output_bounds(lo, hi, Window(kernel, stride, padding, dilation)),
            margin=0,
        )
        cand = (base[None, :, :] + off[:, None, :]).reshape(-1, 4)
        check_emitted(cand, out_stride, rows.repeat(volume), support)
        keys = packing.pack(cand)
        out_keys, inverse = _unique(keys, _cpu_lookup.cells(packing))
        out = Support.from_logical(packing.unpack(out_keys), out_stride)
        pairs = list(zip([rows] * volume, torch.split(inverse, n), strict=True))
        kmap = _assemble(pairs, n, int(out_keys.numel()), device)
    support.maps[key] = (out, kmap)
    return out, kmap


def generative_transpose_map(
    support: Support, kernel: Triple, stride: Triple
) -> tuple[Support, KernelMap]:
    """Support expansion ``o = c*s + k`` for every input row and tap (p = 0, d = 1)."""
    return transpose_map(support, kernel, stride, (0, 0, 0), (1, 1, 1))


def target_transpose_map(
    support: Support,
    target: Support,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> KernelMap:
    """Map of ``conv_transpose3d`` at the target's rows: input ``c = (o + p - k*d) / s``.

    When the target is the input of the strided ``conv3d`` that produced this
    value, the map is that conv's map transposed (registered by
    :func:`conv_map`), so a U-Net decoder never searches.
    """

    def build() -> KernelMap:
        device = support.logical.device
        o = target.logical
        table = support.table
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        shifts = geometry.full_shifts(kernel, padding, dilation)  # input c = (o + shift) / s
        if stride == (1, 1, 1):
            pairs = [(r, q) for q, r in table.lookup_offsets(o, shifts)]
        else:
            s = torch.tensor(stride, dtype=torch.int64, device=device)
            for shift in shifts:
                num = o[:, 1:] + torch.tensor(shift, dtype=torch.int64, device=device)
                ok = (torch.remainder(num, s) == 0).all(dim=1)
                q = ok.nonzero().squeeze(1)
                c = torch.cat([o[q, :1], torch.div(num[q], s, rounding_mode="floor")], dim=1)
                r = table.find(c)
                hit = r >= 0
                pairs.append((r[hit], q[hit]))
        return _assemble(pairs, support.num_rows, target.num_rows, device)

    key = target_key("target_transpose", target, kernel, stride, padding, dilation)
    return cached_relation(support.maps, key, KernelMap, build)
