"""Kernel maps built on the GPU for MLX's CUDA backend.

The generic :mod:`mlx_lattice.kernel_map` (the CPU and Metal path, and the
reference these maps are tested against) builds per-tap pair lists with
sorted-key searches and reads tap counts back to the host.  Here every
relation is one output-stationary neighbour table ``nbr[k, o]`` (the input
row tap k of output o reads, or -1), filled by hashing: the input support's
rows go into an open-addressing table once (memoised on its
:class:`~mlx_lattice.coords.SupportCache`), and each relation of
``docs/semantics.md`` is a query ``c = (o * mul + off_k) / div``:

==========================  =====  =====  ===========================
relation                    mul    div    off_k
==========================  =====  =====  ===========================
submanifold                 1      1      ``(k - (K-1)//2) d``
forward (centred)           s      1      ``off_c(k) - p``
full (indexed)              s      1      ``k d - p``
transposed                  1      s      ``p - k d`` (exact division)
==========================  =====  =====  ===========================

Supports that an op generates (strided ``conv3d``, ``full_conv3d``,
transposed and generative convs) are the distinct candidate rows of every
(input, tap) pair, deduplicated by hashing (no sort) in three launches
(:func:`~mlx_lattice.cuda.kernels.generate`) and kept in first-occurrence
order (input row, then tap): deterministic, but not the generic path's key
order; row order is not part of the contract (docs/semantics.md).  The
deduplication table becomes the output's hash table, and for the full and
transposed relations, whose pairs are exactly the candidates, the last launch
writes the neighbour table as well.  A coarsened support (strided ``conv3d``
and ``pool3d``) is generated together with the next coarser levels
(:data:`PYRAMID_LEVELS` in all), which a U-Net's encoder asks for next.  The
row counts are the only values read back, once per generation, together with
the int32 range flags: when an emitted coordinate leaves int32 the generic
builder is called to raise the contract's
:class:`~lattice_contract.dialect.coord_range.Int32CoordinateError` with its
full message.  Memory: ``V * M`` int32 per map (and as many for its adjoint,
built only when a gradient needs it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx
from lattice_contract.dialect import (
    INT32_MAX,
    Triple,
    centred_tap_offsets,
    forward_stride,
    subm_offsets,
    tap_offsets,
)

from mlx_lattice import kernel_map as generic
from mlx_lattice.coords import SupportCache
from mlx_lattice.cuda import kernels

__all__ = [
    "PYRAMID_LEVELS",
    "Coarsened",
    "DeviceMap",
    "DeviceSupport",
    "Relation",
    "relation",
    "subm_map",
    "support_and_map",
    "target_map",
]


@dataclass
class DeviceMap:
    """``nbr (V, M)``: for output row o and tap k the input row read, or -1."""

    nbr: mx.array
    num_in: int
    _inverse: list[mx.array] = field(default_factory=list)
    _order: list[mx.array | None] = field(default_factory=list)

    @property
    def num_out(self) -> int:
        """Output rows M."""
        return int(self.nbr.shape[1])

    def order(self) -> mx.array | None:
        """The output rows sorted by tap mask, for the conv's tiles (None: rows as they are)."""
        if not self._order:
            self._order.append(kernels.tap_order(self.nbr))
        return self._order[0]

    def inverse(self) -> mx.array:
        """The adjoint table ``(V, N)``: the output row that reads input c through tap k."""
        if not self._inverse:
            self._inverse.append(kernels.invert(self.nbr, self.num_in))
        return self._inverse[0]


@dataclass(frozen=True)
class DeviceSupport:
    """An output support (physical rows, stride, cache) with its map."""

    coords: mx.array
    stride: Triple
    cache: SupportCache
    dmap: DeviceMap


@dataclass(frozen=True)
class Relation:
    """One relation ``c = (o * mul + off_k) / div`` of docs/semantics.md."""

    offsets: tuple[Triple, ...]
    mul: Triple
    div: Triple


def relation(
    family: str, kernel_size: Triple, op_stride: Triple, padding: Triple, dilation: Triple
) -> Relation:
    """The query of one op family: ``subm``, ``forward``, ``full`` or ``transposed``."""
    one = (1, 1, 1)
    if family == "subm":
        return Relation(tuple(subm_offsets(kernel_size, dilation)), one, one)
    if family == "forward":
        offs = centred_tap_offsets(kernel_size, dilation)
        return Relation(tuple(_minus(o, padding) for o in offs), op_stride, one)
    indexed = tap_offsets(kernel_size, dilation)
    if family == "full":
        return Relation(tuple(_minus(o, padding) for o in indexed), op_stride, one)
    if family == "transposed":
        return Relation(tuple(_minus(padding, o) for o in indexed), one, op_stride)
    raise ValueError(f"unknown relation family {family!r}")


