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
gradient walks each tap's compacted pair list (see :mod:`.maps`).

Under ``TRITON_INTERPRET=1`` (the CPU test path) the interpreter's half
precision dot products are unreliable (bf16 is wrong), so operands are widened
to f32 first; the products of f16/bf16 values are exact in f32, so the result
is the one the tensor cores give.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

__all__ = [
    "interpreting",
    "launch_conv",
    "launch_wgrad",
    "set_tf32",
    "tf32_enabled",
]

_TF32 = False


def set_tf32(enabled: bool) -> None:
    """Let f32 convolutions multiply in TF32 on the tensor cores (off by default, as spconv).

    TF32 keeps 10 mantissa bits: ~1e-3 relative error instead of f32's ~1e-6,
    for roughly 8x the matrix rate.  Half and bfloat16 paths are unaffected.
    """
    global _TF32
    _TF32 = bool(enabled)


def tf32_enabled() -> bool:
    """Whether f32 convolutions may use TF32 (see :func:`set_tf32`)."""
    return _TF32


_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
"""Read once, when this module is imported: Triton too decides when it and the kernels load."""


def interpreting() -> bool:
    """Whether these kernels run on Triton's CPU interpreter (``TRITON_INTERPRET=1``).

    Triton fixes the mode of every kernel (its own library's included) when
    it is imported, so this is the value at import; on a machine without CUDA
    the variable must be set before ``triton`` is first imported.
    """
    return _INTERPRET


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
    bias_ptr,  # (C_out,) f32 or dummy
    slots_ptr,  # (M, K) int32
    order_ptr,  # (M,) int32 output row of each tile row (rows sorted by tap pattern)
    out_ptr,  # (M, C_out)
    m_rows,
    c_in,
    c_out,
    K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    REORDER: tl.constexpr,
    SKIP: tl.constexpr,
    WIDEN: tl.constexpr,
    PRECISION: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    r = pid_m * BM + tl.arange(0, BM)
    live = r < m_rows
    if REORDER:  # noqa: SIM108 (a jit kernel: keep the branch explicit)
        rows = tl.load(order_ptr + r, mask=live, other=0).to(tl.int64)
    else:
        rows = r.to(tl.int64)
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
    else:
        # One flat loop over (tap, channel block): the compiler pipelines the gathers.
        steps = tl.cdiv(c_in, BK)
        for t in range(K * steps):
            k = t // steps
            c0 = (t % steps) * BK
            src = tl.load(slots_ptr + rows * K + k, mask=live, other=-1)
            acc = _tap_product(
                acc, x_ptr, w_ptr, src, k, c0, ck, cols, col_ok, c_in, c_out, WIDEN, PRECISION
            )
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :]
    tl.store(
        out_ptr + rows[:, None] * c_out + cols[None, :],
        acc.to(out_ptr.dtype.element_ty),
        mask=live[:, None] & col_ok[None, :],
    )


def _pow2(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(triton.next_power_of_2(max(n, 1)))))


# Tile shapes tried by the autotune, per (shape class, dtype, device): rows per tile,
# warps, pipeline stages.  Channel tiles follow the layer's channels.
_CONV_CANDIDATES: tuple[tuple[int, int, int, bool], ...] = (
    (64, 4, 3, False),
    (128, 4, 3, False),
    (64, 4, 2, True),
)
_TUNED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _precision(dtype: torch.dtype) -> str:
    if dtype == torch.float32 and not _TF32:
        return "ieee"
    return "tf32"


