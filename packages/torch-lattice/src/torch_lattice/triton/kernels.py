# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (Triton jit kernels take untyped pointer and constexpr arguments.)
"""Triton kernels of the CUDA path: implicit-GEMM conv and weight gradient.

Every convolution runs through one output-stationary kernel over a *slot
table* ``slots[o, k]`` (the input row feeding output o through tap k, -1 where
none): a program owns a tile of output rows and of output channels, walks the
taps, gathers the tile's input rows straight from the feature matrix and
multiplies them by the tap's weight slice on the tensor cores, summing in f32
in registers.  Each output tile is written once, so there are no atomics and
the result does not depend on scheduling.  The input gradient is the same
kernel over the transposed table and the transposed weights; the weight
gradient walks each tap's compacted pair list (see :mod:`.maps`).  The
kernel's epilogue scales, shifts and rectifies the f32 sums before the one
store (a bias, or an eval BatchNorm and ReLU folded in by :mod:`.fuse`); how
it walks a tile's taps (all of them, or only those its rows have) is part of
the tile shape the autotune picks.

Under ``TRITON_INTERPRET=1`` (the CPU test path) the interpreter's half
precision dot products are unreliable (bf16 is wrong), so operands are widened
to f32 first; the products of f16/bf16 values are exact in f32, so the result
is the one the tensor cores give.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = [
    "F32_PRODUCTS",
    "Epilogue",
    "conv_candidates",
    "f32_products",
    "interpreting",
    "launch_conv",
    "launch_wgrad",
    "set_f32_products",
    "set_tf32",
    "tf32_enabled",
]

F32_PRODUCTS = ("ieee", "tf32x3", "tf32")
"""How f32 layers multiply: see :func:`set_f32_products`."""

_F32 = "ieee"


def set_f32_products(mode: str) -> None:
    """Choose how f32 convolutions multiply (``"ieee"`` by default, as spconv).

    ``"ieee"``: full f32 fused multiply-adds on the FP32 units (~1e-6 relative
    error).  ``"tf32x3"``: each product split into three TF32 tensor-core
    products (high x high + high x low + low x high, Triton's ``tf32x3``),
    about as accurate as ``"ieee"`` (measured 3e-7 against 1.3e-6 relative to
    a float64 evaluation on a 64-channel subm layer) at the tensor cores'
    rate.  ``"tf32"``: one TF32 product (10 mantissa bits, ~1e-3 relative
    error), the fastest.  Half and bfloat16 layers are unaffected.
    """
    global _F32
    if mode not in F32_PRODUCTS:
        raise ValueError(f"f32 products must be one of {F32_PRODUCTS}, got {mode!r}")
    _F32 = mode


def f32_products() -> str:
    """How f32 convolutions multiply now (see :func:`set_f32_products`)."""
    return _F32


def set_tf32(enabled: bool) -> None:
    """Let f32 convolutions use TF32 on the tensor cores (off by default, as spconv).

    ``set_f32_products("tf32")`` when enabled, ``"ieee"`` when not.  TF32 keeps
    10 mantissa bits: ~1e-3 relative error instead of f32's ~1e-6, for roughly
    8x the matrix rate.  Half and bfloat16 paths are unaffected.
    """
    set_f32_products("tf32" if enabled else "ieee")


def tf32_enabled() -> bool:
    """Whether f32 convolutions use single TF32 products (see :func:`set_tf32`)."""
    return _F32 == "tf32"


_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
"""Read once, when this module is imported: Triton too decides when it and the kernels load."""


def interpreting() -> bool:
    """Whether these kernels run on Triton's CPU interpreter (``TRITON_INTERPRET=1``).

    Triton fixes the mode of every kernel (its own library's included) when
    it is imported, so this is the value at import; on a machine without CUDA
    the variable must be set before ``triton`` is first imported.
    """
    return _INTERPRET


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` of host integers (grid sizes).

    ``triton.cdiv`` and ``triton.next_power_of_2`` are constexpr functions since
    Triton 3.5, about 2 us of host time a call, and an eager layer makes a few
    of these per launch: a network's forward paid hundreds of them.
    """
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n`` <= 1), see :func:`cdiv`."""
    return 1 << max(n - 1, 0).bit_length()


# --------------------------------------------------------------------------- conv


@triton.jit
def _tap_product(
    acc,
    x_ptr,
    w_ptr,
    src,
    k,
    c0,
    ck,
    cols,
    col_ok,
    c_in,
    c_out,
    WIDEN: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """acc + x[src, c0:c0+BK] @ w[k, c0:c0+BK, cols]; rows with src < 0 read zeros."""
    cc = c0 + ck
    a = tl.load(
        x_ptr + src.to(tl.int64)[:, None] * c_in + cc[None, :],
        mask=(src >= 0)[:, None] & (cc[None, :] < c_in),
        other=0.0,
    )
    b = tl.load(
        w_ptr + (k * c_in + cc[:, None]).to(tl.int64) * c_out + cols[None, :],
        mask=(cc[:, None] < c_in) & col_ok[None, :],
        other=0.0,
    )
    if WIDEN:
        return acc + tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PRECISION)
    return acc + tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _conv_kernel(
    x_ptr,  # (N_in, C_in)
    w_ptr,  # (K, C_in, C_out) contiguous
    scale_ptr,  # (C_out,) f32 or dummy: the epilogue's per-channel factor
    bias_ptr,  # (C_out,) f32 or dummy: the epilogue's per-channel shift
    slots_ptr,  # (M, K) int32
    order_ptr,  # (M,) int32/int64 output row of each tile row (rows sorted by tap pattern)
    taps_ptr,  # (tiles, K) int32 the taps present in each tile, first `count` of them (LIST)
    count_ptr,  # (tiles,) int32 how many taps each tile has (LIST)
    live_ptr,  # (1,) int32: output rows at and past it are padding, not computed (LIVE)
    out_ptr,  # (M, C_out)
    m_rows,
    c_in,
    c_out,
    K: tl.constexpr,
    HAS_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    RELU: tl.constexpr,
    REORDER: tl.constexpr,
    SKIP: tl.constexpr,
    LIST: tl.constexpr,
    LIVE: tl.constexpr,
    WIDEN: tl.constexpr,
    PRECISION: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    r = pid_m * BM + tl.arange(0, BM)
    in_range = r < m_rows
    if REORDER:
        rows = tl.load(order_ptr + r, mask=in_range, other=0).to(tl.int64)
    else:
        rows = r.to(tl.int64)
    live = in_range
    if LIVE:  # a padded support: its rows at and past live_ptr[0] are padding, skipped
        live = live & (rows < tl.load(live_ptr))
    cols = pid_n * BN + tl.arange(0, BN)
    col_ok = cols < c_out
    ck = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    if SKIP:
        # Rows come sorted by their tap pattern: a tap absent from the whole tile is
        # skipped (no loads, no products).
        for k in range(K):
            src = tl.load(slots_ptr + rows * K + k, mask=live, other=-1)
            if tl.max(src, axis=0) >= 0:
                for c0 in range(0, c_in, BK):
                    acc = _tap_product(
                        acc,
                        x_ptr,
                        w_ptr,
                        src,
                        k,
                        c0,
                        ck,
                        cols,
                        col_ok,
                        c_in,
                        c_out,
                        WIDEN,
                        PRECISION,
                    )
    elif LIST:
        # Only the taps some row of this tile has (listed per tile by _tile_taps_kernel),
        # in one flat loop, so the gathers stay pipelined as in the dense loop below.
        steps = tl.cdiv(c_in, BK)
        n = tl.load(count_ptr + pid_m)
        for t in range(n * steps):
            k = tl.load(taps_ptr + pid_m * K + t // steps)
            c0 = (t % steps) * BK
            src = tl.load(slots_ptr + rows * K + k, mask=live, other=-1)
            acc = _tap_product(
                acc, x_ptr, w_ptr, src, k, c0, ck, cols, col_ok, c_in, c_out, WIDEN, PRECISION
            )
    else:
        # One flat loop over (tap, channel block): the compiler pipelines the gathers.
        steps = tl.cdiv(c_in, BK)
        trips = K * steps
        if LIVE:  # a tile of padding only does nothing
            trips = trips * tl.max(live.to(tl.int32), axis=0)
        for t in range(trips):
            k = t // steps
            c0 = (t % steps) * BK
            src = tl.load(slots_ptr + rows * K + k, mask=live, other=-1)
            acc = _tap_product(
                acc, x_ptr, w_ptr, src, k, c0, ck, cols, col_ok, c_in, c_out, WIDEN, PRECISION
            )
    # Epilogue on the f32 sums: acc * scale + shift, then ReLU (a folded eval BatchNorm).
    if HAS_SCALE:
        acc = acc * tl.load(scale_ptr + cols, mask=col_ok, other=0.0)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    keep = live
    if LIVE:  # padding rows are written as zeros: what a padded support's padding holds
        acc = tl.where(live[:, None], acc, 0.0)
        keep = in_range
    tl.store(
        out_ptr + rows[:, None] * c_out + cols[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=keep[:, None] & col_ok[None, :],
    )


@triton.jit
def _tile_taps_kernel(
    slots_ptr,  # (M, K) int32
    order_ptr,  # (M,) rows sorted by tap pattern (REORDER), else a dummy
    taps_ptr,  # (tiles, K) int32 out: present taps first
    count_ptr,  # (tiles,) int32 out
    m_rows,
    K: tl.constexpr,
    KP: tl.constexpr,
    REORDER: tl.constexpr,
    BM: tl.constexpr,
):
    """Per tile of BM rows (sorted, or as they are): which taps any of its rows has, listed."""
    tile = tl.program_id(0)
    r = tile * BM + tl.arange(0, BM)
    live = r < m_rows
    if REORDER:  # noqa: SIM108 (a jit kernel: keep the branch explicit)
        rows = tl.load(order_ptr + r, mask=live, other=0).to(tl.int64)
    else:
        rows = r.to(tl.int64)
    ks = tl.arange(0, KP)
    src = tl.load(
        slots_ptr + rows[:, None] * K + ks[None, :],
        mask=live[:, None] & (ks < K)[None, :],
        other=-1,
    )
    present = (tl.max(src, axis=0) >= 0).to(tl.int32)
    pos = tl.cumsum(present, axis=0) - present
    tl.store(taps_ptr + tile * K + pos, ks, mask=present > 0)
    tl.store(count_ptr + tile, tl.sum(present, axis=0))


def _tile_taps(
    slots: torch.Tensor, order: torch.Tensor | None, bm: int, cache: dict[Any, Any] | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(taps, counts) of each BM-row tile of ``order`` (None: rows as they are): one launch,
    cached in ``cache``."""
    key = ("tile_taps", bm, order is not None)
    found = None if cache is None else cache.get(key)
    if found is not None:
        result: tuple[torch.Tensor, torch.Tensor] = found
        return result
    m, k = int(slots.shape[0]), int(slots.shape[1])
    tiles = cdiv(m, bm)
    taps = torch.empty(tiles, k, dtype=torch.int32, device=slots.device)
    counts = torch.empty(tiles, dtype=torch.int32, device=slots.device)
    _tile_taps_kernel[(tiles,)](
        slots,
        order if order is not None else slots,
        taps,
        counts,
        m,
        K=k,
        KP=next_pow2(k),
        REORDER=order is not None,
        BM=bm,
    )
    if cache is not None:
        cache[key] = (taps, counts)
    return taps, counts


def _pow2(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, next_pow2(max(n, 1))))


