"""Sparse convolutions on the Triton kernels, with autograd.

A fused block's epilogue (an eval batch norm and ReLU folded into the
kernel, :mod:`.fuse`) is applied here in inference.  Otherwise one
``torch.autograd.Function`` runs every conv kind: the forward pass is the
implicit-GEMM kernel over the layer's slot table (bias fused), the input
gradient the same kernel over the transposed table, the weight gradient the
per-tap pair kernel.  It saves the features, the weight (an autocast copy's
f32 master, recast in backward) and the map; nothing gathered is kept for the
backward pass.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from torch_lattice._master import master_of, restore_weight, weight_to_save
from torch_lattice.sparse import SparseTensor, Support
from torch_lattice.triton.epilogue import take_epilogue
from torch_lattice.triton.kernels import launch_conv, launch_wgrad
from torch_lattice.triton.maps import SlotMap, build

__all__ = ["SUPPORTED_DTYPES", "sparse_conv"]

Triple = tuple[int, int, int]

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
"""Feature dtypes the kernels run; others (f64) stay on the reference path."""


def _operand_dtype(weight: torch.dtype, feats: torch.dtype) -> torch.dtype:
    """The weight's dtype when it is the features' (both half, or both f32), else f32.

    The kernels multiply two operands of one dtype on the tensor cores; a
    mixed pair (f16 features, f32 weights) is widened to f32 inside the kernel.
    """
    return weight if weight == feats else torch.float32


def _taps(weight: torch.Tensor, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
    """(C_out, Kx, Ky, Kz, C_in) -> contiguous (K, C_in, C_out), or (K, C_out, C_in) transposed.

    One copy does the cast to ``dtype`` and the new layout together (a launch
    less per conv and per backward pass than a cast and then a ``contiguous``).
    """
    c_out, c_in = weight.shape[0], weight.shape[-1]
    view = weight.detach().reshape(c_out, -1, c_in)
    view = view.permute(1, 0, 2) if transposed else view.permute(1, 2, 0)
    if view.dtype == dtype and view.is_contiguous():  # an autocast copy is tap-major already
        return view
    return torch.empty(view.shape, dtype=dtype, device=weight.device).copy_(view)


_TAPS: dict[int, tuple[weakref.ref[torch.Tensor], tuple[Any, ...], torch.Tensor]] = {}
"""Fused blocks: per weight (by id, checked through a weak reference) the state its
tap-major copy was made from, and the copy; the entry goes when the weight does."""


def _fused_taps(weight: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
    """:func:`_taps` of a fused block's kernel operand, kept while the weight is unchanged.

    A fused model (:func:`~torch_lattice.triton.fuse_conv_bn_relu`) runs the
    same weights on every frame, and the tap-major copy is one launch per layer
    and call, so it is made once per weight state: storage address, dtype and
    version counter, as for the folded batch norms (an optimiser step,
    ``load_state_dict``, ``.half()`` or a reassigned parameter remakes it; a
    write through ``.data`` is not seen, as the fused module's docs say).
    Tensors compare elementwise, so a ``WeakKeyDictionary`` cannot hold them.
    """
    try:  # tensors made under inference_mode keep no version counter
        state: tuple[Any, ...] | None = (weight.data_ptr(), weight._version, feats.dtype)
    except RuntimeError:
        state = None
    key = id(weight)
    found = _TAPS.get(key)
    if state is not None and found is not None and found[0]() is weight and found[1] == state:
        return found[2]
    taps = _taps(weight, _operand_dtype(weight.dtype, feats.dtype))
    if state is not None:
        ref = weakref.ref(weight, lambda _, key=key: _TAPS.pop(key, None))  # type: ignore[misc]
        _TAPS[key] = (ref, state, taps)
    return taps


def _forward(
    feats: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    smap: SlotMap,
    sorted_tiles: bool,
) -> torch.Tensor:
    """The conv's kernel over ``smap`` (contiguous ``feats``; bias fused)."""
    w = _taps(weight, _operand_dtype(weight.dtype, feats.dtype))
    b = None if bias is None else bias.detach().float().contiguous()
    return launch_conv(
        feats, w, smap.slots, smap.order, feats.dtype, b, cache=smap.cache,
        sorted_tiles=sorted_tiles, live=smap.live,
    )  # fmt: skip


class _TritonConvFunction(torch.autograd.Function):
    """The conv and its two gradients; ``master``: where an autocast weight's gradient goes.

    Under autocast the weight is a half copy of an f32 master
    (:mod:`torch_lattice._master`).  Given that master as ``master`` (and the
    copy detached as ``weight``), the weight gradient is summed in f32 straight
    into the master's layout and returned for the master: no half gradient,
    and no cast of it back to f32 by the copy's own backward (two launches and
    an autograd node per conv and step).
    """

    @staticmethod
    def forward(
        ctx: Any,
        feats: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        smap: SlotMap,
        sorted_tiles: bool,
        master: torch.Tensor | None,
    ) -> torch.Tensor:
        feats = feats.contiguous()
        out = _forward(feats, weight, bias, smap, sorted_tiles)
        if master is not None:
            saved, ctx.weight_dtype = master, weight.dtype
        else:  # an autocast copy without a gradient of its own still saves its master
            saved, ctx.weight_dtype = weight_to_save(weight)
        ctx.save_for_backward(feats, saved)
        ctx.smap = smap
        ctx.sorted_tiles = sorted_tiles  # the input gradient walks the adjoint map alike
        ctx.has_bias = bias is not None
        ctx.to_master = master is not None
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        feats, saved = ctx.saved_tensors
        smap: SlotMap = ctx.smap
        # The weight's dtype in the forward pass (an autocast copy's, whose master was saved).
        dtype: torch.dtype = ctx.weight_dtype or saved.dtype
        grad = grad.to(feats.dtype).contiguous()
        grad_feats = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            operand = _operand_dtype(dtype, feats.dtype)
            source = saved if operand == dtype else restore_weight(saved, ctx.weight_dtype)
            wt = _taps(source, operand, transposed=True)  # the forward's values, (K, C_out, C_in)
            back = smap.transposed()
            grad_feats = launch_conv(
                grad, wt, back.slots, back.order, feats.dtype, cache=back.cache,
                sorted_tiles=ctx.sorted_tiles,
            )  # fmt: skip
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[5]:
            pin, pout, starts = smap.pairs()
            c_out, c_in = int(saved.shape[0]), int(saved.shape[-1])
            f32 = ctx.to_master or dtype == torch.float32
            grad_weight = torch.empty(
                saved.shape, dtype=torch.float32 if f32 else dtype, device=feats.device
            )
            layout = grad_weight.view(c_out, smap.volume, c_in)
            if f32:  # summed straight into the (master) weight's layout
                launch_wgrad(feats, grad, pin, pout, starts, smap.volume, layout)
            else:  # (K, C_in, C_out) f32, rounded once into the weight's dtype and layout
                gw = launch_wgrad(feats, grad, pin, pout, starts, smap.volume)
                layout.copy_(gw.permute(2, 0, 1))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad.float().sum(0)
        if ctx.to_master:
            return grad_feats, None, grad_bias, None, None, grad_weight
        return grad_feats, grad_weight, grad_bias, None, None, None


def sparse_conv(
    kind: str,
    x: SparseTensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    target: Support | None = None,
) -> SparseTensor:
    """One conv layer on the Triton path: map built (or fetched) on the device, then the kernel.

    ``kind`` and the geometry are those of :func:`torch_lattice.triton.maps.build`.
    The caller has checked shapes, strides and devices (``torch_lattice.ops.conv``).
    """
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"the Triton conv path runs f16, bf16 and f32 features, got {x.dtype}; "
            "use torch_lattice.ops.schedule('auto') to run other dtypes on the reference path"
        )
    out_support, smap = build(kind, x.support, kernel, stride, padding, dilation, target)
    epilogue = take_epilogue(bias, int(weight.shape[0]))
    training = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x.feats, weight, bias)
    )
    macs = smap.num_out * smap.volume * int(weight.shape[-1]) * int(weight.shape[0])
    f32 = _operand_dtype(weight.dtype, x.dtype) == torch.float32
    sorted_tiles = smap.sorted_tiles(more_uses=training, macs=macs, f32=f32)  # backward reuses it
    if epilogue is not None:  # a fused block's batch norm and ReLU, inference only
        feats = x.feats.contiguous()
        fused = launch_conv(
            feats, _fused_taps(weight, feats), smap.slots, smap.order, feats.dtype,
            epilogue=epilogue, cache=smap.cache, sorted_tiles=sorted_tiles, live=smap.live,
        )  # fmt: skip
        return SparseTensor._make(out_support, fused)
    if not training:  # nothing to differentiate: the kernel alone, without an autograd node
        plain = _forward(x.feats.contiguous(), weight, bias, smap, sorted_tiles)
        return SparseTensor._make(out_support, plain)
    # An autocast copy's gradient goes to its f32 master directly (see _TritonConvFunction).
    master = master_of(weight) if training and weight.requires_grad else None
    operand = weight if master is None else weight.detach()
    out: torch.Tensor = _TritonConvFunction.apply(  # type: ignore[no-untyped-call]
        x.feats, operand, bias, smap, sorted_tiles, master
    )
    if bias is not None:
        out = out.to(x.dtype)
    return SparseTensor._make(out_support, out)
