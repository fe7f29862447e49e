"""Launchers for the kernels of :mod:`mlx_lattice.cuda.source` through ``mx.fast.cuda_kernel``.

Each launcher takes and returns MLX arrays and adds one node to MLX's lazy
graph: nothing here evaluates or reads back (but :func:`generate_all`'s row
counts), so ``mx.compile`` and asynchronous evaluation see ordinary array
operations.  A launch whose rows are empty is not made (MLX's CUDA custom
kernels must not see empty arrays): the launcher returns the result directly.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from mlx_lattice.cuda.source import HEADER, KERNELS

__all__ = [
    "Generation",
    "conv_rows",
    "generate",
    "generate_all",
    "hash_build",
    "hash_query",
    "invert",
    "pool_grad",
    "pool_rows",
    "table_size",
    "tap_order",
    "weight_grad",
]

_COMPILED: dict[str, Any] = {}
_MMA = os.environ.get("LATTICE_MLX_CUDA_MMA", "1") != "0"
"""Tensor-core conv for f16/bf16 (``LATTICE_MLX_CUDA_MMA=0``: FFMA for every dtype)."""
SORT = os.environ.get("LATTICE_MLX_CUDA_SORT", "1") != "0"
"""Whether large maps run their rows sorted by tap mask (``LATTICE_MLX_CUDA_SORT=0``: never)."""
SORT_MIN_ROWS = 16384
"""Output rows from which a map's rows are sorted (below, a sort's launches cost more)."""
SORT_MAX_TAPS = 31
"""Taps a tap mask holds (one int32)."""

TILE = 64
"""Rows and channels of one output tile of ``lt_conv`` / ``lt_conv_wgrad``."""
THREADS = 256
MMA_THREADS = 128
"""Threads of one ``lt_conv_mma`` block (four warps)."""
MMA_MAX_TAPS = 512
"""Taps ``lt_conv_mma`` lists per tile (its source's ``MAX_TAPS``); larger kernels run on FFMA."""
SLAB = 512
"""Rows of one block of ``lt_conv_wgrad`` (its source's ``SLAB``)."""


def _kernel(name: str) -> Any:
    """The compiled-on-first-use kernel object.

    MLX caches compiled kernels by name, in memory and on disk
    (``MLX_PTX_CACHE_DIR``), so the name carries a digest of the source: an
    edited kernel never meets a stale binary.
    """
    hit = _COMPILED.get(name)
    if hit is None:
        inputs, outputs, body = KERNELS[name]
        digest = hashlib.sha256((HEADER + body).encode()).hexdigest()[:10]
        hit = mx.fast.cuda_kernel(
            name=f"{name}_{digest}",
            input_names=list(inputs),
            output_names=list(outputs),
            source=body,
            header=HEADER,
            ensure_row_contiguous=True,
        )
        _COMPILED[name] = hit
    return hit


def _meta(*values: int) -> mx.array:
    return mx.array(values, dtype=mx.int32)


def _blocks(count: int, per: int) -> int:
    return max(1, -(-count // per))


def table_size(rows: int) -> int:
    """Slots of a hash table for ``rows`` keys: a power of two, load factor at most 1/2."""
    size = 64
    while size < 2 * rows:
        size *= 2
    return size


def hash_build(logical: mx.array) -> mx.array:
    """The hash table (int32 row per slot, -1 empty) of ``(N, 4)`` logical int32 rows."""
    n = int(logical.shape[0])
    size = table_size(n)
    if n == 0:  # MLX's CUDA custom kernels must not see empty arrays: no launch
        return mx.full((size,), -1, dtype=mx.int32)
    (table,) = _kernel("lt_hash_build")(
        inputs=[logical, _meta(n, size - 1)],
        output_shapes=[(size,)],
        output_dtypes=[mx.int32],
        grid=(_blocks(n, THREADS) * THREADS, 1, 1),
        threadgroup=(THREADS, 1, 1),
        init_value=-1,
    )
    out: mx.array = table
    return out


GENERATED_FAMILIES = {"coarsen": 0, "full": 1, "transposed": 2}
"""Candidate rules of :func:`generate` (``lt_candidate`` in the kernels' header)."""


@dataclass(frozen=True)
class Generation:
    """One support to generate: candidate ``i`` is input row ``i // V`` through tap ``i % V``.

    ``family`` (``coarsen``, ``full`` or ``transposed``; see ``lt_candidate``)
    names the candidate rule; ``emit`` asks for the neighbour table whose
    pairs are the candidates themselves (the full and transposed relations).
    """

    logical: mx.array
    taps: tuple[tuple[int, int, int], ...]
    family: str
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    out_stride: tuple[int, int, int]
    emit: bool


Generated = tuple[mx.array, mx.array, mx.array, mx.array | None]
"""``(rows, coords, table, nbr)`` of :func:`generate_all`."""


def generate(
    logical: mx.array,
    taps: tuple[tuple[int, int, int], ...],
    family: str,
    stride: tuple[int, int, int],
    padding: tuple[int, int, int],
    out_stride: tuple[int, int, int],
    *,
    emit: bool,
) -> Generated | None:
    """One generated support (:func:`generate_all` of one :class:`Generation`)."""
    request = Generation(logical, taps, family, stride, padding, out_stride, emit)
    return generate_all([request])[0]


def generate_all(requests: list[Generation]) -> list[Generated | None]:
    """Generated supports, each in three launches, with one host read for all of them.

    Returns per request ``(rows, coords, table, nbr)``: the distinct candidate
    rows in first-occurrence order (logical int32 and physical), the hash
    table of ``rows``, and with ``emit`` the neighbour table ``nbr (V, M)``;
    None where an emitted row's physical coordinates leave int32.

    The row counts, read together with the int32 flags, are the one host
    read: a caller that knows it will need several supports (the levels of a
    pyramid) asks for them together and synchronises once.
    """
    begun = [_gen_begin(r) for r in requests]
    counts = [d.count for d in begun if isinstance(d, _Dedup)]
    read = np.asarray(mx.concatenate(counts)).tolist() if counts else []  # the one host read
    results: list[Generated | None] = []
    for request, dedup in zip(requests, begun, strict=True):
        if not isinstance(dedup, _Dedup):  # nothing to generate
            results.append(dedup)
            continue
        rows_out, flag = int(read[0]), int(read[1])
        read = read[2:]
        results.append(None if flag > 0 else _gen_compact(request, dedup, rows_out))
    return results


@dataclass(frozen=True)
class _Dedup:
    """A generation's deduplicated candidates, its row count and int32 flag still on the device."""

    taps: mx.array
    table: mx.array
    rep: mx.array
    rank: mx.array
    meta: tuple[int, ...]
    count: mx.array


def _gen_begin(request: Generation) -> _Dedup | Generated:
    """Launch the deduplication (or return the empty result without a launch)."""
    volume = len(request.taps)
    p = int(request.logical.shape[0]) * volume
    if p == 0:
        empty = mx.zeros((0, 4), dtype=mx.int32)
        nothing = mx.zeros((volume, 0), dtype=mx.int32) if request.emit else None
        return empty, empty, mx.full((64,), -1, dtype=mx.int32), nothing
    if p >= 1 << 31:
        raise ValueError(f"generated support: {p} candidates exceed the kernels' int32 indices")
    size = table_size(min(p, int(request.logical.shape[0]) * _rows_per_input(request)))
    family = GENERATED_FAMILIES[request.family]
    head = [p, volume, size - 1, family, *request.stride, *request.padding, *request.out_stride]
    taps = mx.array(request.taps, dtype=mx.int32).reshape(volume, 3)
    grid = (_blocks(p, THREADS) * THREADS, 1, 1)
    table, wide = _kernel("lt_gen_unique")(
        inputs=[request.logical, taps, _meta(*head)],
        output_shapes=[(size,), (1,)],
        output_dtypes=[mx.int32, mx.int32],
        grid=grid,
        threadgroup=(THREADS, 1, 1),
        init_value=-1,
    )
    first, rep = _kernel("lt_gen_first")(
        inputs=[request.logical, taps, table, _meta(*head)],
        output_shapes=[(p,), (p,)],
        output_dtypes=[mx.int32, mx.int32],
        grid=grid,
        threadgroup=(THREADS, 1, 1),
    )
    rank = mx.cumsum(first)
    return _Dedup(taps, table, rep, rank, tuple(head), mx.concatenate([rank[-1:], wide]))


def _rows_per_input(request: Generation) -> int:
    """The most distinct rows one input row's candidates can be: the table's load bound.

    A full-relation candidate is a row only where ``c + p - t`` divides by the
    stride, so one input's rows are the taps of one residue class of
    ``t mod s``: 8 of the 27 taps of a 3x3x3 stride-2 kernel. Sizing the table
    for those, not for every candidate, makes it a quarter as large.
    """
    if request.family != "full":  # coarsen: one tap; transposed: every tap is a row
        return len(request.taps)
    s = request.stride
    classes = Counter((t[0] % s[0], t[1] % s[1], t[2] % s[2]) for t in request.taps)
    return max(classes.values())


def _gen_compact(request: Generation, dedup: _Dedup, rows_out: int) -> Generated:
    """The representatives' rows, coordinates and table (and neighbours) in one launch."""
    volume, emit = len(request.taps), request.emit
    p, size = dedup.meta[0], dedup.meta[2] + 1
    shapes = [(rows_out, 4), (rows_out, 4), (size,), (volume, rows_out) if emit else (1,)]
    rows, coords, out_table, nbr = _kernel("lt_gen_compact")(
        inputs=[
            request.logical,
            dedup.taps,
            dedup.table,
            dedup.rep,
            dedup.rank,
            _meta(*dedup.meta, rows_out, int(emit)),
        ],
        output_shapes=shapes,
        output_dtypes=[mx.int32] * 4,
        grid=(_blocks(max(p, size), THREADS) * THREADS, 1, 1),
        threadgroup=(THREADS, 1, 1),
        init_value=-1,
    )
    return rows, coords, out_table, nbr if emit else None


def hash_query(
    table: mx.array,
    logical: mx.array,
    queries: mx.array,
    offsets: mx.array,
    mul: tuple[int, int, int],
    div: tuple[int, int, int],
    *,
    mirror: bool = False,
) -> mx.array:
    """``nbr (V, M)``: the table row at ``(q * mul + off_k) / div`` (exact) per query, or -1.

    ``mirror``: the queries are the table's own rows and the relation is a
    submanifold one with symmetric offsets (``off[V-1-k] = -off[k]``): half
    the taps are searched and each hit is also written as its mirror pair.
    """
    m = int(queries.shape[0])
    volume = int(offsets.shape[0])
    if m == 0:
        return mx.zeros((volume, 0), dtype=mx.int32)
    searched = (volume + 1) // 2 if mirror else volume
    meta = _meta(m, int(table.shape[0]) - 1, *mul, *div, int(mirror), volume)
    fill = {"init_value": -1} if mirror else {}  # mirrored pairs are scattered: misses stay -1
    (nbr,) = _kernel("lt_hash_query")(
        inputs=[table, logical, queries, offsets, meta],
        output_shapes=[(volume, m)],
        output_dtypes=[mx.int32],
        grid=(_blocks(m, THREADS) * THREADS, searched, 1),
        threadgroup=(THREADS, 1, 1),
        **fill,
    )
    out: mx.array = nbr
    return out


def invert(nbr: mx.array, num_in: int) -> mx.array:
    """``inv (V, N)`` with ``inv[k, nbr[k, o]] = o`` (-1 where no output reads the row)."""
    volume, m = (int(v) for v in nbr.shape)
    if m == 0 or num_in == 0:
        return mx.full((volume, num_in), -1, dtype=mx.int32)
    (inv,) = _kernel("lt_invert")(
        inputs=[nbr, _meta(m, num_in)],
        output_shapes=[(volume, num_in)],
        output_dtypes=[mx.int32],
        grid=(_blocks(m, THREADS) * THREADS, volume, 1),
        threadgroup=(THREADS, 1, 1),
        init_value=-1,
    )
    out: mx.array = inv
    return out


def tap_order(nbr: mx.array) -> mx.array | None:
    """The map's output rows sorted by tap mask (int32), or None where sorting does not pay.

    A conv tile skips a tap only when none of its 64 rows reaches it; rows in
    their support's order mix every pattern, so a tile walks nearly every tap
    for every row. Sorted by mask, a tile's rows share their taps.
    """
    volume, m = (int(v) for v in nbr.shape)
    if not SORT or m < SORT_MIN_ROWS or not 2 < volume <= SORT_MAX_TAPS:
        return None
    (mask,) = _kernel("lt_tap_mask")(
        inputs=[nbr, _meta(m, volume)],
        output_shapes=[(m,)],
        output_dtypes=[mx.int32],
        grid=(_blocks(m, THREADS) * THREADS, 1, 1),
        threadgroup=(THREADS, 1, 1),
    )
    order: mx.array = mx.argsort(mask).astype(mx.int32)
    return order


def conv_rows(
    x: mx.array, w: mx.array, bias: mx.array, nbr: mx.array, order: mx.array | None = None
) -> mx.array:
    """``y[o] = bias + sum_k x[nbr[k, o]] @ w[k]`` in f32, stored in ``x``'s dtype.

    ``x`` is ``(N, C_in)``, ``w`` is ``(V, C_in, C_out)``, ``bias`` f32 ``(C_out,)``.
    f16 and bf16 with both channel counts multiples of 8 (and at most
    ``MMA_MAX_TAPS`` taps) run on the tensor cores (f32 accumulators);
    everything else, f32 always, on FFMA. ``order`` (:func:`tap_order`):
    the tiles take their rows in that order.
    """
    volume, m = (int(v) for v in nbr.shape)
    c_in, c_out = int(w.shape[1]), int(w.shape[2])
    if m == 0 or int(x.shape[0]) == 0 or c_in == 0:  # no launch: only the bias reaches y
        return mx.broadcast_to(bias, (m, c_out)).astype(x.dtype)
    tensor_cores = (
        _MMA
        and x.dtype in (mx.float16, mx.bfloat16)
        and w.dtype == x.dtype
        and c_in % 8 == 0
        and c_out % 8 == 0
        and volume <= MMA_MAX_TAPS
    )
    threads = MMA_THREADS if tensor_cores else THREADS
    (y,) = _kernel("lt_conv_mma" if tensor_cores else "lt_conv")(
        inputs=[
            x,
            w.transpose(0, 2, 1) if tensor_cores else w,
            bias,
            nbr,
            order if order is not None else _meta(0),
            _meta(m, volume, c_in, c_out, int(order is not None)),
        ],
        template=[("T", x.dtype), ("TW", w.dtype)],
        output_shapes=[(m, c_out)],
        output_dtypes=[x.dtype],
        grid=(_blocks(m, TILE) * threads, _blocks(c_out, TILE), 1),
        threadgroup=(threads, 1, 1),
    )
    out: mx.array = y
    return out


def weight_grad(x: mx.array, dy: mx.array, nbr: mx.array) -> mx.array:
    """``dw[k] = sum_o x[nbr[k, o]]^T dy[o]``, f32 ``(V, C_in, C_out)``."""
    volume, m = (int(v) for v in nbr.shape)
    c_in, c_out = int(x.shape[1]), int(dy.shape[1])
    if m == 0 or int(x.shape[0]) == 0:
        return mx.zeros((volume, c_in, c_out), dtype=mx.float32)
    tiles_i, tiles_j = _blocks(c_in, TILE), _blocks(c_out, TILE)
    (dw,) = _kernel("lt_conv_wgrad")(
        inputs=[x, dy, nbr, _meta(m, c_in, c_out, tiles_j)],
        template=[("T", x.dtype), ("TD", dy.dtype)],
        output_shapes=[(volume, c_in, c_out)],
        output_dtypes=[mx.float32],
        grid=(_blocks(m, SLAB) * THREADS, volume, tiles_i * tiles_j),
        threadgroup=(THREADS, 1, 1),
        init_value=0,
    )
    out: mx.array = dw
    return out


POOL_MODES = {"max": 0, "sum": 1, "avg": 2}
"""``lt_pool`` reductions, by :class:`~lattice_contract.dialect.PoolMode` value."""


def _elementwise_grid(count: int) -> dict[str, tuple[int, int, int]]:
    return {"grid": (_blocks(count, THREADS) * THREADS, 1, 1), "threadgroup": (THREADS, 1, 1)}


def pool_rows(x: mx.array, nbr: mx.array, mode: str) -> mx.array:
    """``y[o]``: the ``mode`` reduction (max, sum, avg) of ``x[nbr[k, o]]`` over present taps.

    f32 inside, stored in ``x``'s dtype; a row with no present input is 0.
    """
    volume, m = (int(v) for v in nbr.shape)
    c = int(x.shape[1])
    if m == 0 or c == 0 or int(x.shape[0]) == 0:
        return mx.zeros((m, c), dtype=x.dtype)
    (y,) = _kernel("lt_pool")(
        inputs=[x, nbr, _meta(m, volume, c, POOL_MODES[mode])],
        template=[("T", x.dtype)],
        output_shapes=[(m, c)],
        output_dtypes=[x.dtype],
        **_elementwise_grid(m * c),
    )
    out: mx.array = y
    return out


def pool_grad(
    x: mx.array, y: mx.array, dy: mx.array, nbr: mx.array, inv: mx.array, mode: str
) -> mx.array:
    """The input gradient of :func:`pool_rows` (``inv``: the adjoint table ``(V, N)``).

    ``sum`` sends ``dy[o]`` to every input of o, ``avg`` divided by o's
    present inputs, ``max`` to the inputs equal to the maximum, split evenly
    among them.
    """
    volume, m = (int(v) for v in nbr.shape)
    n, c = (int(v) for v in x.shape)
    if m == 0 or n == 0 or c == 0:
        return mx.zeros((n, c), dtype=x.dtype)
    dy = dy.astype(x.dtype)
    g, count = dy, mx.zeros((1,), dtype=mx.int32)
    if mode == "max":
        (g,) = _kernel("lt_pool_share")(
            inputs=[x, y, dy, nbr, _meta(m, volume, c)],
            template=[("T", x.dtype)],
            output_shapes=[(m, c)],
            output_dtypes=[mx.float32],
            **_elementwise_grid(m * c),
        )
    elif mode == "avg":
        count = mx.sum(nbr >= 0, axis=0).astype(mx.int32)
    (dx,) = _kernel("lt_pool_grad")(
        inputs=[x, y, g, count, inv, _meta(n, volume, c, POOL_MODES[mode])],
        template=[("T", x.dtype), ("TG", g.dtype)],
        output_shapes=[(n, c)],
        output_dtypes=[x.dtype],
        **_elementwise_grid(n * c),
    )
    out: mx.array = dx
    return out