# Tile shapes tried by the autotune, per (shape class, dtype, device): rows per tile,
# warps, pipeline stages, how taps are walked.  Channel tiles follow the layer's
# channels.  The first candidate is the one taken untimed (TORCH_LATTICE_TRITON_TUNE=0).
# Tap walks: "flat" every tap of every tile (one pipelined loop); "skip" a branch per
# tap that skips taps absent from the whole tile (rows sorted by tap pattern; the
# branch stops the pipelining); "list" only the tile's present taps, listed per tile
# beforehand, in one pipelined loop.
_CONV_CANDIDATES: tuple[tuple[int, int, int, str], ...] = (
    (64, 4, 3, "flat"),
    (128, 4, 3, "flat"),
    (64, 4, 2, "skip"),
    (64, 4, 3, "list"),
)
# f32 without TF32 multiplies on the FP32 units, where the products weigh more than
# on the tensor cores, so the fewer absent taps a tile carries the better: on the
# surface scenes, sorted 32-row tiles of a 3x3x3 map hold 18 of the 27 taps (64-row
# tiles 19) for 12.7 real pairs per row.  Measured on an H200 (200k voxels, C = 96):
# 32-row listed taps 2.87 ms, 64-row flat 4.62 ms, 64-row listed 4.70 ms; at 8 taps
# 19 us against 78 us.  Hence listed taps on 32-row tiles first (for every f32
# mode: TF32 products shift the balance towards the gathers, which the listed
# taps cut as well).
_CONV_CANDIDATES_F32: tuple[tuple[int, int, int, str], ...] = (
    (32, 4, 3, "list"),
    (64, 8, 3, "list"),
    (64, 4, 3, "flat"),
    (128, 8, 3, "flat"),
)
_TUNED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _precision(dtype: torch.dtype) -> str:
    """tl.dot's input precision: the f32 mode for f32 operands (others ignore it)."""
    return _F32 if dtype == torch.float32 else "tf32"


