"""Sparse convolutions: support-generating, submanifold, target and transposed.

Execution is gather → GEMM → scatter-add per kernel tap, over chunks of at
most ``_CHUNK_BYTES`` of gathered rows, so a layer holds its O(pairs) map plus
one bounded buffer and never a dense grid.  Products are summed in f32 (f64
for f64 features) whatever the storage dtype, and the result is rounded once
to the input dtype after the bias is added (``accumulation = canonical_f32``).

Forward and backward are one ``torch.autograd.Function``: autograd through
``index_select``/``mm``/``index_add_`` would save every gathered chunk for the
backward pass (O(pairs × C) memory); the function saves only the features,
the weight and the map, and re-gathers chunk by chunk in backward.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from lattice_contract.dialect import forward_stride, transposed_stride
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from torch_lattice._master import restore_weight, weight_to_save
from torch_lattice._trace import traced
from torch_lattice.kernel_map import (
    KernelMap,
    conv_map,
    full_conv_map,
    generative_transpose_map,
    subm_map,
    target_conv_map,
    target_transpose_map,
    transpose_map,
)
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.sparse import SparseTensor, Support

__all__ = [
    "conv3d",
    "conv_transpose3d",
    "full_conv3d",
    "generative_conv_transpose3d",
    "schedule",
    "subm_conv3d",
]

Triple = tuple[int, int, int]
ConvWeight = torch.Tensor | QuantizedWeight

_CHUNK_BYTES = 1 << 22
"""Upper bound of one gathered chunk on CPU (rows × channels × 4 bytes)."""

_CUDA_CHUNK_BYTES = 1 << 28
"""Upper bound of one gathered chunk on a GPU, where larger launches pay off."""


def _budget(device: torch.device) -> int:
    return _CUDA_CHUNK_BYTES if device.type == "cuda" else _CHUNK_BYTES


def _chunk_rows(channels: int, device: torch.device) -> int:
    return max(256, _budget(device) // (4 * max(channels, 1)))


def _taps_matrix(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(C_out, Kx, Ky, Kz, C_in) -> (K, C_in, C_out) views, tap k = W[:, k, :]^T."""
    c_out, c_in = weight.shape[0], weight.shape[-1]
    return weight.to(dtype).reshape(c_out, -1, c_in).permute(1, 2, 0)


_SEGMENT_BYTES = 1 << 22
"""Upper bound of each of the two per-range buffers of the segmented schedule (CPU).

A range costs one call per tap plus three, so ranges must not be tiny; but
its gathered rows are written once and read back by the GEMMs, so they should
stay in cache.  Measured single-threaded on the 100k-voxel surface scene
(AMD EPYC, 1 MiB L2, 32 MiB L3): 16 MiB buffers ran the 3x3x3 subm layer at
32 channels in 80 ms and at 64 in 202 ms, 2-4 MiB in 50-57 and 160-171 ms,
1 MiB in 65 and 192 ms (call overhead takes over below).
"""

_SCHEDULES = ("auto", "tap_major", "output_major", "segmented", "triton")
_SCHEDULE: ContextVar[str] = ContextVar("torch_lattice_conv_schedule", default="auto")


@contextmanager
def schedule(name: str) -> Iterator[None]:
    """Force the conv execution schedule inside the block (tests and benchmarks).

    ``"auto"`` (the default) picks per map, and runs CUDA tensors on the
    Triton kernels of :mod:`torch_lattice.triton`; ``"tap_major"``,
    ``"output_major"`` and ``"segmented"`` force one reference schedule
    (``"segmented"`` only where the map allows it, see :func:`_segmented_ok`;
    elsewhere it runs tap-major); ``"triton"`` forces the Triton kernels on
    any device (on CPU under ``TRITON_INTERPRET=1``).  Results agree up to
    summation order.
    """
    if name not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}, got {name!r}")
    token = _SCHEDULE.set(name)
    try:
        yield
    finally:
        _SCHEDULE.reset(token)


def _triton_wanted(x: SparseTensor) -> bool:
    """Whether this layer runs on the Triton kernels: forced, or CUDA f16/bf16/f32 under auto."""
    forced = _SCHEDULE.get()
    if forced != "auto":
        return forced == "triton"
    return (
        x.device.type == "cuda"
        and x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        and importlib.util.find_spec("triton") is not None
    )


