# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (Triton jit kernels take untyped pointer and constexpr arguments.)
"""Sparse pools (``pool3d``, ``full_pool3d``, ``pool_transpose3d``) on Triton, with autograd.

A pool reads the conv's slot table of the same geometry (``pool3d`` the
centred relation, ``full_pool3d`` the indexed one, built and cached by
:func:`torch_lattice.triton.maps.build`, so a pool next to a conv of the same
geometry builds one map) and reduces each output row's present taps in f32
in registers: one output-stationary launch, each output tile written once (no
atomics, deterministic).  The semantics are the reference path's
(``torch_lattice.ops.pool``, docs/semantics.md): ``avg`` divides by the number
of present inputs, a row without any gives 0 in every mode, ``max`` is exact
in every dtype and propagates NaN.

Gradients, also without atomics, walk the adjoint table (input row, tap) ->
output row (one scatter launch, cached on the map, shared with the conv's
input gradient): ``sum`` sends each output's gradient to its inputs, ``avg``
divided by the output's count (saved by the forward launch), ``max`` to the
inputs equal to the maximum, split evenly among ties (one more launch first
computes, per output and channel, the gradient over the number of ties).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from lattice_contract.dialect import PoolMode

from torch_lattice.sparse import SparseTensor, Support
from torch_lattice.triton.conv import SUPPORTED_DTYPES
from torch_lattice.triton.kernels import cdiv, interpreting, next_pow2
from torch_lattice.triton.maps import SlotMap, build

__all__ = ["global_pool", "sparse_pool"]

Triple = tuple[int, int, int]

_MAX, _SUM, _AVG = 0, 1, 2
_MODES = {PoolMode.max: _MAX, PoolMode.sum: _SUM, PoolMode.avg: _AVG}


def _tile(rows: int, channels: int) -> tuple[int, int]:
    """(rows, channels) per program: whole rows of up to 128 channels, ~4k elements a tile."""
    bc = min(128, max(16, next_pow2(max(channels, 1))))
    budget = 1024 if interpreting() else 4096
    return max(16, budget // bc), bc


@triton.jit
def _tile_of(rows, C, BM: tl.constexpr, BC: tl.constexpr):
    """This program's rows and channels (int64 rows), with their in-range masks."""
    r = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    return r, c, r < rows, c < C


@triton.jit
def _pool_kernel(
    x_ptr,  # (N, C) input features
    slots_ptr,  # (M, K) int32 input row per (output row, tap), -1 where none
    out_ptr,  # (M, C) result, in the features' dtype
    count_ptr,  # (M,) int32 present inputs per row (written with COUNT), or a dummy
    m_rows,
    C,
    K: tl.constexpr,
    MODE: tl.constexpr,
    COUNT: tl.constexpr,
    BM: tl.constexpr,
    BC: tl.constexpr,
):
    o, c, live_o, live_c = _tile_of(m_rows, C, BM, BC)
    if MODE == 0:
        acc = tl.full([BM, BC], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BM, BC], tl.float32)
    count = tl.zeros([BM], tl.int32)
    for k in range(K):
        src = tl.load(slots_ptr + o * K + k, mask=live_o, other=-1).to(tl.int64)
        hit = src >= 0
        mask = hit[:, None] & live_c[None, :]
        v = tl.load(x_ptr + src[:, None] * C + c[None, :], mask=mask, other=0.0).to(tl.float32)
        if MODE == 0:
            acc = tl.where(mask, tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL), acc)
        else:
            acc += v
        count += hit.to(tl.int32)
    if MODE == 0:
        acc = tl.where(count[:, None] > 0, acc, 0.0)
    if MODE == 2:
        acc = acc / tl.maximum(count, 1).to(tl.float32)[:, None]
    keep = live_o[:, None] & live_c[None, :]
    tl.store(out_ptr + o[:, None] * C + c[None, :], acc.to(out_ptr.dtype.element_ty), mask=keep)
    if COUNT:  # every channel block writes the same counts
        tl.store(count_ptr + o, count, mask=live_o)