def conv_candidates(x: torch.dtype, w: torch.dtype) -> tuple[tuple[Any, ...], ...]:
    """The tile shapes worth timing for these operand dtypes (f32 rows or half rows)."""
    return _CONV_CANDIDATES_F32 if torch.float32 in (x, w) else _CONV_CANDIDATES


@dataclass(frozen=True)
class Epilogue:
    """What the conv kernel applies to its f32 sums before the one rounding store.

    ``out = relu?(sum * scale + shift)`` per output channel: ``shift`` alone is
    a conv bias; ``scale`` and ``shift`` together are an eval-mode BatchNorm
    folded with the bias (see :mod:`torch_lattice.triton.fuse`).  Both f32,
    contiguous, ``(C_out,)``.
    """

    scale: torch.Tensor | None = None
    shift: torch.Tensor | None = None
    relu: bool = False


_PLAIN = Epilogue()


def _run_conv(
    cfg: tuple[Any, ...],
    x: torch.Tensor,
    w: torch.Tensor,
    epi: Epilogue,
    slots: torch.Tensor,
    order_of: Callable[[], torch.Tensor] | None,
    out: torch.Tensor,
    cache: dict[Any, Any] | None,
    sorted_tiles: bool = True,
    live: torch.Tensor | None = None,
) -> None:
    m, k = slots.shape
    c_in, c_out = w.shape[1], w.shape[2]
    bm, warps, stages, walk = cfg
    if order_of is None:
        walk = "flat"
    # Only a tile shape that skips taps wants the rows sorted by tap pattern (a sort);
    # without ``sorted_tiles`` it skips what the tiles of rows as they are let it skip.
    order = order_of() if walk != "flat" and order_of is not None and sorted_tiles else None
    taps, counts = slots, slots  # dummies unless the walk lists taps
    if walk == "list":
        taps, counts = _tile_taps(slots, order, bm, cache)
    bn = _pow2(c_out, 16, 128)
    bk = _pow2(c_in, 16, 64)
    widen = interpreting() or x.dtype != w.dtype
    grid = (cdiv(m, bm), cdiv(c_out, bn))
    extra: dict[str, Any] = {} if interpreting() else {"num_warps": warps, "num_stages": stages}
    _conv_kernel[grid](
        x,
        w,
        epi.scale if epi.scale is not None else out,
        epi.shift if epi.shift is not None else out,
        slots,
        order if order is not None else slots,
        taps,
        counts,
        live if live is not None else slots,
        out,
        m,
        c_in,
        c_out,
        K=k,
        HAS_SCALE=epi.scale is not None,
        HAS_BIAS=epi.shift is not None,
        RELU=epi.relu,
        REORDER=order is not None,
        SKIP=walk == "skip",
        LIST=walk == "list",
        LIVE=live is not None,
        WIDEN=widen,
        PRECISION=_precision(x.dtype),
        BM=bm,
        BN=bn,
        BK=bk,
        **extra,
    )