def _run_conv(
    cfg: tuple[Any, ...],
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    slots: torch.Tensor,
    order_of: Callable[[], torch.Tensor] | None,
    out: torch.Tensor,
) -> None:
    m, k = slots.shape
    c_in, c_out = w.shape[1], w.shape[2]
    bm, warps, stages, skip = cfg
    skip = skip and order_of is not None
    # Only a tile shape that skips taps needs the rows sorted by tap pattern (a sort).
    order = order_of() if skip and order_of is not None else None
    bn = _pow2(c_out, 16, 128)
    bk = _pow2(c_in, 16, 64)
    widen = interpreting() or x.dtype != w.dtype
    grid = (triton.cdiv(m, bm), triton.cdiv(c_out, bn))
    extra: dict[str, Any] = {} if interpreting() else {"num_warps": warps, "num_stages": stages}
    _conv_kernel[grid](
        x,
        w,
        bias if bias is not None else out,
        slots,
        order if order is not None else slots,
        out,
        m,
        c_in,
        c_out,
        K=k,
        HAS_BIAS=bias is not None,
        REORDER=order is not None,
        SKIP=skip,
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
) -> torch.Tensor:
    """out[o] = sum_k x[slots[o, k]] @ w[k] (+ bias), f32 accumulation, stored in ``out_dtype``.

    ``order_of`` gives (on demand, cached by the caller) a permutation of the
    output rows sorted by which taps they have: it keeps the rows of one tile
    alike, so tile shapes that skip absent taps skip whole taps per tile.
    Under the interpreter, kernels with more than 8 taps take the skipping
    variant and the others the flat one, so the tests run both.
    """
    m = int(slots.shape[0])
    c_out = int(w.shape[2])
    out = torch.empty(m, c_out, dtype=out_dtype, device=x.device)
    if m == 0 or c_out == 0:
        return out
    if int(x.shape[0]) == 0 or int(w.shape[1]) == 0:
        return out.copy_(bias.expand(m, c_out) if bias is not None else out.zero_())
    if interpreting():
        _run_conv((32, 4, 1, int(slots.shape[1]) > 8), x, w, bias, slots, order_of, out)
        return out
    key = (
        "conv",
        m.bit_length(),
        int(slots.shape[1]),
        int(w.shape[1]),
        c_out,
        x.dtype,
        w.dtype,
        x.device,
    )
    cfg = _TUNED.get(key)
    if cfg is None:
        cfg = _autotune(lambda c: _run_conv(c, x, w, bias, slots, order_of, out), _CONV_CANDIDATES)
        _TUNED[key] = cfg
    _run_conv(cfg, x, w, bias, slots, order_of, out)
    return out


def _autotune(run: Any, candidates: tuple[tuple[Any, ...], ...]) -> tuple[Any, ...]:
    """The fastest candidate by median device time (a few short timed repeats each).

    ``TORCH_LATTICE_TRITON_TUNE=0`` takes the first candidate without timing
    (each candidate is a separate compile: test suites with many shapes skip it).
    """
    if os.environ.get("TORCH_LATTICE_TRITON_TUNE", "1") == "0":
        return candidates[0]
    best: tuple[float, tuple[Any, ...]] | None = None
    for cfg in candidates:
        try:
            t = float(
                triton.testing.do_bench(
                    lambda c=cfg: run(c), warmup=5, rep=20, return_mode="median"
                )
            )
        except Exception:  # a tile shape that does not fit this chip (shared memory): skip it
            continue
        if best is None or t < best[0]:
            best = (t, cfg)
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


_WGRAD_CANDIDATES: tuple[tuple[Any, ...], ...] = ((64, 4, 2), (128, 4, 3))


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
    grid = (volume, triton.cdiv(c_in, bi) * triton.cdiv(c_out, bj), split)
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
) -> torch.Tensor:
    """(K, C_in, C_out) f32: per tap, the sum over its pairs of ``x[in]^T g[out]``.

    Each program sums a strided share of one tap's pairs for one channel tile
    into its own partial; the partials are added afterwards (deterministic, no
    atomics).  The split count fills the chip when taps and tiles are few.
    """
    c_in, c_out = int(x.shape[1]), int(g.shape[1])
    m = int(g.shape[0])
    if volume == 0 or c_in == 0 or c_out == 0 or m == 0 or int(x.shape[0]) == 0:
        return torch.zeros(volume, c_in, c_out, dtype=torch.float32, device=x.device)
    tiles = triton.cdiv(c_in, _pow2(c_in, 16, 64)) * triton.cdiv(c_out, _pow2(c_out, 16, 64))
    if interpreting():
        split = 2
    else:
        split = max(1, min(64, triton.cdiv(4 * 132, volume * tiles), triton.cdiv(m, 512)))
    part = torch.empty(split, volume, c_in, c_out, dtype=torch.float32, device=x.device)
    if interpreting():
        _run_wgrad((32, 4, 1), x, g, pin, pout, starts, volume, part)
        return part.sum(0)
    key = ("wgrad", m.bit_length(), volume, c_in, c_out, x.dtype, x.device)
    cfg = _TUNED.get(key)
    if cfg is None:
        cfg = _autotune(
            lambda c: _run_wgrad(c, x, g, pin, pout, starts, volume, part), _WGRAD_CANDIDATES
        )
        _TUNED[key] = cfg
    _run_wgrad(cfg, x, g, pin, pout, starts, volume, part)
    return part.sum(0)