@triton.jit
def _tie_kernel(
    x_ptr,  # (N, C) input features
    out_ptr,  # (M, C) the forward's maxima
    grad_ptr,  # (M, C) gradient of the result
    slots_ptr,  # (M, K) int32
    share_ptr,  # (M, C) f32 result: gradient / number of inputs equal to the maximum
    m_rows,
    C,
    K: tl.constexpr,
    BM: tl.constexpr,
    BC: tl.constexpr,
):
    o, c, live_o, live_c = _tile_of(m_rows, C, BM, BC)
    keep = live_o[:, None] & live_c[None, :]
    best = tl.load(out_ptr + o[:, None] * C + c[None, :], mask=keep, other=0.0).to(tl.float32)
    ties = tl.zeros([BM, BC], tl.float32)
    for k in range(K):
        src = tl.load(slots_ptr + o * K + k, mask=live_o, other=-1).to(tl.int64)
        mask = keep & (src >= 0)[:, None]
        v = tl.load(x_ptr + src[:, None] * C + c[None, :], mask=mask, other=0.0).to(tl.float32)
        ties += (mask & (v == best)).to(tl.float32)
    g = tl.load(grad_ptr + o[:, None] * C + c[None, :], mask=keep, other=0.0).to(tl.float32)
    tl.store(share_ptr + o[:, None] * C + c[None, :], g / tl.maximum(ties, 1.0), mask=keep)


@triton.jit
def _pool_grad_kernel(
    x_ptr,  # (N, C) input features (MODE max)
    out_ptr,  # (M, C) the forward's maxima (MODE max)
    grad_ptr,  # (M, C) gradient per output: the result's, or (max) its share per tie
    count_ptr,  # (M,) int32 present inputs per output (MODE avg)
    back_ptr,  # (N, K) int32 output row per (input row, tap), -1 where none
    gin_ptr,  # (N, C) result, in the features' dtype
    n_rows,
    C,
    K: tl.constexpr,
    MODE: tl.constexpr,
    BM: tl.constexpr,
    BC: tl.constexpr,
):
    i, c, live_i, live_c = _tile_of(n_rows, C, BM, BC)
    keep = live_i[:, None] & live_c[None, :]
    if MODE == 0:
        xv = tl.load(x_ptr + i[:, None] * C + c[None, :], mask=keep, other=0.0).to(tl.float32)
    acc = tl.zeros([BM, BC], tl.float32)
    for k in range(K):
        dst = tl.load(back_ptr + i * K + k, mask=live_i, other=-1).to(tl.int64)
        mask = keep & (dst >= 0)[:, None]
        at = dst[:, None] * C + c[None, :]
        g = tl.load(grad_ptr + at, mask=mask, other=0.0).to(tl.float32)
        if MODE == 0:
            best = tl.load(out_ptr + at, mask=mask, other=0.0).to(tl.float32)
            g = tl.where(xv == best, g, 0.0)
        if MODE == 2:
            n = tl.load(count_ptr + dst, mask=dst >= 0, other=1)
            g = g / tl.maximum(n, 1).to(tl.float32)[:, None]
        acc += g
    tl.store(gin_ptr + i[:, None] * C + c[None, :], acc.to(gin_ptr.dtype.element_ty), mask=keep)