def _minus(a: Triple, b: Triple) -> Triple:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _logical(coords: mx.array, stride: Triple) -> mx.array:
    if stride == (1, 1, 1):
        return coords
    return coords // mx.array((1, *stride), dtype=mx.int32)


def _table(cache: SupportCache, coords: mx.array, stride: Triple) -> tuple[mx.array, mx.array]:
    """``(table, logical rows)`` of a support, built on the device once per cache."""
    hit = cache.relations.get(("cuda", "table"))
    if isinstance(hit, tuple):
        return hit
    logical = _logical(coords, stride)
    found = (kernels.hash_build(logical), logical)
    cache.relations[("cuda", "table")] = found
    return found


def _query(
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    queries: mx.array,
    rel: Relation,
    mirror: bool = False,
) -> DeviceMap:
    """The relation's map at ``queries``; ``mirror``: the queries are the table's own rows."""
    table, logical = _table(cache, coords, stride)
    offsets = mx.array(rel.offsets, dtype=mx.int32).reshape(len(rel.offsets), 3)
    nbr = kernels.hash_query(
        table, logical, logical if mirror else queries, offsets, rel.mul, rel.div, mirror=mirror
    )
    return DeviceMap(nbr=nbr, num_in=int(coords.shape[0]))


def _symmetric(rel: Relation) -> bool:
    """Whether tap ``V-1-k`` undoes tap ``k`` (odd kernel sizes: every subm relation in use)."""
    one = (1, 1, 1)
    offs = rel.offsets
    return (
        rel.mul == one
        and rel.div == one
        and all(_minus((0, 0, 0), a) == b for a, b in zip(offs, reversed(offs), strict=True))
    )


def subm_map(
    key: tuple[object, ...], cache: SupportCache, coords: mx.array, stride: Triple, rel: Relation
) -> DeviceMap:
    """The submanifold map of a support onto itself, memoised on it.

    With symmetric offsets only the taps up to the centre are searched and
    the others written as mirror pairs, the centre tap being the identity:
    13 hash searches a row for 3x3x3 instead of 27.
    """
    return target_map(key, cache, coords, stride, coords, stride, rel, mirror=_symmetric(rel))


def target_map(
    key: tuple[object, ...],
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    target_coords: mx.array,
    target_stride: Triple,
    rel: Relation,
    *,
    mirror: bool = False,
) -> DeviceMap:
    """The map of a relation evaluated at given output rows (subm, target forms), memoised.

    ``mirror`` (:func:`subm_map`): the target is the input support itself and
    the relation symmetric.
    """
    hit = cache.relations.get(("cuda", *key))
    if isinstance(hit, DeviceMap):
        return hit
    queries = _logical(target_coords, target_stride)
    dmap = _query(cache, coords, stride, queries, rel, mirror)
    cache.relations[("cuda", *key)] = dmap
    return dmap


def paired_transpose(
    cache: SupportCache, target_cache: SupportCache, geometry: tuple[Triple, Triple, Triple, Triple]
) -> DeviceMap | None:
    """The map of a target transposed conv whose target produced this input by a forward conv.

    In the encoder/decoder pairing the transposed relation ``o = c s - p + k d``
    at the target's rows has exactly the pairs of the forward map that made the
    coarse input (the full relation, or conv3d's centred one when every kernel
    size is even or 1, where it is the indexed one), roles swapped: the
    adjoint table of that map, one scatter instead of a search.
    """
    families = ["full"]
    if all(k % 2 == 0 or k == 1 for k in geometry[0]):
        families.append("forward")
    for family in families:
        hit = target_cache.relations.get(("cuda", "support", family, *geometry))
        if isinstance(hit, DeviceSupport) and hit.cache is cache:
            forward = hit.dmap
            return DeviceMap(forward.inverse(), forward.num_out, [forward.nbr])
    return None


PYRAMID_LEVELS = 4
"""Coarsened supports generated together, with one host read: the one asked for and
the three coarser levels below it (a four-level U-Net's encoder)."""


@dataclass(frozen=True)
class Coarsened:
    """A coarsened support: logical rows, physical coordinates, and its cache (with its table)."""

    rows: mx.array
    coords: mx.array
    cache: SupportCache