def launch_conv(
    x: torch.Tensor,
    w: torch.Tensor,
    slots: torch.Tensor,
    order_of: Callable[[], torch.Tensor] | None,
    out_dtype: torch.dtype,
    bias: torch.Tensor | None = None,
    epilogue: Epilogue | None = None,
    cache: dict[Any, Any] | None = None,
    config: tuple[Any, ...] | None = None,
    sorted_tiles: bool = True,
    live: torch.Tensor | None = None,
) -> torch.Tensor:
    """out[o] = sum_k x[slots[o, k]] @ w[k] (+ bias), f32 accumulation, stored in ``out_dtype``.

    ``bias`` (f32) is the plain shift; ``epilogue`` the general form (scale,
    shift, ReLU), of which a bias is the special case, so pass one or the other.
    ``order_of`` gives (on demand, cached by the caller) a permutation of the
    output rows sorted by which taps they have: it keeps the rows of one tile
    alike, so tile shapes that skip absent taps skip whole taps per tile;
    ``sorted_tiles=False`` runs those shapes on the rows as they are (no sort:
    a map used once, see :meth:`~torch_lattice.triton.maps.SlotMap.sorted_tiles`).
    ``cache`` (the map's) keeps the per-tile tap lists; ``config`` forces a
    tile shape (one of ``conv_candidates``; tests run each).  Under the
    interpreter a kernel of 27 taps walks tap lists, of 8 skips by branch and
    others run flat, so the tests run every walk.  ``live`` (int32 ``(1,)`` on
    the device, a padded support's active rows) skips the padding rows' work
    and writes them as zeros, which is what a padded support's padding holds
    (a captured training step's batch norms and loss read whole buffers);
    sorted or not, since the kernel tests each tile row's own row.
    """
    if epilogue is not None and bias is not None:
        raise ValueError("launch_conv takes a bias or an epilogue, not both (fold the bias in)")
    epi = epilogue if epilogue is not None else Epilogue(shift=bias) if bias is not None else _PLAIN
    m = int(slots.shape[0])
    c_out = int(w.shape[2])
    out = torch.empty(m, c_out, dtype=out_dtype, device=x.device)
    if m == 0 or c_out == 0:
        return out
    if int(x.shape[0]) == 0 or int(w.shape[1]) == 0:
        out.copy_(_epilogue_of_zero(epi, m, c_out, x.device))
        if live is not None:  # the bias on the live rows only
            out.mul_((torch.arange(m, device=x.device) < live).unsqueeze(1))
        return out
    if config is None and interpreting():
        volume = int(slots.shape[1])
        walk = "list" if volume == 27 else "skip" if volume == 8 else "flat"
        config = (32, 4, 1, walk)
    if config is not None:
        _run_conv(config, x, w, epi, slots, order_of, out, cache, sorted_tiles, live)
        return out
    key = (
        "conv",
        m.bit_length(),
        int(slots.shape[1]),
        int(w.shape[1]),
        c_out,
        x.dtype,
        w.dtype,
        _F32,
        x.device,
        sorted_tiles,
    )
    cfg = _TUNED.get(key)
    if cfg is None:
        cfg = _autotune(
            lambda c: _run_conv(c, x, w, epi, slots, order_of, out, cache, sorted_tiles, live),
            conv_candidates(x.dtype, w.dtype),
            key,
        )
        _TUNED[key] = cfg
    _run_conv(cfg, x, w, epi, slots, order_of, out, cache, sorted_tiles, live)
    return out


