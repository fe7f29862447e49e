"""Kernel maps of the CUDA path, built on the device as slot tables.

A :class:`SlotMap` holds ``slots[o, k]``: the input row that feeds output row
o through tap k, or -1.  Every relation of the contract (centred, indexed,
submanifold, transposed, generative, and their target forms) has at most one
input per (output, tap) and one output per (input, tap), so this table is the
whole map, and its transpose (:meth:`SlotMap.transposed`) is the map of the
input gradient.

Lookups go through packed int64 keys of a support's logical coordinates
(``torch_lattice.coords.Packing``), sorted once per support and searched by
one Triton kernel for all (output, tap) queries at once.  Supports that a
conv generates get their key table for free (their rows come out of
``torch.unique`` in key order).  Nothing here synchronises with the host
except ``torch.unique`` (the size of a generated support) and the bounding
box of a support that arrives from outside (read once per support).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from lattice_contract.kernel import centred_tap_offsets, kernel_volume, subm_offsets, tap_offsets

from torch_lattice.coords import Packing, bounds
from torch_lattice.sparse import Support
from torch_lattice.triton.kernels import launch_probe

__all__ = ["SlotMap", "build"]

Triple = tuple[int, int, int]
_TAG = "triton"


@dataclass(frozen=True)
class SlotMap:
    """``slots`` (num_out, K) int32: input row per (output row, tap), -1 where none."""

    slots: torch.Tensor
    num_in: int
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_out(self) -> int:
        """Number of output rows."""
        return int(self.slots.shape[0])

    @property
    def volume(self) -> int:
        """Number of taps."""
        return int(self.slots.shape[1])

    def order(self) -> torch.Tensor:
        """Output rows sorted by their set of present taps (int32 permutation), cached.

        Rows with the same taps land in the same tiles, so the conv kernel
        skips a tap for a whole tile whenever none of its rows has it (the
        reordering TorchSparse++ and spconv's implicit GEMM use).  The sort is
        stable, so rows keep their spatial order inside a pattern.
        """
        found = self.cache.get("order")
        if found is None:
            k = min(self.volume, 62)
            weights = torch.ones(k, dtype=torch.int64, device=self.slots.device) << torch.arange(
                k, device=self.slots.device
            )
            pattern = ((self.slots[:, :k] >= 0).to(torch.int64) * weights).sum(1)
            found = torch.sort(pattern, stable=True).indices.to(torch.int32)
            self.cache["order"] = found
        result: torch.Tensor = found
        return result

    def transposed(self) -> SlotMap:
        """The adjoint map: per (input row, tap) the output row it feeds, cached both ways."""
        found = self.cache.get("transposed")
        if found is None:
            m, k = self.slots.shape
            device = self.slots.device
            dump = self.num_in * k
            table = torch.full((dump + 1,), -1, dtype=torch.int32, device=device)
            taps = torch.arange(k, device=device)
            where = torch.where(
                self.slots >= 0, self.slots.to(torch.int64) * k + taps, torch.full_like(taps, dump)
            )
            rows = torch.arange(m, device=device, dtype=torch.int32)[:, None].expand(m, k)
            table.scatter_(0, where.reshape(-1), rows.reshape(-1))
            found = SlotMap(table[:dump].view(self.num_in, k), m)
            found.cache["transposed"] = self
            self.cache["transposed"] = found
        result: SlotMap = found
        return result

    def pairs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input rows, output rows, tap starts): the pairs compacted tap by tap, cached.

        Pair ``starts[k]:starts[k+1]`` belong to tap k (int64 starts on the
        device, so nothing is read back); the weight gradient walks them.
        """
        found = self.cache.get("pairs")
        if found is None:
            m, k = self.slots.shape
            device = self.slots.device
            by_tap = self.slots.t()
            present = by_tap >= 0
            flat = present.reshape(-1)
            pos = torch.cumsum(flat, 0) - 1
            dump = m * k
            where = torch.where(flat, pos, torch.full_like(pos, dump))
            pin = torch.empty(dump + 1, dtype=torch.int32, device=device)
            pout = torch.empty(dump + 1, dtype=torch.int32, device=device)
            pin.scatter_(0, where, by_tap.reshape(-1))
            rows = torch.arange(m, device=device, dtype=torch.int32).repeat(k)
            pout.scatter_(0, where, rows)
            starts = torch.zeros(k + 1, dtype=torch.int64, device=device)
            starts[1:] = torch.cumsum(present.sum(1), 0)
            found = (pin, pout, starts)
            self.cache["pairs"] = found
        result: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = found
        return result


# --------------------------------------------------------------------------- key tables


@dataclass(frozen=True)
class _Table:
    packing: Packing
    keys: torch.Tensor  # sorted int64
    order: torch.Tensor  # int64 row of each sorted key


def _packing(support: Support) -> Packing:
    """The support's bounding box as a packing (one host read per support), cached on it."""
    found = support.maps.get((_TAG, "box"))
    if isinstance(found, Packing):
        return found
    if support.num_rows == 0:
        packing = Packing((0, 0, 0, 0), (1, 1, 1, 1))
    else:
        lo, hi = bounds(support.logical)
        packing = Packing.covering(lo, hi, margin=0)
    support.maps[(_TAG, "box")] = packing
    return packing


def _table(support: Support) -> _Table:
    """The sorted key table of a support, cached on it."""
    found = support.maps.get((_TAG, "table"))
    if isinstance(found, _Table):
        return found
    packing = _packing(support)
    if support.num_rows == 0:
        empty = torch.empty(0, dtype=torch.int64, device=support.logical.device)
        table = _Table(packing, empty, empty)
    else:
        keys, order = torch.sort(packing.pack(support.logical))
        table = _Table(packing, keys, order)
    support.maps[(_TAG, "table")] = table
    return table


def _generated(keys: torch.Tensor, packing: Packing, stride: Triple) -> Support:
    """A support from sorted unique keys, registered with its key table (no search later)."""
    out = Support.from_logical(packing.unpack(keys), stride)
    order = torch.arange(keys.numel(), device=keys.device)
    out.maps[(_TAG, "table")] = _Table(packing, keys, order)
    out.maps[(_TAG, "box")] = packing
    return out


def _box(
    packing: Packing,
    scale: Sequence[int],
    shift_lo: Sequence[int],
    shift_hi: Sequence[int],
    div: Sequence[int],
) -> Packing:
    """Packing of ``floor((c * scale + shift) / div)`` for c in the packing's box (host only)."""
    lo = [packing.lo[0]]
    hi = [packing.lo[0] + packing.size[0] - 1]
    for a in range(3):
        c_lo = packing.lo[a + 1]
        c_hi = c_lo + packing.size[a + 1] - 1
        lo.append((c_lo * scale[a] + shift_lo[a]) // div[a])
        hi.append((c_hi * scale[a] + shift_hi[a]) // div[a])
    return Packing.covering(lo, hi, margin=0)


def _probe(
    out_logical: torch.Tensor, source: Support, terms: Sequence[Triple], mul: Triple, div: Triple
) -> torch.Tensor:
    table = _table(source)
    t = _const(terms, out_logical.device).reshape(-1, 3)
    p = table.packing
    run = _z_run(terms, div)
    return launch_probe(out_logical, t, table.keys, table.order, p.lo, p.size, mul, div, run)


def _z_run(terms: Sequence[Triple], div: Triple) -> int:
    """Length of the runs of consecutive taps that share x, y and step z by +1 (else 1)."""
    if div[2] != 1:
        return 1
    for run in range(len(terms), 1, -1):
        if len(terms) % run:
            continue
        groups = [terms[g : g + run] for g in range(0, len(terms), run)]
        if all(
            t[j][0] == t[0][0] and t[j][1] == t[0][1] and t[j][2] == t[0][2] + j
            for t in groups
            for j in range(run)
        ):
            return run
    return 1


def _scatter_slots(
    inverse: torch.Tensor, valid: torch.Tensor | None, m: int, k: int
) -> torch.Tensor:
    """Slot table from ``inverse[c, k]`` (output row of candidate (c, k)), -1 elsewhere."""
    n = int(inverse.shape[0])
    device = inverse.device
    dump = m * k
    taps = torch.arange(k, device=device)
    where = inverse * k + taps
    if valid is not None:
        where = torch.where(valid, where, torch.full_like(where, dump))
    table = torch.full((dump + 1,), -1, dtype=torch.int32, device=device)
    rows = torch.arange(n, device=device, dtype=torch.int32)[:, None].expand(n, k)
    table.scatter_(0, where.reshape(-1), rows.reshape(-1))
    return table[:dump].view(m, k)


# --------------------------------------------------------------------------- relations


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


def _times(a: Triple, b: Triple) -> Triple:
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2])


def _candidates(
    support: Support, offsets: Sequence[Triple], mul: Triple, add: Triple, div: Triple
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(N, K, 4) logical rows ``(b, (c * mul + add + off_k) / div)`` and their exactness mask."""
    logical = support.logical
    device = logical.device
    off = _const(offsets, device).reshape(1, -1, 3)
    num = logical[:, None, 1:] * _const(mul, device) + _const(add, device) + off
    d = _const(div, device)
    valid = None
    if div != (1, 1, 1):
        valid = (torch.remainder(num, d) == 0).all(dim=2)
        num = torch.div(num, d, rounding_mode="floor")
    batch = logical[:, None, :1].expand(-1, num.shape[1], 1)
    return torch.cat([batch, num], dim=2), valid


def _unique_support(
    cand: torch.Tensor, valid: torch.Tensor | None, packing: Packing, stride: Triple
) -> tuple[Support, torch.Tensor]:
    """Sorted unique rows of the candidates (one host sync: their count) and each one's row."""
    keys = packing.pack(cand.reshape(-1, 4)).view(cand.shape[0], cand.shape[1])
    if keys.numel() == 0:
        return _generated(keys.reshape(-1), packing, stride), keys
    if valid is not None:
        # Invalid candidates borrow the smallest valid key so that unique() needs no filter.
        smallest = torch.where(valid, keys, torch.full_like(keys, 1 << 62)).min()
        keys = torch.where(valid, keys, smallest)
    out_keys, inverse = torch.unique(keys.reshape(-1), sorted=True, return_inverse=True)
    if valid is not None and out_keys.numel() == 1 and not bool(valid.any()):
        out_keys = out_keys[:0]
    return _generated(out_keys, packing, stride), inverse.view(cand.shape[0], cand.shape[1])


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
        found = found.forward.transposed()
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
    n = support.num_rows
    volume = kernel_volume(kernel)
    ones: Triple = (1, 1, 1)
    neg_p: Triple = (-padding[0], -padding[1], -padding[2])
    if kind == "subm":
        terms = subm_offsets(kernel, dilation)
        return support, SlotMap(_probe(support.logical, support, terms, ones, ones), n)
    if kind in ("centred", "indexed"):
        offsets = (
            centred_tap_offsets(kernel, dilation)
            if kind == "centred"
            else tap_offsets(kernel, dilation)
        )
        terms = [(o[0] - padding[0], o[1] - padding[1], o[2] - padding[2]) for o in offsets]
        out_stride = _times(support.stride, stride)
        if target is not None:
            out = target
        elif kind == "centred" and stride == ones:
            out = support
        elif (
            kind == "centred"
            and padding == (0, 0, 0)
            and dilation == ones
            and all(kernel[a] % 2 == 0 or kernel[a] == 1 for a in range(3))
            and all(kernel[a] <= stride[a] for a in range(3))
        ):
            # An even kernel no wider than its stride (k2s2): centred and indexed agree,
            # and the windows do not overlap.
            out, smap = _disjoint_down(support, kernel, stride, padding, out_stride)
            _register_back(out, support, kernel, stride, padding, dilation, smap)
            return out, smap
        elif kind == "centred":
            box = _box(_packing(support), ones, (0, 0, 0), (0, 0, 0), stride)
            cand, _ = _candidates(support, [(0, 0, 0)], ones, (0, 0, 0), stride)
            out, _ = _unique_support(cand, None, box, out_stride)
        elif dilation == ones and all(kernel[a] <= stride[a] for a in range(3)):
            # Indexed downsampling with windows that do not overlap: input c feeds only
            # tap (c + p) mod s of output floor((c + p) / s), one candidate per row.
            out, smap = _disjoint_down(support, kernel, stride, padding, out_stride)
            _register_back(out, support, kernel, stride, padding, dilation, smap)
            return out, smap
        else:
            # Indexed: every o = (c + p - k*d) / s (exact) of an active c; the candidates
            # are exactly the pairs, so their unique() inverse is the map (no search).
            span = [(kernel[a] - 1) * dilation[a] for a in range(3)]
            box = _box(
                _packing(support), ones, [padding[a] - span[a] for a in range(3)], padding, stride
            )
            neg = [(-o[0], -o[1], -o[2]) for o in offsets]
            cand, valid = _candidates(support, neg, ones, padding, stride)
            out, inverse = _unique_support(cand, valid, box, out_stride)
            smap = SlotMap(_scatter_slots(inverse, valid, out.num_rows, volume), n)
            _register_back(out, support, kernel, stride, padding, dilation, smap)
            return out, smap
        smap = SlotMap(_probe(out.logical, support, terms, stride, ones), n)
        if (
            target is None
            and kind == "centred"
            and stride != ones
            and offsets == tap_offsets(kernel, dilation)
        ):
            _register_back(out, support, kernel, stride, padding, dilation, smap)
        return out, smap
    if kind == "transpose":
        for a in range(3):
            if support.stride[a] % stride[a]:
                raise ValueError(
                    f"a transposed conv with stride {stride} needs an input stride divisible "
                    f"by it; the input stride is {support.stride}"
                )
        t_stride: Triple = (
            support.stride[0] // stride[0],
            support.stride[1] // stride[1],
            support.stride[2] // stride[2],
        )
        offsets = tap_offsets(kernel, dilation)
        if target is not None:
            # Input c = (o + p - k*d) / s, exact.
            terms = [(padding[0] - o[0], padding[1] - o[1], padding[2] - o[2]) for o in offsets]
            return target, SlotMap(_probe(target.logical, support, terms, ones, stride), n)
        cand, _ = _candidates(support, offsets, stride, neg_p, ones)
        if all((kernel[a] - 1) * dilation[a] < stride[a] for a in range(3)):
            # No two candidates meet: output row c*K + k is fed by input c through tap k only.
            out = Support.from_logical(cand.reshape(-1, 4), t_stride)
            inverse = torch.arange(n * volume, device=cand.device).view(n, volume)
            return out, SlotMap(_scatter_slots(inverse, None, n * volume, volume), n)
        span = [(kernel[a] - 1) * dilation[a] for a in range(3)]
        box = _box(_packing(support), stride, neg_p, [span[a] - padding[a] for a in range(3)], ones)
        out, inverse = _unique_support(cand, None, box, t_stride)
        return out, SlotMap(_scatter_slots(inverse, None, out.num_rows, volume), n)
    raise ValueError(f"unknown conv kind {kind!r}")


def _disjoint_down(
    support: Support, kernel: Triple, stride: Triple, padding: Triple, out_stride: Triple
) -> tuple[Support, SlotMap]:
    """Indexed map of a conv whose windows do not overlap (K <= s, d = 1), one pass over rows.

    Output ``floor((c + p) / s)`` through tap ``(c + p) mod s`` when that tap
    exists (every tap below K); no candidate per tap and no search.
    """
    n = support.num_rows
    volume = kernel_volume(kernel)
    ones: Triple = (1, 1, 1)
    box = _box(_packing(support), ones, padding, padding, stride)
    cand, _ = _candidates(support, [(0, 0, 0)], ones, padding, stride)
    logical = support.logical
    device = logical.device
    rem = torch.remainder(logical[:, 1:] + _const(padding, device), _const(stride, device))
    k = _const(kernel, device)
    valid = (rem < k).all(dim=1, keepdim=True)
    tap = (rem[:, 0] * kernel[1] + rem[:, 1]) * kernel[2] + rem[:, 2]
    out, inverse = _unique_support(cand, valid, box, out_stride)
    m = out.num_rows
    dump = m * volume
    where = torch.where(valid[:, 0], inverse[:, 0] * volume + tap, torch.full_like(tap, dump))
    slots = torch.full((dump + 1,), -1, dtype=torch.int32, device=device)
    slots.scatter_(0, where, torch.arange(n, device=device, dtype=torch.int32))
    return out, SlotMap(slots[:dump].view(m, volume), n)


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