def _on_triton(
    kind: str,
    x: SparseTensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    geometry: tuple[Triple, Triple, Triple, Triple],
    target: SparseTensor | None = None,
) -> SparseTensor:
    """Run one checked conv layer on :mod:`torch_lattice.triton` (imported on first use)."""
    from torch_lattice.triton import sparse_conv

    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but the input on {x.device}")
    support = None if target is None else target.support
    return sparse_conv(kind, x, weight, bias, *geometry, target=support)


def _segmented_ok(kmap: KernelMap, feats: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether the segmented schedule can run this map: sorted outputs, CPU, no widening."""
    return (
        kmap.outputs_sorted
        and feats.device.type == "cpu"
        and feats.dtype == dtype
        and kmap.num_out > 0
        and kmap.in_idx.numel() > 0
    )


def _pick(kmap: KernelMap, feats: torch.Tensor, dtype: torch.dtype) -> str:
    """The schedule for this map: the forced one where possible, else by device and fill.

    Measured single-threaded on the 100k-voxel surface scene (fill 0.47), the
    segmented schedule beats tap-major by ~1.5x and output-major needs a fill
    above ~0.8 to beat it (output-major spends a gather and a GEMM row on every
    empty slot, segmented about 1.2 of them per real pair).

    The choice never depends on the thread count.  The schedules sum a row's
    products in different orders, so picking by thread count (as an earlier
    version did) made CPU results differ between 1 and 2 threads; each
    schedule on its own is thread-count independent (its GEMMs, gathers,
    ``index_add_`` and ``embedding_bag`` sum every row in a fixed order), so
    a fixed choice gives bitwise-equal results at any ``torch.set_num_threads``.
    """
    forced = _SCHEDULE.get()
    segmented = _segmented_ok(kmap, feats, dtype)
    if forced == "segmented":
        return "segmented" if segmented else "tap_major"
    if forced == "auto" and segmented and kmap.fill < 0.8:
        return "segmented"
    if _output_major(kmap, feats.device):
        return "output_major"
    return "segmented" if segmented and forced == "auto" else "tap_major"


def _output_major(kmap: KernelMap, device: torch.device) -> bool:
    """Whether to run the output-major (implicit GEMM) schedule for this map.

    Output-major gathers every (output, tap) slot, empty ones reading a zero
    row, and multiplies by the stacked weights in one GEMM per block: no
    scatter, deterministic, and it parallelises across threads and GPU blocks,
    but it spends GEMM work on empty slots.  Tap-major (gather → GEMM →
    scatter-add per tap) touches only real pairs but its scatter is serial on
    CPU and atomic on GPU.  Measured on a 100k-voxel surface scene (fill 0.47):
    one CPU thread favours tap-major slightly, several threads and CUDA favour
    output-major clearly.  The CPU threshold is the single-thread one whatever
    the thread count, so that results do not depend on it (see :func:`_pick`).
    """
    if kmap.num_out == 0:
        return False
    forced = _SCHEDULE.get()
    if forced != "auto":
        return forced == "output_major"
    if kmap.volume == 1:
        return False
    threshold = 0.15 if device.type == "cuda" else 0.55
    return kmap.fill >= threshold


_K_CHUNK = 128
"""Longest reduction (K) one CPU GEMM call gets; longer ones are cut (see :func:`_fixed_mm`).

MKL's sgemm splits long K axes across threads and sums the pieces in a
thread-count-dependent order: measured with torch 2.13's MKL, ``(M, K) @
(K, N)`` differs between 1, 2 and 16 threads for K >= 256 at small M and for
almost every shape at K >= 864 (the output-major schedule's K is
``volume * C_in``, 1728 for 3x3x3 at 64 channels; a weight gradient's is the
row count), and never for K <= 128.
"""

_ROW_BLOCK = 8
"""CPU GEMMs of fewer than ``_SMALL_M`` rows run on a multiple of this many rows.

On an AMD EPYC host torch 2.13's MKL gives ``(M, K) @ (K, N)`` bits that
depend on the thread count for M in 5-7, 9-11, 17-19 and 25-27 at every K
from 16 to 128 tried (the remainder rows of its 8-row blocks go another way
when threads are many); on M a multiple of 8 it agrees at 1, 2, 3, 4, 8 and
16 threads.  Rows are independent in a product, so zero rows added below and
cut off again change nothing else.
"""

_SMALL_M = 32
"""Below this many rows a CPU GEMM is padded to a multiple of ``_ROW_BLOCK`` (see there)."""


def _odd_rows(m: int) -> bool:
    """Whether a CPU GEMM of ``m`` rows must be padded to stay thread-count invariant."""
    return m < _SMALL_M and m % _ROW_BLOCK != 0


def _fixed_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` with the K axis cut into ``_K_CHUNK`` pieces summed in a fixed order.

    Every GEMM call sees K <= ``_K_CHUNK``, which MKL never splits across
    threads, and the pieces are summed in an order fixed by the shapes alone,
    so the result is bitwise the same at every thread count.  A few pieces
    (the output-major schedule's stacked taps) accumulate left to right with
    in-place ``addmm``, which costs about what one long GEMM does; many
    pieces (a weight gradient, whose K is a chunk of rows) go through batched
    GEMMs reduced by a pairwise tree of adds, in groups that keep the batch
    buffer under ``_CHUNK_BYTES``.  Zero padding of the last piece adds
    exact zeros.
    """
    m, k = a.shape
    n = b.shape[1]
    if a.is_cuda:
        return a @ b
    if _odd_rows(m):
        pad = -m % _ROW_BLOCK
        return _fixed_mm(torch.nn.functional.pad(a, (0, 0, 0, pad)), b)[:m]
    if k <= _K_CHUNK:
        return a @ b
    if k <= 16 * _K_CHUNK:
        out = a[:, :_K_CHUNK] @ b[:_K_CHUNK]
        for lo in range(_K_CHUNK, k, _K_CHUNK):
            torch.addmm(out, a[:, lo : lo + _K_CHUNK], b[lo : lo + _K_CHUNK], out=out)
        return out
    group = max(1, min(_CHUNK_BYTES // (4 * m * n), _CHUNK_BYTES // (4 * m * _K_CHUNK)))
    span = group * _K_CHUNK
    total: torch.Tensor | None = None
    for lo in range(0, k, span):
        hi = min(lo + span, k)
        pieces = -(-(hi - lo) // _K_CHUNK)
        pad = pieces * _K_CHUNK - (hi - lo)
        a_part, b_part = a[:, lo:hi], b[lo:hi]
        if pad:
            a_part = torch.nn.functional.pad(a_part, (0, pad))
            b_part = torch.nn.functional.pad(b_part, (0, 0, 0, pad))
        parts = torch.bmm(
            a_part.reshape(m, pieces, _K_CHUNK).transpose(0, 1),
            b_part.reshape(pieces, _K_CHUNK, n),
        )
        while parts.shape[0] > 1:
            if parts.shape[0] % 2:
                parts = torch.cat([parts, parts.new_zeros(1, m, n)])
            parts = parts[0::2] + parts[1::2]
        total = parts[0] if total is None else total + parts[0]
    assert total is not None
    return total


def _mm(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """a @ b summed in ``dtype`` (f32 for half storage; on CUDA without widening the inputs).

    On CPU the sum order does not depend on the thread count (:func:`_fixed_mm`).
    """
    if a.dtype == dtype:
        return _fixed_mm(a, b.to(dtype))
    if a.is_cuda and b.dtype == a.dtype:
        try:
            return torch.mm(a, b, out_dtype=dtype)
        except (TypeError, RuntimeError):
            pass
    return _fixed_mm(a.to(dtype), b.to(dtype))


def _padded(feats: torch.Tensor) -> torch.Tensor:
    return torch.cat([feats, feats.new_zeros(1, feats.shape[1])])


def _apply_output_major(
    feats: torch.Tensor, w: torch.Tensor, kmap: KernelMap, dtype: torch.dtype
) -> torch.Tensor:
    volume, c_in, c_out = w.shape
    slots = kmap.slots()
    source = _padded(feats)
    stacked = w.reshape(volume * c_in, c_out)
    out = torch.empty(kmap.num_out, c_out, dtype=dtype, device=feats.device)
    step = _chunk_rows(volume * c_in, feats.device)
    for lo in range(0, kmap.num_out, step):
        hi = min(lo + step, kmap.num_out)
        block = source.index_select(0, slots[lo:hi].reshape(-1)).reshape(hi - lo, volume * c_in)
        out[lo:hi] = _mm(block, stacked, dtype)
    return out


@dataclass(frozen=True)
class _Segments:
    """How the segmented schedule walks a map with sorted outputs (cached on the map).

    Output rows are cut into ranges ``bounds[c]:bounds[c+1]`` of at most about
    ``budget`` pairs.  Because every tap's pairs are sorted by output row, the
    pairs of one tap landing in range c are a contiguous slice of the map's
    pair arrays.  A range's pairs are laid out tap after tap in one buffer:
    ``gather[pair_bounds[c]:pair_bounds[c+1]]`` lists their input rows in that
    order (so one ``index_select`` gathers a whole range), and ``part_taps[c]``
    and ``part_sizes[c]`` give the buffer's runs, one GEMM each.  ``bag``
    lists, output row by output row, where each row's products sit in its
    range's buffer (``offsets[r]``: where row r's list starts, counted from
    its range's first entry, as ``embedding_bag`` wants), so one segmented sum
    replaces the scatter; within a row the products are listed in tap order,
    which fixes the summation order.
    """

    bounds: tuple[int, ...]
    pair_bounds: tuple[int, ...]
    part_taps: tuple[tuple[int, ...], ...]
    part_sizes: tuple[tuple[int, ...], ...]
    gather: torch.Tensor
    bag: torch.Tensor
    offsets: torch.Tensor


def _segments(kmap: KernelMap, budget: int) -> _Segments:
    """Build (or fetch) the segmented walk of a map with sorted outputs; O(pairs), vectorised.

    Every layer run on the same map (maps are cached on the support) reuses
    the plan, but the first layer on a fresh support pays for it, so it is
    built in few passes over the pairs and no per-pair int64 arrays: one
    running sum places every pair in its range's buffer, one ``cat`` of the
    map's runs lays out the gather list, and a counting sort over the taps
    (two sorted-index scatters per tap) groups the buffer positions by output
    row.  Single-threaded on the 100k-voxel surface scene's 3x3x3 subm map
    (1.17M stored pairs) it takes about 9 ms; the previous per-tap build took 12-15.
    """
    key = f"segments/{budget}"
    found = kmap.cache.get(key)
    if isinstance(found, _Segments):
        return found
    device = kmap.out_idx.device
    n = kmap.num_out
    taps = [k for k in range(kmap.volume) if kmap.starts[k + 1] > kmap.starts[k]]
    out_idx = kmap.out_idx
    total = int(out_idx.numel())
    counts = torch.bincount(out_idx, minlength=n)
    ends = torch.cumsum(counts, 0)
    # Range c ends after the last row whose inclusive pair count stays within (c+1)*budget,
    # so a range holds at most budget + (pairs of one row) pairs.
    marks = torch.arange(budget, max(total, budget), budget, device=device)
    inner = torch.searchsorted(ends, marks, right=True)
    edges = torch.cat([inner.new_zeros(1), inner, inner.new_full((1,), n)])
    edges = torch.unique_consecutive(edges)
    edges_idx = edges.to(out_idx.dtype)
    tap_start = torch.tensor([kmap.starts[k] for k in taps], dtype=torch.int64, device=device)
    # (T, R + 1): tap t's pairs in range c are cuts[t, c]:cuts[t, c + 1] of the map's arrays
    cuts = (
        torch.stack(
            [
                torch.searchsorted(out_idx[kmap.starts[k] : kmap.starts[k + 1]], edges_idx)
                for k in taps
            ]
        ).to(torch.int64)
        + tap_start[:, None]
    )
    seg = cuts[:, 1:] - cuts[:, :-1]  # (T, R)
    range_pairs = seg.sum(0)
    range_base = torch.cumsum(range_pairs, 0) - range_pairs
    # The map lists its pairs tap after tap, and a tap's pairs range after range, so
    # the (tap, range) runs are consecutive in it.  Pair j of run (t, c) sits in range
    # c's buffer at the start of tap t's run there plus j's rank in the run: j plus a
    # constant per run.  Built as a running sum (no per-pair index arrays): steps of 1,
    # with each run's first step jumping to its constant.
    shift = (torch.cumsum(seg, 0) - seg - cuts[:, :-1]).reshape(-1)
    lengths = seg.reshape(-1)
    firsts = cuts[:, :-1].reshape(-1)[lengths > 0]
    shift = shift[lengths > 0]
    step = torch.ones(total, dtype=torch.int32, device=device)
    jumps = shift.clone()
    jumps[1:] -= shift[:-1]
    step[firsts] = (jumps + 1).to(torch.int32)
    step[0] = shift[0].to(torch.int32)
    position = torch.cumsum(step, 0, dtype=torch.int32)
    # One list of the input rows to gather, range by range, tap after tap within a range:
    # the map's runs, reordered.
    runs = torch.split_with_sizes(kmap.in_idx, lengths.tolist())
    ranges = seg.shape[1]
    gather = torch.cat([runs[t * ranges + c] for c in range(ranges) for t in range(len(taps))])
    # Group the positions by output row, taps in order within a row: a counting sort,
    # tap by tap; each tap meets a row at most once and its rows increase, so both
    # scatters write sorted indices.
    fill = ends - counts
    bag = torch.empty(total, dtype=torch.int32, device=device)
    rows64 = out_idx.to(torch.int64)
    for k in taps:
        a, b = kmap.starts[k], kmap.starts[k + 1]
        rows = rows64[a:b]
        slot = fill.index_select(0, rows)
        bag.scatter_(0, slot, position[a:b])
        fill.scatter_(0, rows, slot.add_(1))
    # Each row's first product in its range's buffer (embedding_bag's offsets, range by
    # range): the row's first pair overall less the pairs of the earlier ranges.
    bounds = edges.tolist()
    row_base = torch.repeat_interleave(range_base, edges[1:] - edges[:-1], output_size=n)
    offsets = (ends - counts - row_base).to(torch.int32)
    per_range = seg.t().tolist()
    found = _Segments(
        tuple(bounds),
        tuple(torch.cat([range_base, range_pairs.sum().reshape(1)]).tolist()),
        tuple(tuple(k for k, m in zip(taps, row, strict=True) if m) for row in per_range),
        tuple(tuple(m for m in row if m) for row in per_range),
        gather,
        bag,
        offsets,
    )
    kmap.cache[key] = found
    return found


def _apply_segmented(
    feats: torch.Tensor, w: torch.Tensor, kmap: KernelMap, dtype: torch.dtype
) -> torch.Tensor:
    """Gather a range's pairs at once → GEMM per tap → one segmented sum per output range.

    No scatter: ``index_add_`` costs ~60 ns per row on CPU, ``embedding_bag``
    (a vectorised segmented sum) ~5-12 ns per pair.  One ``index_select`` per
    range (not one per tap and range) halves the Python-side call count.  The
    identity tap of a submanifold map is one dense GEMM per range added onto
    the sums.  Each product row is one GEMM row and each output row sums its
    products in tap order, whatever the thread count.
    """
    c_in, c_out = w.shape[1], w.shape[2]
    plan = _segments(kmap, max(256, _SEGMENT_BYTES // (4 * max(c_in, c_out, 1))))
    out = torch.empty(kmap.num_out, c_out, dtype=dtype, device=feats.device)
    room = max(b - a for a, b in zip(plan.pair_bounds, plan.pair_bounds[1:], strict=False))
    gathered = feats.new_empty(room, c_in)
    products = feats.new_empty(room, c_out)
    identity = kmap.identity_tap
    taps_w = w.unbind(0)
    plain = c_in <= _K_CHUNK
    for c in range(len(plan.bounds) - 1):
        lo, hi = plan.bounds[c], plan.bounds[c + 1]
        base, end = plan.pair_bounds[c], plan.pair_bounds[c + 1]
        if end > base:
            rows_in, rows_out = gathered[: end - base], products[: end - base]
            torch.index_select(feats, 0, plan.gather[base:end], out=rows_in)
            sizes = plan.part_sizes[c]
            # one split per buffer instead of two slices per tap: Python-side cost per
            # range matters at 26 taps
            for k, m, x_k, y_k in zip(
                plan.part_taps[c],
                sizes,
                rows_in.split_with_sizes(sizes),
                rows_out.split_with_sizes(sizes),
                strict=True,
            ):
                if plain and not _odd_rows(m):
                    torch.mm(x_k, taps_w[k], out=y_k)
                else:
                    y_k.copy_(_fixed_mm(x_k, taps_w[k]))
            sums = torch.nn.functional.embedding_bag(
                plan.bag[base:end], rows_out, plan.offsets[lo:hi], mode="sum"
            )
        else:
            sums = out.new_zeros(hi - lo, c_out)
        if identity is not None and c_in <= _K_CHUNK and not _odd_rows(hi - lo):
            torch.addmm(sums, feats[lo:hi], w[identity], out=out[lo:hi])
        elif identity is not None:
            out[lo:hi] = sums + _fixed_mm(feats[lo:hi], w[identity])
        else:
            out[lo:hi] = sums
    return out


def _apply(
    feats: torch.Tensor, w: torch.Tensor, kmap: KernelMap, num_out: int, dtype: torch.dtype
) -> torch.Tensor:
    """sum over taps and pairs of ``feats[in] @ w[k]`` into ``num_out`` rows, in ``dtype``."""
    chosen = _pick(kmap, feats, dtype)
    if chosen == "output_major":
        return _apply_output_major(feats, w, kmap, dtype)
    if chosen == "segmented":
        return _apply_segmented(feats, w, kmap, dtype)
    c_out = w.shape[2]
    if kmap.identity_tap is not None:
        out = _mm(feats, w[kmap.identity_tap], dtype)
    else:
        out = torch.zeros(num_out, c_out, dtype=dtype, device=feats.device)
    step = _chunk_rows(max(feats.shape[1], c_out), feats.device)
    for k in range(kmap.volume):
        a, b = kmap.starts[k], kmap.starts[k + 1]
        wk = w[k]
        for lo in range(a, b, step):
            hi = min(lo + step, b)
            gathered = feats.index_select(0, kmap.in_idx[lo:hi])
            # index_add_ runs about twice as fast on CPU with int64 indices as
            # with the map's int32 ones; widening one chunk at a time is cheap.
            rows = kmap.out_idx[lo:hi].to(torch.int64)
            out.index_add_(0, rows, _mm(gathered, wk, dtype))
    return out


def _weight_grad(
    feats: torch.Tensor, grad: torch.Tensor, kmap: KernelMap, shape: torch.Size, dtype: torch.dtype
) -> torch.Tensor:
    """dL/dW as (C_out, Kx, Ky, Kz, C_in): gathered inputs^T @ output gradients."""
    c_in, c_out = feats.shape[1], grad.shape[1]
    volume = kmap.volume
    if _output_major(kmap, feats.device):
        slots = kmap.slots()
        source = _padded(feats)
        gw = torch.zeros(volume * c_in, c_out, dtype=dtype, device=feats.device)
        step = _chunk_rows(volume * c_in, feats.device)
        for lo in range(0, kmap.num_out, step):
            hi = min(lo + step, kmap.num_out)
            block = source.index_select(0, slots[lo:hi].reshape(-1)).reshape(hi - lo, -1)
            gw += _mm(block.t(), grad[lo:hi], dtype)
        return gw.reshape(volume, c_in, c_out).permute(2, 0, 1).reshape(shape)
    gw = torch.zeros(volume, c_in, c_out, dtype=dtype, device=feats.device)
    if kmap.identity_tap is not None:
        gw[kmap.identity_tap] = _mm(feats.t(), grad, dtype)
    step = _chunk_rows(max(c_in, c_out), feats.device)
    for k in range(volume):
        a, b = kmap.starts[k], kmap.starts[k + 1]
        for lo in range(a, b, step):
            hi = min(lo + step, b)
            x = feats.index_select(0, kmap.in_idx[lo:hi])
            g = grad.index_select(0, kmap.out_idx[lo:hi])
            gw[k] += _mm(x.t(), g, dtype)
    return gw.permute(2, 0, 1).reshape(shape)


class _SparseConvFunction(torch.autograd.Function):
    """out[o] = sum over pairs (c, o, k) of W_k @ x[c], returned in the accumulation dtype."""

    @staticmethod
    def forward(
        ctx: Any, feats: torch.Tensor, weight: torch.Tensor, kmap: KernelMap
    ) -> torch.Tensor:
        dtype = compute_dtype(feats.dtype)
        # On a GPU, half features with half weights multiply in half and sum in f32
        # (mm with out_dtype); everywhere else both operands are widened first.
        same = feats.is_cuda and weight.dtype == feats.dtype
        w = _taps_matrix(weight, feats.dtype if same else dtype)
        out = _apply(feats, w, kmap, kmap.num_out, dtype)
        saved, ctx.weight_dtype = weight_to_save(weight)  # an autocast copy saves its master
        ctx.save_for_backward(feats, saved)
        ctx.kmap = kmap
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        feats, saved = ctx.saved_tensors
        weight = restore_weight(saved, ctx.weight_dtype)
        kmap: KernelMap = ctx.kmap
        dtype = compute_dtype(feats.dtype)
        grad = grad.to(dtype).contiguous()
        grad_feats = grad_weight = None
        if ctx.needs_input_grad[0]:
            wt = _taps_matrix(weight, dtype).transpose(1, 2)
            grad_feats = _apply(grad, wt, kmap.transposed(), kmap.num_in, dtype).to(feats.dtype)
        if ctx.needs_input_grad[1]:
            grad_weight = _weight_grad(feats, grad, kmap, weight.shape, dtype).to(weight.dtype)
        return grad_feats, grad_weight, None


def _check_weight(
    weight: Any, bias: Any, kernel: Triple, c_in: int, op: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(weight, QuantizedWeight):
        try:
            dense = weight.dequantize_as((weight.out_channels, *kernel, c_in))
        except ValueError as error:
            raise ValueError(f"{op}: {error}") from None
    elif isinstance(weight, torch.Tensor):
        if not weight.is_floating_point():
            raise op_errors.weight_dtype(op, weight.dtype)
        dense = weight
    else:
        raise TypeError(
            f"{op}: weight must be a torch.Tensor or QuantizedWeight, got {type(weight).__name__}"
        )
    if dense.ndim != 5 or tuple(dense.shape[1:4]) != kernel or dense.shape[4] != c_in:
        raise op_errors.conv_weight_shape(op, dense.shape, kernel, c_in)
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
            raise TypeError(f"{op}: bias must be a float tensor of shape (C_out,) or None")
        if tuple(bias.shape) != (dense.shape[0],):
            raise op_errors.channel_vector_shape(op, "bias", bias.shape, dense.shape[0])
    return dense, bias


def _execute(
    x: SparseTensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    kmap: KernelMap,
    out_support: Support,
) -> SparseTensor:
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but the input on {x.device}")
    out: torch.Tensor = _SparseConvFunction.apply(x.feats, weight, kmap)  # type: ignore[no-untyped-call]
    if bias is not None:
        out = out + bias.to(out.dtype)
    return SparseTensor._make(out_support, out.to(x.dtype))


def _check_target(
    target: Any, x: SparseTensor, expected: Triple, op: str, rule: str = "input stride / stride"
) -> SparseTensor:
    checked = require_sparse(target, op, "coordinates")
    if checked.stride != expected:
        raise op_errors.target_stride_mismatch(op, checked.stride, expected, rule)
    if checked.device != x.device:
        raise ValueError(f"{op}: the target is on {checked.device}, the input on {x.device}")
    return checked


def _conv3d(input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
    k, s, p, d = api.window(attrs)
    x = require_sparse(input, "conv3d")
    w, b = _check_weight(weight, bias, k, x.num_channels, "conv3d")
    out_stride = forward_stride(x.stride, s)
    if coordinates is not None:
        target = _check_target(coordinates, x, out_stride, "conv3d", "input stride * stride")
        if _triton_wanted(x):
            return _on_triton("centred", x, w, b, (k, s, p, d), target)
        kmap = target_conv_map(x.support, target.support, k, s, p, d)
        return _execute(x, w, b, kmap, target.support)
    if _triton_wanted(x):
        return _on_triton("centred", x, w, b, (k, s, p, d))
    out_support, kmap = conv_map(x.support, k, s, p, d)
    return _execute(x, w, b, kmap, out_support)


conv3d: sig.Conv3d[SparseTensor, torch.Tensor, ConvWeight] = implement(
    "conv3d", _conv3d, around=traced("conv3d")
)


def _full_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    k, s, p, d = api.window(attrs)
    x = require_sparse(input, "full_conv3d")
    w, b = _check_weight(weight, bias, k, x.num_channels, "full_conv3d")
    if _triton_wanted(x):
        return _on_triton("indexed", x, w, b, (k, s, p, d))
    out_support, kmap = full_conv_map(x.support, k, s, p, d)
    return _execute(x, w, b, kmap, out_support)


full_conv3d: sig.FullConv3d[SparseTensor, torch.Tensor, ConvWeight] = implement(
    "full_conv3d", _full_conv3d, around=traced("full_conv3d")
)


def _subm_conv3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    k, _, _, d = api.window(attrs)
    x = require_sparse(input, "subm_conv3d")
    w, b = _check_weight(weight, bias, k, x.num_channels, "subm_conv3d")
    if _triton_wanted(x):
        return _on_triton("subm", x, w, b, (k, (1, 1, 1), (0, 0, 0), d))
    kmap = subm_map(x.support, k, d)
    return _execute(x, w, b, kmap, x.support)


subm_conv3d: sig.SubmConv3d[SparseTensor, torch.Tensor, ConvWeight] = implement(
    "subm_conv3d", _subm_conv3d, around=traced("subm_conv3d")
)


def _conv_transpose3d(
    input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs
) -> SparseTensor:
    k, s, p, d = api.window(attrs)
    x = require_sparse(input, "conv_transpose3d")
    w, b = _check_weight(weight, bias, k, x.num_channels, "conv_transpose3d")
    out_stride = transposed_stride(x.stride, s, "conv_transpose3d")
    if coordinates is not None:
        target = _check_target(coordinates, x, out_stride, "conv_transpose3d")
        if _triton_wanted(x):
            return _on_triton("transpose", x, w, b, (k, s, p, d), target)
        kmap = target_transpose_map(x.support, target.support, k, s, p, d)
        return _execute(x, w, b, kmap, target.support)
    if _triton_wanted(x):
        return _on_triton("transpose", x, w, b, (k, s, p, d))
    out_support, kmap = transpose_map(x.support, k, s, p, d)
    return _execute(x, w, b, kmap, out_support)


conv_transpose3d: sig.ConvTranspose3d[SparseTensor, torch.Tensor, ConvWeight] = implement(
    "conv_transpose3d", _conv_transpose3d, around=traced("conv_transpose3d")
)


def _generative_conv_transpose3d(input: Any, weight: Any, bias: Any, attrs: Attrs) -> SparseTensor:
    k, s, _, _ = api.window(attrs)
    x = require_sparse(input, "generative_conv_transpose3d")
    w, b = _check_weight(weight, bias, k, x.num_channels, "generative_conv_transpose3d")
    transposed_stride(x.stride, s, "generative_conv_transpose3d")
    if _triton_wanted(x):
        return _on_triton("transpose", x, w, b, (k, s, (0, 0, 0), (1, 1, 1)))
    out_support, kmap = generative_transpose_map(x.support, k, s)
    return _execute(x, w, b, kmap, out_support)


generative_conv_transpose3d: sig.GenerativeConvTranspose3d[
    SparseTensor, torch.Tensor, ConvWeight
] = implement(
    "generative_conv_transpose3d",
    _generative_conv_transpose3d,
    around=traced("generative_conv_transpose3d"),
)