def _epilogue_of_zero(epi: Epilogue, m: int, c_out: int, device: torch.device) -> torch.Tensor:
    """The epilogue applied to all-zero sums (no input rows or no input channels)."""
    row = torch.zeros(c_out, dtype=torch.float32, device=device)
    if epi.shift is not None:
        row = row + epi.shift
    if epi.relu:
        row = row.clamp_min(0.0)
    return row.expand(m, c_out)


def _autotune(
    run: Any, candidates: tuple[tuple[Any, ...], ...], key: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The fastest candidate by median device time (a few short timed repeats each).

    ``TORCH_LATTICE_TRITON_TUNE=0`` takes the first candidate without timing
    (each candidate is a separate compile: test suites with many shapes skip
    it); ``=verbose`` prints every candidate's time per ``key``, and why one
    could not run.
    """
    mode = os.environ.get("TORCH_LATTICE_TRITON_TUNE", "1")
    if mode == "0":
        return candidates[0]
    best: tuple[float, tuple[Any, ...]] | None = None
    times = []
    for cfg in candidates:
        try:
            t = float(
                triton.testing.do_bench(
                    lambda c=cfg: run(c), warmup=3, rep=10, return_mode="median"
                )
            )
        except Exception as err:  # a tile shape that does not fit this chip: skip it
            times.append(f"{cfg}: {type(err).__name__}")
            continue
        times.append(f"{cfg}: {t * 1e3:.0f} us")
        if best is None or t < best[0]:
            best = (t, cfg)
    if mode == "verbose":
        print(f"autotune {key[:5]}: " + ", ".join(times), flush=True)
    if best is None:
        raise RuntimeError("no Triton tile shape could run this convolution on this device")
    return best[1]


# --------------------------------------------------------------------------- weight gradient


@triton.jit
def _wgrad_kernel(
    x_ptr,  # (N_in, C_in)
    g_ptr,  # (M, C_out)
    pin_ptr,  # (P,) int32 input row of each pair, grouped by tap
    pout_ptr,  # (P,) int32 output row of each pair
    start_ptr,  # (K + 1,) int64 first pair of each tap
    part_ptr,  # (SPLIT, K, C_in, C_out) f32 partial sums
    c_in,
    c_out,
    K: tl.constexpr,
    SPLIT: tl.constexpr,
    WIDEN: tl.constexpr,
    PRECISION: tl.constexpr,
    BI: tl.constexpr,
    BJ: tl.constexpr,
    BP: tl.constexpr,
):
    k = tl.program_id(0)
    tiles_j = tl.cdiv(c_out, BJ)
    ti = tl.program_id(1) // tiles_j
    tj = tl.program_id(1) % tiles_j
    split = tl.program_id(2)
    i = ti * BI + tl.arange(0, BI)
    j = tj * BJ + tl.arange(0, BJ)
    i_ok = i < c_in
    j_ok = j < c_out
    lo = tl.load(start_ptr + k)
    hi = tl.load(start_ptr + k + 1)
    acc = tl.zeros([BI, BJ], dtype=tl.float32)
    for p0 in range(lo + split * BP, hi, SPLIT * BP):
        p = p0 + tl.arange(0, BP)
        p_ok = p < hi
        src = tl.load(pin_ptr + p, mask=p_ok, other=0).to(tl.int64)
        dst = tl.load(pout_ptr + p, mask=p_ok, other=0).to(tl.int64)
        a = tl.load(
            x_ptr + src[None, :] * c_in + i[:, None], mask=p_ok[None, :] & i_ok[:, None], other=0.0
        )
        b = tl.load(
            g_ptr + dst[:, None] * c_out + j[None, :], mask=p_ok[:, None] & j_ok[None, :], other=0.0
        )
        if WIDEN:
            acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision=PRECISION)
        else:
            acc += tl.dot(a, b, input_precision=PRECISION)
    base = (split * K + k).to(tl.int64) * c_in * c_out
    tl.store(
        part_ptr + base + i[:, None] * c_out + j[None, :], acc, mask=i_ok[:, None] & j_ok[None, :]
    )


# Pairs per step, warps, stages; (64, 8, 3) was the fastest on every f32 shape of the
# MinkUNet step on an H200 (3.49 ms against 3.66-3.92 at 200k voxels, C = 96).
_WGRAD_CANDIDATES: tuple[tuple[Any, ...], ...] = ((64, 8, 3), (128, 4, 3), (64, 4, 2), (32, 4, 2))


def _run_wgrad(
    cfg: tuple[Any, ...],
    x: torch.Tensor,
    g: torch.Tensor,
    pin: torch.Tensor,
    pout: torch.Tensor,
    starts: torch.Tensor,
    volume: int,
    part: torch.Tensor,
) -> None:
    c_in, c_out = int(x.shape[1]), int(g.shape[1])
    bp, warps, stages = cfg
    bi = _pow2(c_in, 16, 64)
    bj = _pow2(c_out, 16, 64)
    split = int(part.shape[0])
    grid = (volume, cdiv(c_in, bi) * cdiv(c_out, bj), split)
    extra: dict[str, Any] = {} if interpreting() else {"num_warps": warps, "num_stages": stages}
    widen = interpreting() or x.dtype != g.dtype
    _wgrad_kernel[grid](
        x,
        g,
        pin,
        pout,
        starts,
        part,
        c_in,
        c_out,
        K=volume,
        SPLIT=split,
        WIDEN=widen,
        PRECISION=_precision(x.dtype),
        BI=bi,
        BJ=bj,
        BP=bp,
        **extra,
    )


def launch_wgrad(
    x: torch.Tensor,
    g: torch.Tensor,
    pin: torch.Tensor,
    pout: torch.Tensor,
    starts: torch.Tensor,
    volume: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """(K, C_in, C_out) f32: per tap, the sum over its pairs of ``x[in]^T g[out]``.

    Each program sums a strided share of one tap's pairs for one channel tile
    into its own partial; the partials are added afterwards (deterministic, no
    atomics).  The split count fills the chip when taps and tiles are few.
    ``out``, an f32 ``(C_out, K, C_in)`` tensor (the weight's own layout),
    receives the sum in that layout instead: the addition of the partials
    writes it there in the same launch, where a sum and then a permuting
    copy would take two.
    """
    c_in, c_out = int(x.shape[1]), int(g.shape[1])
    m = int(g.shape[0])
    if volume == 0 or c_in == 0 or c_out == 0 or m == 0 or int(x.shape[0]) == 0:
        if out is not None:
            return out.zero_()
        return torch.zeros(volume, c_in, c_out, dtype=torch.float32, device=x.device)
    tiles = cdiv(c_in, _pow2(c_in, 16, 64)) * cdiv(c_out, _pow2(c_out, 16, 64))
    split = 2 if interpreting() else max(1, min(64, cdiv(4 * 132, volume * tiles), cdiv(m, 512)))
    part = torch.empty(split, volume, c_in, c_out, dtype=torch.float32, device=x.device)
    if interpreting():
        _run_wgrad((32, 4, 1), x, g, pin, pout, starts, volume, part)
        return _sum_parts(part, out)
    key = ("wgrad", m.bit_length(), volume, c_in, c_out, x.dtype, _F32, x.device)
    cfg = _TUNED.get(key)
    if cfg is None:
        cfg = _autotune(
            lambda c: _run_wgrad(c, x, g, pin, pout, starts, volume, part),
            _WGRAD_CANDIDATES,
            key,
        )
        _TUNED[key] = cfg
    _run_wgrad(cfg, x, g, pin, pout, starts, volume, part)
    return _sum_parts(part, out)


def _sum_parts(part: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """The sum of the (SPLIT, K, C_in, C_out) partials, into ``out``'s (C_out, K, C_in) if given."""
    if out is None:
        return part.sum(0)
    return torch.sum(part.permute(0, 3, 1, 2), dim=0, out=out)
