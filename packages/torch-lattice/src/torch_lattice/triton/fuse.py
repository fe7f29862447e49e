"""Conv + eval BatchNorm + ReLU in one Triton kernel, reached from unchanged nn models.

A conv block ``SubmConv3d -> BatchNorm -> ReLU`` costs, in inference, one conv
launch and then two elementwise passes over the output (the frozen batch norm
and the ReLU), each reading and writing every feature.  With frozen
statistics the batch norm is a per-channel affine map, so it folds into the
conv kernel's epilogue together with the bias and the ReLU:

    out = relu((sum_k x[slots[o, k]] @ W_k + bias) * s + t),
    s = gamma / sqrt(var + eps),  t = beta - mean * s

computed on the kernel's f32 sums before its one rounding store.

:func:`fuse_conv_bn_relu` is the entry point, in the manner of
``torch.ao.quantization.fuse_modules``: it finds, in every ``torch.nn.Sequential``
of a model, a conv module of :mod:`torch_lattice.nn` followed by a
:class:`torch_lattice.nn.BatchNorm` (and optionally a :class:`torch_lattice.nn.ReLU`),
and swaps that container for a :class:`FusedSequential` holding the very same
children, so parameter names, state dicts and exports are unchanged.  The
fused kernel runs only where it is exact in intent: the batch norm in eval
mode, autograd off (inference), and the conv on the Triton path; anywhere
else (training, CPU, f64, a reference schedule) the children run one after
another as before, which is also the oracle the tests compare against.

Two more cases run the children one by one, because each must see every
module's own call: an export (a tracer is active: the recorded graph must hold
the batch norm and the activation, which the fused kernel would hide), and a
block with a forward (pre-)hook on any of its modules, or a global one
(``torch.nn.modules.module.register_module_forward_hook``): a hook on the
batch norm or ReLU would silently stop running, and one on the conv would see
the normalised output instead of the conv's.

The conv op itself is not changed: the container announces the epilogue in a
context variable that :func:`torch_lattice.triton.conv.sparse_conv` takes
(:func:`torch_lattice.triton.epilogue.take_epilogue`) when the conv reaches
it; a conv that does not reach it (reference path) leaves it untaken and the
container applies the batch norm and ReLU itself.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.modules.module as torch_module
from lattice_contract.dialect import ActivationKind

from torch_lattice._trace import active_tracer
from torch_lattice.nn import (
    Activation,
    BatchNorm,
    Conv3d,
    ConvTranspose3d,
    FullConv3d,
    GenerativeConvTranspose3d,
    SubmConv3d,
)
from torch_lattice.sparse import SparseTensor
from torch_lattice.triton.epilogue import PENDING, Pending

__all__ = ["FusedSequential", "fold_batch_norm", "fuse_conv_bn_relu"]


def fold_batch_norm(bn: BatchNorm) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift), f32, of the eval-mode batch norm: ``bn(y) == y * scale + shift``."""
    with torch.no_grad():
        inv = torch.rsqrt(bn.running_var.float() + bn.eps)
        scale = bn.weight.float() * inv
        shift = bn.bias.float() - bn.running_mean.float() * scale
    return scale.contiguous(), shift.contiguous()


_Fold = tuple[tuple[Any, ...], list[weakref.ref[torch.Tensor]], torch.Tensor, torch.Tensor]
_FOLDS: weakref.WeakKeyDictionary[BatchNorm, _Fold] = weakref.WeakKeyDictionary()
"""Each frozen batch norm's last (state, tensors, scale, shift), so a forward folds it once.

Folding costs about nine small device operations per block (four casts to
f32, rsqrt, products); in a fresh-map inference forward, which is bound by
host time per launch, they were a third of all launches.  The state holds every
input's storage address, dtype and version counter, and the entry refers weakly
to the input tensors themselves (a new tensor at a freed one's address is not
taken for it): an optimizer step, a ``load_state_dict``, ``.half()``, ``.to()``
or a reassigned buffer changes one of them and the next call folds again.  A
write through ``.data`` bumps no version counter and is not seen: update a
fused model's batch norms under ``torch.no_grad()`` instead.
"""


def _inputs(bn: BatchNorm) -> tuple[torch.Tensor, ...]:
    return (bn.weight, bn.bias, bn.running_mean, bn.running_var)


def _state(bn: BatchNorm, device: torch.device) -> tuple[Any, ...] | None:
    """What the fold of ``bn`` depends on; None where a version cannot be read."""
    key: list[Any] = [bn.eps, device]
    for t in _inputs(bn):
        try:  # tensors made under inference_mode keep no version counter
            key.extend((t.data_ptr(), t.dtype, t.device, t._version))
        except RuntimeError:
            return None
    return tuple(key)


