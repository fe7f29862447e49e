"""Kernel maps: which input row feeds which output row through which tap.

Every sparse conv and pool op reduces to a list of ``(input row, output row)``
pairs per kernel tap.  This module builds those lists, and the output
supports of the support-generating ops, with whole-kernel vectorised lookups
(:mod:`mlx_lattice.coords`), and memoises them on the input's
:class:`~mlx_lattice.coords.SupportCache` so that every layer of a forward
pass that reads the same support with the same geometry reuses one map.

A cache key names a target support by a weak reference, as torch's cache
does, through the contract's one relation cache
(:mod:`lattice_contract.frontend.kernel_map`): a cached map never keeps
another support alive, so supports form no reference cycle.

Geometry (docs/semantics.md), per axis, in logical units (physical / stride),
with K taps, dilation d, op stride s and padding p, and the two offset rules of
:mod:`lattice_contract.dialect.kernel` (centred ``off_c(k)``: ``(k - K//2) d`` for odd
K, ``k d`` for even K; indexed: ``k d``):

* submanifold: output rows = input rows, tap k reads ``c + (k - (K-1)//2) d``;
* forward (``conv3d``, ``pool3d``): output rows are the coarsened input
  support (every distinct ``floor(c / s)``; for s = 1 the input rows), and
  tap k of o reads ``c = o s + off_c(k) - p``;
* full (``full_conv3d``, ``full_pool3d``): input c reaches output o through
  tap k when ``c = o s - p + k d``, and the output is every o reached;
* transposed: ``o = c s - p + k d`` (generative is the case p = 0, d = 1);
* target forms: the same relations, evaluated only at a given output support.

Tap numbering comes from :mod:`lattice_contract.dialect.kernel` and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import Triple, Window, geometry, subm_offsets, tap_index
from lattice_contract.frontend import TapPairs, cached_relation, target_key

from mlx_lattice.coord_range import check_emitted
from mlx_lattice.coords import KeySpace, SupportCache, SupportIndex, flat_nonzero


@dataclass(frozen=True)
class KernelMap(TapPairs[mx.array]):
    """Input/output row pairs of one op, grouped by tap, as int32 MLX arrays.

    The table's form and its accessors are the contract's
    (:class:`~lattice_contract.frontend.kernel_map.TapPairs`): pairs of tap k are
    ``in_idx[starts[k]:starts[k+1]]`` / ``out_idx[starts[k]:starts[k+1]]``, and
    the ``identity_tap``'s pairs (every row onto itself) are not stored.
    Memory: two int32 per pair.
    """

    def transposed(self) -> KernelMap:
        """The same pairs with input and output swapped (the adjoint's map)."""
        return KernelMap(
            in_idx=self.out_idx,
            out_idx=self.in_idx,
            starts=self.starts,
            num_in=self.num_out,
            num_out=self.num_in,
            identity_tap=self.identity_tap,
        )


@dataclass(frozen=True)
class GeneratedSupport:
    """A support produced by a forward or transposed op, with its map.

    ``coords`` are physical, ``stride`` the output stride, ``cache`` the output
    support's cache (pre-seeded with its index, which generation yields for
    free because the rows come out sorted by key).
    """

    coords: mx.array
    stride: Triple
    cache: SupportCache
    kmap: KernelMap


# ----------------------------------------------------------------- helpers


def _assemble(
    found: mx.array, in_rows: mx.array, out_rows: mx.array, num_in: int, num_out: int
) -> KernelMap:
    """Compact per-tap candidate pairs ``(T, M)`` to the hits, grouped by tap."""
    taps, m = found.shape
    if taps * m == 0:
        empty = mx.zeros((0,), dtype=mx.int32)
        return KernelMap(empty, empty, (0,) * (taps + 1), num_in, num_out)
    counts = np.asarray(mx.sum(found.astype(mx.int32), axis=1)).astype(np.int64)
    bounds = (0, *(int(v) for v in np.cumsum(counts)))
    hits = flat_nonzero(found)
    return KernelMap(
        in_idx=in_rows.reshape(-1)[hits],
        out_idx=out_rows.reshape(-1)[hits],
        starts=bounds,
        num_in=num_in,
        num_out=num_out,
    )


def _logical(coords: mx.array, stride: Triple) -> mx.array:
    if stride == (1, 1, 1):
        return coords
    return coords // mx.array((1, *stride), dtype=mx.int32)


def _physical(coords: mx.array, stride: Triple) -> mx.array:
    if stride == (1, 1, 1):
        return coords
    return coords * mx.array((1, *stride), dtype=mx.int32)


def _shifted(coords: mx.array, delta: Sequence[int]) -> mx.array:
    # int64: a read position past the int32 limits must miss, not wrap onto a real row.
    return coords.astype(mx.int64) + mx.array((0, *delta), dtype=mx.int64)


def _index(cache: SupportCache, coords: mx.array, stride: Triple) -> SupportIndex:
    return cache.index(_logical(coords, stride))


def _divisible(
    logical: mx.array, shifts: list[tuple[int, int, int]], op_stride: Triple
) -> list[mx.array]:
    """Per shift, whether ``logical + shift`` is divisible by the stride on every axis.

    Residues are taken once; each shift then needs one comparison with the
    residue it requires, instead of a modulo per tap.
    """
    residue = logical[:, 1:] % mx.array(op_stride, dtype=mx.int32)
    return [
        mx.all(
            residue == mx.array([(-v) % q for v, q in zip(shift, op_stride, strict=True)]),
            axis=-1,
        )
        for shift in shifts
    ]


def _box(space: KeySpace) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Inclusive bounds of a key space (its margin included: harmlessly wider)."""
    high = tuple(a + e - 1 for a, e in zip(space.low, space.extent, strict=True))
    return space.low, high


# ------------------------------------------------------------ submanifold


def subm_map(
    cache: SupportCache, coords: mx.array, stride: Triple, kernel_size: Triple, dilation: Triple
) -> KernelMap:
    """Map of a submanifold conv: output rows are the input rows.

    Queries run in sorted-key order, column by column
    (:meth:`~mlx_lattice.coords.SupportIndex.find_neighbours`).  When
    every axis has an odd size the kernel is point-symmetric: tap k and its
    mirror ``V-1-k`` see the same pairs with roles swapped, so only half of
    the taps are searched.
    """

    def build() -> KernelMap:
        index = _index(cache, coords, stride)
        n = index.size
        offsets = subm_offsets(kernel_size, dilation)
        volume = len(offsets)
        centre = tap_index(tuple((k - 1) // 2 for k in kernel_size), kernel_size)
        symmetric = all(k % 2 == 1 for k in kernel_size)
        searched = [k for k in range(volume) if k != centre and (not symmetric or k < centre)]
        sorted_rows = index.rows
        if searched and n:
            probed = index.find_neighbours([offsets[k] for k in searched])
            if probed is None:  # offsets beyond the key margin: shift, repack and search each tap
                sorted_coords = index.space.unpack(index.keys)
                queries = mx.stack(
                    [index.space.pack(_shifted(sorted_coords, offsets[k])) for k in searched]
                )
                probed = index.find_keys(queries)
            found, rows = probed
            partial = _assemble(found, rows, mx.broadcast_to(sorted_rows, rows.shape), n, n)
        else:
            empty = mx.zeros((0,), dtype=mx.int32)
            partial = KernelMap(empty, empty, (0,) * (len(searched) + 1), n, n)
        ins: list[mx.array] = []
        outs: list[mx.array] = []
        bounds = [0]
        where = {k: i for i, k in enumerate(searched)}
        for k in range(volume):
            if k in where:
                i, o = partial.tap(where[k])
            elif k != centre:  # mirror of a searched tap: same pairs, roles swapped
                o, i = partial.tap(where[volume - 1 - k])
            else:
                i = o = mx.zeros((0,), dtype=mx.int32)
            ins.append(i)
            outs.append(o)
            bounds.append(bounds[-1] + int(i.shape[0]))
        kmap = KernelMap(
            in_idx=mx.concatenate(ins) if ins else mx.zeros((0,), dtype=mx.int32),
            out_idx=mx.concatenate(outs) if outs else mx.zeros((0,), dtype=mx.int32),
            starts=tuple(bounds),
            num_in=n,
            num_out=n,
            identity_tap=centre,
        )
        return kmap

    key = ("subm", kernel_size, dilation)
    return cached_relation(cache.relations, key, KernelMap, build)


# ------------------------------------------------------- generated supports


def _generate(
    cache: SupportCache,
    key: tuple[object, ...],
    logical: mx.array,
    valid: mx.array | None,
    shifts: list[tuple[int, int, int]],
    op_stride: Triple,
    forward: bool,
    out_stride: Triple,
    out_space: KeySpace,
) -> GeneratedSupport:
    """Output support and map of a support-generating op, from its valid (input, tap) pairs.

    Tap k sends input c to ``(c + shift_k) / s`` (forward; only where ``valid``
    says the division is exact) or to ``c * s + shift_k`` (transposed; every
    pair).  The pairs are compacted first, so everything after that is
    O(pairs): one argsort of the pairs' output keys gives both the sorted
    unique output rows and each pair's output row.  Output rows come out
    sorted by key, so the output's index is the unique-key array itself.
    """
    n = int(logical.shape[0])
    volume = len(shifts)
    if valid is None:
        counts = [n] * volume
        flat = mx.arange(n * volume, dtype=mx.int32)
    else:
        counts = [int(v) for v in np.asarray(mx.sum(valid.astype(mx.int32), axis=1)).tolist()]
        flat = flat_nonzero(valid)
    bounds = (0, *(int(v) for v in np.cumsum(counts)))
    num_pairs = bounds[-1]
    if num_pairs == 0:
        empty = mx.zeros((0,), dtype=mx.int32)
        no_keys = mx.zeros((0,), dtype=mx.int64)
        generated = GeneratedSupport(
            coords=mx.zeros((0, 4), dtype=mx.int32),
            stride=out_stride,
            cache=SupportCache(SupportIndex(space=out_space, keys=no_keys, rows=empty)),
            kmap=KernelMap(empty, empty, bounds, n, 0),
        )
        cache.relations[key] = generated
        return generated
    in_rows = flat % n
    taps = flat // n
    # In int64: near the int32 limits c*s + k*d (or c + p) is not an int32, and
    # must be refused (lattice_contract.dialect.coord_range), never wrapped.
    table = mx.array([(0, *shift) for shift in shifts], dtype=mx.int64)
    s = mx.array((1, *op_stride), dtype=mx.int64)
    base = logical[in_rows].astype(mx.int64)
    out = (base + table[taps]) // s if forward else base * s + table[taps]
    in_stride = tuple(
        (o // a if forward else o * a) for o, a in zip(out_stride, op_stride, strict=True)
    )
    check_emitted(out, out_stride, in_rows, logical, in_stride)  # type: ignore[arg-type]
    keys = out_space.pack(out)
    order = mx.argsort(keys)
    sorted_keys = keys[order]
    first = mx.concatenate([mx.ones((1,), dtype=mx.bool_), sorted_keys[1:] != sorted_keys[:-1]])
    out_rows = mx.zeros((num_pairs,), dtype=mx.int32)
    out_rows[order] = mx.cumsum(first.astype(mx.int32)) - 1
    unique = sorted_keys[flat_nonzero(first)]
    num_out = int(unique.shape[0])
    out_index = SupportIndex(space=out_space, keys=unique, rows=mx.arange(num_out, dtype=mx.int32))
    generated = GeneratedSupport(
        coords=_physical(out_space.unpack(unique), out_stride).reshape(num_out, 4),
        stride=out_stride,
        cache=SupportCache(out_index),
        kmap=KernelMap(in_rows, out_rows, bounds, n, num_out),
    )
    cache.relations[key] = generated
    return generated


def full_conv_support(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> GeneratedSupport:
    """Output support and map of ``full_conv3d`` / ``full_pool3d``; stride t*s.

    Output o is reached from input c through tap k when ``c = o s - p + k d``,
    i.e. ``o = (c + p - k d) / s`` where that division is exact on every axis.
    """
    key = ("full", kernel_size, op_stride, padding, dilation)
    hit = cache.relations.get(key)
    if isinstance(hit, GeneratedSupport):
        return hit
    index = _index(cache, coords, stride)
    logical = _logical(coords, stride)
    lo, hi = _box(index.space)
    out_space = KeySpace.from_bounds(
        *geometry.full_output_bounds(lo, hi, Window(kernel_size, op_stride, padding, dilation))
    )
    shifts = geometry.full_shifts(kernel_size, padding, dilation)
    valid: mx.array | None = None
    if op_stride != (1, 1, 1):
        valid = mx.stack(_divisible(logical, shifts, op_stride))
    out_stride = geometry.forward_stride(stride, op_stride)
    return _generate(cache, key, logical, valid, shifts, op_stride, True, out_stride, out_space)


def coarsened_support(
    cache: SupportCache, coords: mx.array, stride: Triple, op_stride: Triple
) -> tuple[mx.array, SupportCache]:
    """Physical rows and cache of every distinct ``floor(c / s)`` of the input, at stride t*s.

    For s = 1 this is the input itself (same rows, same order, same cache),
    so a stride-1 ``conv3d`` shares every map cached on its input.  Coarser
    rows come out sorted by key, with their index seeded.
    """
    if op_stride == (1, 1, 1):
        return coords, cache

    def build() -> tuple[mx.array, SupportCache]:
        out_stride = geometry.forward_stride(stride, op_stride)
        logical = _logical(coords, stride) // mx.array((1, *op_stride), dtype=mx.int32)
        space = KeySpace.of(logical)
        n = int(logical.shape[0])
        if n == 0:
            empty = mx.zeros((0,), dtype=mx.int32)
            index = SupportIndex(space=space, keys=mx.zeros((0,), dtype=mx.int64), rows=empty)
            found = (mx.zeros((0, 4), dtype=mx.int32), SupportCache(index))
        else:
            keys = mx.sort(space.pack(logical))
            first = mx.concatenate([mx.ones((1,), dtype=mx.bool_), keys[1:] != keys[:-1]])
            unique = keys[flat_nonzero(first)]
            m = int(unique.shape[0])
            index = SupportIndex(space=space, keys=unique, rows=mx.arange(m, dtype=mx.int32))
            found = (_physical(space.unpack(unique), out_stride).reshape(m, 4), SupportCache(index))
        return found

    key = ("coarsen", op_stride)
    return cached_relation(cache.relations, key, tuple, build)


def _centred_map(
    index: SupportIndex, target: mx.array, op_stride: Triple, offsets: list[Triple]
) -> KernelMap:
    """Pairs ``c = o s + offset`` (offsets already shifted by -p) at logical target rows."""
    m = int(target.shape[0])
    scaled = target * mx.array((1, *op_stride), dtype=mx.int32)
    queries = mx.stack([index.space.pack(_shifted(scaled, off)) for off in offsets])
    found, rows = index.find_keys(queries)
    out_rows = mx.broadcast_to(mx.arange(m, dtype=mx.int32), found.shape)
    return _assemble(found, rows, out_rows, index.size, m)


def conv_support(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> GeneratedSupport:
    """Output support and map of ``conv3d`` / ``pool3d``: the coarsened support; stride t*s.

    Tap k of output o reads ``c = o s + off_c(k) - p`` (centred rule).  With
    s = 1, p = 0 and an odd kernel that is the submanifold relation, and the
    (half-searched, identity-tap) ``subm`` map is returned.
    """

    def build() -> GeneratedSupport:
        out_coords, out_cache = coarsened_support(cache, coords, stride, op_stride)
        out_stride = geometry.forward_stride(stride, op_stride)
        if geometry.is_submanifold_relation(kernel_size, op_stride, padding):
            kmap = subm_map(cache, coords, stride, kernel_size, dilation)
        else:
            index = _index(cache, coords, stride)
            target = _logical(out_coords, out_stride)
            kmap = _centred_map(
                index, target, op_stride, geometry.centred_shifts(kernel_size, padding, dilation)
            )
        generated = GeneratedSupport(
            coords=out_coords, stride=out_stride, cache=out_cache, kmap=kmap
        )
        return generated

    key = ("conv", kernel_size, op_stride, padding, dilation)
    return cached_relation(cache.relations, key, GeneratedSupport, build)


def transpose_support(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> GeneratedSupport:
    """Output support and map of a transposed conv: every ``o = c s - p + k d``; stride t/s."""
    out_stride = geometry.transposed_stride(stride, op_stride, "conv_transpose3d")
    key = ("transpose", kernel_size, op_stride, padding, dilation)
    hit = cache.relations.get(key)
    if isinstance(hit, GeneratedSupport):
        return hit
    index = _index(cache, coords, stride)
    lo, hi = _box(index.space)
    out_space = KeySpace.from_bounds(
        *geometry.transposed_output_bounds(
            lo, hi, Window(kernel_size, op_stride, padding, dilation)
        )
    )
    shifts = geometry.transposed_shifts(kernel_size, padding, dilation)
    logical = _logical(coords, stride)
    return _generate(cache, key, logical, None, shifts, op_stride, False, out_stride, out_space)


# ------------------------------------------------------------- target forms


def target_conv_map(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    target_cache: SupportCache,
    target_coords: mx.array,
    target_stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> KernelMap:
    """Map of ``target_conv3d``: tap k of target o reads ``o s + off_c(k) - p`` (centred)."""

    def build() -> KernelMap:
        if target_cache is cache:
            return conv_support(
                cache, coords, stride, kernel_size, op_stride, padding, dilation
            ).kmap
        index = _index(cache, coords, stride)
        target = _logical(target_coords, target_stride)
        shifts = geometry.centred_shifts(kernel_size, padding, dilation)
        return _centred_map(index, target, op_stride, shifts)

    key = target_key("target_conv", target_cache, kernel_size, op_stride, padding, dilation)
    return cached_relation(cache.relations, key, KernelMap, build)


def target_transpose_map(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    target_cache: SupportCache,
    target_coords: mx.array,
    target_stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
) -> KernelMap:
    """Map of a transposed conv at a target's rows: tap k of o reads ``(o + p - k d) / s``.

    When the target is the input of a forward conv with the same geometry
    whose output is this input (the encoder/decoder pairing), that forward
    map is reused with its roles swapped instead of being searched again.
    """
    window = Window(kernel_size, op_stride, padding, dilation)

    def build() -> KernelMap:
        forward = target_cache.relations.get(("full", *window))
        if not isinstance(forward, GeneratedSupport) and geometry.indexed_equals_centred(
            kernel_size
        ):  # conv3d's centred rule is the indexed one for even and unit kernels
            forward = target_cache.relations.get(("conv", *window))
        if isinstance(forward, GeneratedSupport) and forward.cache is cache:
            return forward.kmap.transposed()
        index = _index(cache, coords, stride)
        target = _logical(target_coords, target_stride)
        m = int(target.shape[0])
        s = mx.array((1, *op_stride), dtype=mx.int32)
        shifts = geometry.full_shifts(kernel_size, padding, dilation)
        keys = []
        for shift, valid in zip(shifts, _divisible(target, shifts, op_stride), strict=True):
            keys.append(mx.where(valid, index.space.pack(_shifted(target, shift) // s), -1))
        found, rows = index.find_keys(mx.stack(keys))
        out_rows = mx.broadcast_to(mx.arange(m, dtype=mx.int32), found.shape)
        return _assemble(found, rows, out_rows, index.size, m)

    key = target_key("target_transpose", target_cache, kernel_size, op_stride, padding, dilation)
    return cached_relation(cache.relations, key, KernelMap, build)


def kernel_volume(kernel_size: Triple) -> int:
    """Number of taps (product of the kernel sizes)."""
    return math.prod(kernel_size)


__all__ = [
    "GeneratedSupport",
    "KernelMap",
    "coarsened_support",
    "conv_support",
    "full_conv_support",
    "kernel_volume",
    "subm_map",
    "target_conv_map",
    "target_transpose_map",
    "transpose_support",
]