def _coarsened(
    cache: SupportCache, coords: mx.array, stride: Triple, op_stride: Triple
) -> Coarsened | None:
    """The support ``floor(c / op_stride)`` of a strided conv3d or pool, memoised on the input.

    Coarsening composes (``floor(floor(c / s) / s) = floor(c / s^2)``, and the
    first-occurrence order of a level is the same whether it is counted from
    the level above or from this input), so the next coarser levels are
    generated from this input in the same pass and memoised on each level's
    cache: a U-Net's encoder reads its row counts back once, not once a
    level.  None when the support asked for leaves int32 (a coarser level
    that does is not kept, and none is asked for whose stride leaves int32:
    the kernels take their strides as int32).
    """
    key = ("cuda", "coarsened", op_stride)
    hit = cache.relations.get(key)
    if isinstance(hit, Coarsened):
        return hit
    logical = _logical(coords, stride)
    requests: list[kernels.Generation] = []
    factor, out_stride = (1, 1, 1), stride
    for _ in range(PYRAMID_LEVELS):  # level l: the input coarsened by s^l, at stride t * s^l
        factor = forward_stride(factor, op_stride)
        out_stride = forward_stride(out_stride, op_stride)
        if requests and max(out_stride) > INT32_MAX:  # a deeper level's stride leaves int32
            break
        requests.append(
            kernels.Generation(
                logical, ((0, 0, 0),), "coarsen", factor, (0, 0, 0), out_stride, emit=False
            )
        )
    level_cache = cache
    for found in kernels.generate_all(requests):
        if found is None:
            break
        rows, out_coords, table, _ = found
        out_cache = SupportCache()
        out_cache.relations[("cuda", "table")] = (table, rows)
        level_cache.relations[key] = Coarsened(rows, out_coords, out_cache)
        level_cache = out_cache
    hit = cache.relations.get(key)
    return hit if isinstance(hit, Coarsened) else None


def support_and_map(
    family: str,
    cache: SupportCache,
    coords: mx.array,
    stride: Triple,
    kernel_size: Triple,
    op_stride: Triple,
    padding: Triple,
    dilation: Triple,
    out_stride: Triple,
) -> DeviceSupport:
    """Output support and map of a support-generating op, memoised on the input's cache.

    ``family`` is ``forward`` (conv3d: the coarsened support), ``full`` or
    ``transposed`` (conv_transpose3d and generative_conv_transpose3d).
    """
    geometry = (kernel_size, op_stride, padding, dilation)
    key = ("cuda", "support", family, *geometry)
    hit = cache.relations.get(key)
    if isinstance(hit, DeviceSupport):
        return hit
    rel = relation(family, *geometry)
    if family == "forward" and op_stride == (1, 1, 1):
        out_coords, out_cache = coords, cache
        queries = _logical(coords, stride)
        dmap = _query(cache, coords, stride, queries, rel)
    elif family == "forward":  # the coarsened support, searched with the centred relation
        coarse = _coarsened(cache, coords, stride, op_stride)
        if coarse is None:  # odd strides at the int32 limits: the full relation's error
            generic.full_conv_support(SupportCache(), coords, stride, *geometry)
            raise AssertionError("the device flagged an int32 overflow the generic path did not")
        out_coords, out_cache = coarse.coords, coarse.cache
        dmap = _query(cache, coords, stride, coarse.rows, rel)
    else:
        # full and transposed: the candidates (input row, tap) are the relation's
        # pairs, so the generating launch writes the map too
        found = kernels.generate(
            _logical(coords, stride),
            tuple(tap_offsets(kernel_size, dilation)),
            family,
            op_stride,
            padding,
            out_stride,
            emit=True,
        )
        if found is None:  # the generic builder raises the contract's int32 error, with its message
            build = (
                generic.transpose_support if family == "transposed" else generic.full_conv_support
            )
            build(SupportCache(), coords, stride, *geometry)
            raise AssertionError("the device flagged an int32 overflow the generic path did not")
        queries, out_coords, out_table, nbr = found
        assert nbr is not None  # emitted
        out_cache = SupportCache()
        out_cache.relations[("cuda", "table")] = (out_table, queries)
        dmap = DeviceMap(nbr=nbr, num_in=int(coords.shape[0]))
    generated = DeviceSupport(coords=out_coords, stride=out_stride, cache=out_cache, dmap=dmap)
    cache.relations[key] = generated
    return generated