def _cached_fold(bn: BatchNorm, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fold_batch_norm` on ``device``, reused while the batch norm's state is unchanged."""
    state = _state(bn, device)
    found = _FOLDS.get(bn)
    if (
        state is not None
        and found is not None
        and found[0] == state
        and all(ref() is t for ref, t in zip(found[1], _inputs(bn), strict=True))
    ):
        return found[2], found[3]
    scale, shift = fold_batch_norm(bn)
    scale, shift = scale.to(device), shift.to(device)
    if state is not None:
        _FOLDS[bn] = (state, [weakref.ref(t) for t in _inputs(bn)], scale, shift)
    return scale, shift


@contextmanager
def _offer(bn: BatchNorm, relu: bool, device: torch.device) -> Iterator[Pending]:
    scale, shift = _cached_fold(bn, device)
    pending = Pending(scale, shift, relu)
    token = PENDING.set(pending)
    try:
        yield pending
    finally:
        PENDING.reset(token)


FUSABLE_CONVS = (SubmConv3d, Conv3d, FullConv3d, ConvTranspose3d, GenerativeConvTranspose3d)
"""The single-input conv modules whose one conv call can take the epilogue.

Exactly these classes (a subclass may change ``forward``).  Not the
normalised convs (their output is divided by a support-dependent weight
mass, which an affine epilogue on the conv sums would not give), nor the
target forms (two inputs, which a ``Sequential`` cannot pass).
"""


def _fusable_conv(m: torch.nn.Module) -> bool:
    return type(m) in FUSABLE_CONVS


def _is_relu(m: torch.nn.Module) -> bool:
    return isinstance(m, Activation) and m.kind == ActivationKind.relu


def _blocks(children: list[torch.nn.Module]) -> list[tuple[int, int, bool]]:
    """(conv index, children spanned, has ReLU) of each conv -> BatchNorm [-> ReLU] run."""
    found = []
    i = 0
    while i + 1 < len(children):
        conv, bn = children[i], children[i + 1]
        if _fusable_conv(conv) and isinstance(bn, BatchNorm):
            relu = i + 2 < len(children) and _is_relu(children[i + 2])
            found.append((i, 3 if relu else 2, relu))
            i += 3 if relu else 2
        else:
            i += 1
    return found


class FusedSequential(torch.nn.Sequential):
    """A ``Sequential`` whose conv -> BatchNorm [-> ReLU] runs are one kernel in inference.

    The children are those of the container it replaces (same names, same
    parameters); only ``forward`` differs, and only when the fused kernel
    applies (see the module docstring).
    """

    def forward(self, x: Any) -> Any:
        children = list(self)
        starts = {i: (span, relu) for i, span, relu in _blocks(children)}
        i = 0
        while i < len(children):
            block = starts.get(i)
            if block is None or not _fusable(x, children[i : i + block[0]]):
                x = children[i](x)
                i += 1
                continue
            span, relu = block
            conv, bn = children[i], children[i + 1]
            assert isinstance(bn, BatchNorm)
            with _offer(bn, relu, x.device) as pending:
                y = conv(x)
            if not pending.taken:  # the conv ran elsewhere: the block's ops one by one
                y = bn(y)
                if relu:
                    y = children[i + 2](y)
            x = y
            i += span
        return x


def _fusable(x: Any, block: list[torch.nn.Module]) -> bool:
    """Whether this call of a conv -> BatchNorm [-> ReLU] block may take the fused kernel."""
    bn = block[1]
    return (
        isinstance(x, SparseTensor)
        and not bn.training
        and not torch.is_grad_enabled()
        and active_tracer() is None
        and not any(_has_hooks(m) for m in block)
    )


def _has_hooks(m: torch.nn.Module) -> bool:
    """A forward or forward-pre hook that must see ``m``'s call: on ``m`` or on every module."""
    return bool(
        m._forward_hooks
        or m._forward_pre_hooks
        or torch_module._global_forward_hooks
        or torch_module._global_forward_pre_hooks
    )


def fuse_conv_bn_relu(model: torch.nn.Module) -> torch.nn.Module:
    """Let every conv -> BatchNorm [-> ReLU] run inside a ``Sequential`` of ``model`` fuse.

    Each ``torch.nn.Sequential`` (``torch_lattice.nn.Sequential`` included)
    holding such a run is replaced in its parent by a :class:`FusedSequential`
    with the same children, so ``state_dict`` keys and parameters are
    untouched; ``model`` itself is returned (or its replacement, when it is
    such a container).  Blocks written in a custom ``forward`` are not seen:
    put them in a ``Sequential`` to fuse them.

    A fused block keeps its batch norm's folded scale and shift and its conv
    weight's tap-major copy from one call to the next, remade when a tensor's
    storage, dtype or version changes (an optimiser step, ``load_state_dict``,
    ``.half()``, a reassigned parameter).  A write through ``.data`` changes no
    version and is not seen: update a fused model's tensors under
    ``torch.no_grad()``.
    """
    for name, child in list(model.named_children()):
        replaced = fuse_conv_bn_relu(child)
        if replaced is not child:
            setattr(model, name, replaced)
    if (
        isinstance(model, torch.nn.Sequential)
        and not isinstance(model, FusedSequential)
        and _blocks(list(model))
    ):
        fused = FusedSequential(OrderedDict(model.named_children()))
        fused.train(model.training)
        return fused
    return model