def launch_pool(
    feats: torch.Tensor, slots: torch.Tensor, mode: int, with_count: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(pooled (M, C) in the features' dtype, present inputs per row or None)."""
    m, k = (int(v) for v in slots.shape)
    c = int(feats.shape[1])
    out = torch.empty(m, c, dtype=feats.dtype, device=feats.device)
    count = torch.empty(m, dtype=torch.int32, device=feats.device) if with_count else None
    if m and c:
        bm, bc = _tile(m, c)
        _pool_kernel[(cdiv(m, bm), cdiv(c, bc))](
            feats, slots, out, count if count is not None else out, m, c, K=k, MODE=mode,
            COUNT=count is not None, BM=bm, BC=bc,
        )  # fmt: skip
    return out, count


def launch_pool_grad(
    grad: torch.Tensor,
    num_in: int,
    count: torch.Tensor | None,
    smap: SlotMap,
    mode: int,
    maxima: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Gradient of the features (num_in, C) in the result's dtype, summed in f32 per input row.

    ``count`` is the forward's present inputs per output (``avg``), ``maxima``
    its (features, result) pair (``max``).
    """
    m, c = (int(v) for v in grad.shape)
    k = smap.volume
    gin = torch.empty(num_in, c, dtype=grad.dtype, device=grad.device)
    if not (num_in and c):
        return gin
    if m == 0:
        return gin.zero_()
    bm, bc = _tile(max(m, num_in), c)
    feats = out = grad  # pointers the kernels do not read outside max
    if mode == _MAX:
        assert maxima is not None
        feats, out = maxima
        share = torch.empty(m, c, dtype=torch.float32, device=grad.device)
        _tie_kernel[(cdiv(m, bm), cdiv(c, bc))](
            feats, out, grad, smap.slots, share, m, c, K=k, BM=bm, BC=bc
        )
        grad = share
    back = smap.transposed()
    _pool_grad_kernel[(cdiv(num_in, bm), cdiv(c, bc))](
        feats, out, grad, count if count is not None else back.slots, back.slots, gin, num_in, c,
        K=k, MODE=mode, BM=bm, BC=bc,
    )  # fmt: skip
    return gin


class _TritonPoolFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, feats: torch.Tensor, smap: SlotMap, mode: int) -> torch.Tensor:
        feats = feats.contiguous()
        out, count = launch_pool(feats, smap.slots, mode, with_count=mode == _AVG)
        if mode == _MAX:  # sum and avg read neither the features nor the result back
            ctx.save_for_backward(feats, out)
        ctx.count, ctx.smap, ctx.mode, ctx.num_in = count, smap, mode, int(feats.shape[0])
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        maxima = tuple(ctx.saved_tensors) if ctx.mode == _MAX else None
        gin = launch_pool_grad(grad.contiguous(), ctx.num_in, ctx.count, ctx.smap, ctx.mode, maxima)
        return gin, None, None


def sparse_pool(
    kind: str,
    x: SparseTensor,
    mode: PoolMode,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    target: Support | None = None,
) -> SparseTensor:
    """One pool on the Triton path: the conv's map of this geometry, then one reduction launch.

    ``kind`` is ``"centred"`` (``pool3d``), ``"indexed"`` (``full_pool3d``) or
    ``"transpose"`` with ``avg`` (``pool_transpose3d``: the mean of the coarse
    rows reaching each output row, on ``conv_transpose3d``'s support or, with
    ``target``, the target's rows); the caller has checked the geometry.
    """
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"the Triton pool path runs f16, bf16 and f32 features, got {x.dtype}; "
            "use torch_lattice.ops.schedule('auto') to run other dtypes on the reference path"
        )
    out_support, smap = build(kind, x.support, kernel, stride, padding, dilation, target)
    if not (torch.is_grad_enabled() and x.feats.requires_grad):  # the launch alone, no node
        plain, _ = launch_pool(x.feats.contiguous(), smap.slots, _MODES[mode], with_count=False)
        return SparseTensor._make(out_support, plain)
    out: torch.Tensor = _TritonPoolFunction.apply(x.feats, smap, _MODES[mode])  # type: ignore[no-untyped-call]
    return SparseTensor._make(out_support, out)


# --------------------------------------------------------------------------- global pool


@triton.jit
def _global_part_kernel(
    x_ptr,  # (N, C) features
    batch_ptr,  # (N,) int32 batch column of the coordinates (stride 4)
    best_ptr,  # (B, C) maxima (MODE ties), or a dummy
    part_ptr,  # (P, B, C) f32 per-block partial results
    count_ptr,  # (P, B) int32 per-block rows per batch item (MODE max / sum)
    n_rows,
    C,
    B,
    MODE: tl.constexpr,  # 0 max, 1 sum (both with counts), 3 ties (inputs equal to the maximum)
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    r, c, live_r, live_c = _tile_of(n_rows, C, BR, BC)
    keep = live_r[:, None] & live_c[None, :]
    v = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=keep, other=0.0).to(tl.float32)
    batch = tl.load(batch_ptr + r * 4, mask=live_r, other=-1)
    p = tl.program_id(0).to(tl.int64)
    for b in range(B):
        sel = keep & (batch == b)[:, None]
        if MODE == 0:
            part = tl.max(tl.where(sel, v, float("-inf")), axis=0)
        elif MODE == 1:
            part = tl.sum(tl.where(sel, v, 0.0), axis=0)
        else:
            best = tl.load(best_ptr + b * C + c, mask=live_c, other=0.0).to(tl.float32)
            part = tl.sum((sel & (v == best[None, :])).to(tl.float32), axis=0)
        tl.store(part_ptr + (p * B + b) * C + c, part, mask=live_c)
        if MODE != 3:  # every channel block writes the same counts
            tl.store(count_ptr + p * B + b, tl.sum((live_r & (batch == b)).to(tl.int32), axis=0))


@triton.jit
def _global_combine_kernel(
    part_ptr,  # (P, B, C) f32
    count_ptr,  # (P, B) int32 (MODE max / sum / avg)
    out_ptr,  # (B, C) result
    total_ptr,  # (B,) int32 rows per batch item (written unless MODE ties), or a dummy
    P,
    B,
    C,
    MODE: tl.constexpr,  # 0 max, 1 sum, 2 avg, 3 ties (sum)
    BP: tl.constexpr,
    BC: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    live_c = c < C
    if MODE == 0:  # noqa: SIM108 (a static branch of the kernel)
        acc = tl.full([BC], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BC], tl.float32)
    rows = tl.zeros([BP], tl.int32)
    for start in range(0, P, BP):  # a fixed order of blocks: deterministic
        p = start + tl.arange(0, BP)
        mask = (p < P)[:, None] & live_c[None, :]
        at = (p[:, None] * B + b) * C + c[None, :]
        if MODE == 0:
            acc = tl.maximum(acc, tl.max(tl.load(part_ptr + at, mask=mask, other=float("-inf")), 0))
        else:
            acc += tl.sum(tl.load(part_ptr + at, mask=mask, other=0.0), axis=0)
        if MODE != 3:
            rows += tl.load(count_ptr + p * B + b, mask=p < P, other=0)
    n = tl.sum(rows, axis=0)
    if MODE == 0:  # an empty batch item gives 0; a maximum of -inf over rows stays -inf
        acc = tl.where(n == 0, 0.0, acc)
    if MODE == 2:
        acc = acc / tl.maximum(n, 1).to(tl.float32)
    tl.store(out_ptr + b * C + c, acc.to(out_ptr.dtype.element_ty), mask=live_c)
    if MODE != 3:
        tl.store(total_ptr + b, n)


@triton.jit
def _global_grad_kernel(
    x_ptr,  # (N, C) features (MODE max)
    batch_ptr,  # (N,) int32 batch column (stride 4)
    best_ptr,  # (B, C) the forward's maxima (MODE max)
    grad_ptr,  # (B, C) gradient of the result
    scale_ptr,  # (B, C) f32 tie counts (MODE max), or (B,) int32 rows (MODE avg)
    gin_ptr,  # (N, C) result
    n_rows,
    C,
    MODE: tl.constexpr,
    BR: tl.constexpr,
    BC: tl.constexpr,
):
    r, c, live_r, live_c = _tile_of(n_rows, C, BR, BC)
    keep = live_r[:, None] & live_c[None, :]
    b = tl.load(batch_ptr + r * 4, mask=live_r, other=0).to(tl.int64)
    at = b[:, None] * C + c[None, :]
    g = tl.load(grad_ptr + at, mask=keep, other=0.0).to(tl.float32)
    if MODE == 0:
        v = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=keep, other=0.0).to(tl.float32)
        best = tl.load(best_ptr + at, mask=keep, other=0.0).to(tl.float32)
        ties = tl.load(scale_ptr + at, mask=keep, other=1.0)
        g = tl.where(v == best, g / tl.maximum(ties, 1.0), 0.0)
    if MODE == 2:
        g = g / tl.maximum(tl.load(scale_ptr + b, mask=live_r, other=1), 1).to(tl.float32)[:, None]
    tl.store(gin_ptr + r[:, None] * C + c[None, :], g.to(gin_ptr.dtype.element_ty), mask=keep)


def _global_reduce(
    feats: torch.Tensor, coords: torch.Tensor, batch_size: int, mode: int, best: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(per batch item (B, C), rows per item or None): block partials, then a fixed-order sum.

    ``mode`` 3 counts, per item and channel, the rows equal to ``best`` (f32).
    """
    n, c = (int(v) for v in feats.shape)
    device = feats.device
    dtype = torch.float32 if mode == 3 else feats.dtype
    out = torch.empty(batch_size, c, dtype=dtype, device=device)
    with_rows = mode != 3  # max needs them too: emptiness is a row count, not a -inf value
    rows = torch.empty(batch_size, dtype=torch.int32, device=device) if with_rows else None
    br, bc = _tile(n, c)
    p = cdiv(max(n, 1), br)
    part = torch.empty(p, batch_size, c, dtype=torch.float32, device=device)
    counts = torch.zeros(p, batch_size, dtype=torch.int32, device=device) if with_rows else part
    _global_part_kernel[(p, cdiv(c, bc))](
        feats, coords, best if best is not None else feats, part, counts, n, c, batch_size,
        MODE=_SUM if mode == _AVG else mode, BR=br, BC=bc,
    )  # fmt: skip
    _global_combine_kernel[(batch_size, cdiv(c, bc))](
        part, counts, out, rows if rows is not None else out, p, batch_size, c, MODE=mode,
        BP=64, BC=bc,
    )  # fmt: skip
    return out, rows


class _TritonGlobalPoolFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, feats: torch.Tensor, coords: torch.Tensor, batch_size: int, mode: int
    ) -> torch.Tensor:
        feats = feats.contiguous()
        out, rows = _global_reduce(feats, coords, batch_size, mode, None)
        ctx.save_for_backward(feats, coords, out)
        ctx.rows, ctx.mode = rows, mode
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        feats, coords, out = ctx.saved_tensors
        n, c = (int(v) for v in feats.shape)
        grad = grad.contiguous()
        gin = torch.empty_like(feats)
        if n and c:
            scale = ctx.rows
            if ctx.mode == _MAX:
                scale, _ = _global_reduce(feats, coords, int(out.shape[0]), 3, out)
            br, bc = _tile(n, c)
            _global_grad_kernel[(cdiv(n, br), cdiv(c, bc))](
                feats, coords, out, grad, scale if scale is not None else grad, gin, n, c,
                MODE=ctx.mode, BR=br, BC=bc,
            )  # fmt: skip
        return gin, None, None, None


def global_pool(x: SparseTensor, mode: PoolMode, batch_size: int) -> torch.Tensor:
    """Dense (B, C) per batch item, as ``torch_lattice.ops.global_pool`` (B already resolved).

    Deterministic without atomics: each block of rows reduces its batch
    items into partials, which one more launch combines in a fixed order.
    Each block walks every batch item in registers (work B * N * C), which
    suits the usual batch of a few dozen items; the partials take B * C f32
    values per block of rows.
    """
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"the Triton pool path runs f16, bf16 and f32 features, got {x.dtype}; "
            "use torch_lattice.ops.schedule('auto') to run other dtypes on the reference path"
        )
    if batch_size == 0 or x.num_channels == 0:
        return x.feats.new_zeros(batch_size, x.num_channels)
    coords = x.coords if x.coords.is_contiguous() else x.coords.contiguous()
    out: torch.Tensor = _TritonGlobalPoolFunction.apply(x.feats, coords, batch_size, _MODES[mode])  # type: ignore[no-untyped-call]
    return out
