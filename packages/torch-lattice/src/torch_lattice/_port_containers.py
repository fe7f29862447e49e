"""Containers of ported models: they thread the call's context through their children.

spconv and TorchSparse hide part of what a model computes outside its layers:
an inverse conv reads the rows its ``indice_key`` cached, a TorchSparse
transposed conv goes back onto the rows cached at the finer stride, a
residual block adds its shortcut in ``forward``.  These containers rebuild
that with an explicit per-call :data:`~torch_lattice._port_walk.Context`, and
keep the source's child names so ``state_dict`` keys survive the port.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import transposed_stride

from torch_lattice import ops
from torch_lattice._port_walk import Context, Ported, PortError, Transparent, run
from torch_lattice.sparse import SparseTensor

__all__ = [
    "FineTarget",
    "FullOntoInput",
    "Keyed",
    "OntoTarget",
    "PortedSequential",
    "ResBlock",
    "ResUNet",
]

_Ported = Ported
_run = run


class PortedSequential(_Ported):
    """Children applied in order, named like the source's (``conv_input``, ``0``, ...).

    ``PortedSequential(a, b)`` names them ``0``, ``1`` as ``torch.nn.Sequential``
    does; ``PortedSequential({"conv1": a, ...})`` keeps the given names, so the
    ported model's ``state_dict`` keys are the source model's.  A module given
    twice runs twice (the source shared it).
    """

    def __init__(self, *children: torch.nn.Module | dict[str, torch.nn.Module]) -> None:
        super().__init__()
        named: list[tuple[str, torch.nn.Module]] = []
        for i, child in enumerate(children):
            if isinstance(child, dict):
                named.extend(child.items())
            else:
                named.append((str(i), child))
        for name, module in named:
            self.add_module(name, module)
        self.order = [name for name, _ in named]  # repeats of one object keep their slots

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        ctx.setdefault(("stride", x.stride), x)
        for name in self.order:
            x = _run(self._modules[name], x, ctx)  # type: ignore[arg-type]
            ctx.setdefault(("stride", x.stride), x)
        return x


class Keyed(Transparent):
    """A strided spconv conv whose input a later inverse conv goes back to."""

    def __init__(self, conv: torch.nn.Module, key: str) -> None:
        super().__init__(conv)
        self.key = key

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        ctx[("key", self.key)] = x
        return _run(self.inner, x, ctx)


class OntoTarget(Transparent):
    """A target op whose target comes from the context (a keyed input or a stride)."""

    def __init__(self, conv: torch.nn.Module, target: tuple[str, Any], path: str) -> None:
        super().__init__(conv)
        self.target = target
        self.path = path

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        target = ctx.get(self.target)
        if target is None:
            kind, value = self.target
            what = f"indice_key {value!r}" if kind == "key" else f"a tensor at stride {value}"
            raise PortError(
                f"{self.path}: needs the rows of {what}, which no earlier layer of this "
                "call produced; call the ported model from its input, not a sub-module"
            )
        out: SparseTensor = self.inner(x, target)
        return out


class FullOntoInput(Transparent):
    """TorchSparse 2.1 mixed-parity stride-1 conv: a full conv read back onto the input."""

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        return ops.sparse_reindex(self.inner(x), x)


class ResBlock(_Ported):
    """TorchSparse's ``SparseResBlock``: ``relu(main(x) + shortcut(x))``."""

    def __init__(self, main: torch.nn.Module, shortcut: torch.nn.Module, relu: torch.nn.Module):
        super().__init__()
        self.main = main
        self.shortcut = shortcut
        self.relu = relu

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        total = ops.sparse_binary(_run(self.main, x, ctx), _run(self.shortcut, x, ctx), op="add")
        return _run(self.relu, total, ctx)


class ResUNet(torch.nn.Module):
    """TorchSparse's ``SparseResUNet``: stem, encoders, decoders with skip concatenations.

    Returns every level's output, outermost first, as TorchSparse does.
    """

    def __init__(
        self, stem: torch.nn.Module, encoders: torch.nn.ModuleList, decoders: torch.nn.ModuleList
    ) -> None:
        super().__init__()
        self.stem = stem
        self.encoders = encoders
        self.decoders = decoders

    def _level(self, x: SparseTensor, depth: int, ctx: Context) -> list[SparseTensor]:
        if depth == len(self.encoders):
            return [x]
        outputs = self._level(_run(self.encoders[depth], x, ctx), depth + 1, ctx)
        decoder = self.decoders[len(self.decoders) - 1 - depth]
        assert isinstance(decoder, torch.nn.ModuleDict)
        up = _run(decoder["upsample"], outputs[-1], ctx)
        fused = _run(decoder["fuse"], ops.sparse_cat(up, x, join="left"), ctx)
        return [x, *outputs, fused]

    def forward(self, x: SparseTensor) -> tuple[SparseTensor, ...]:
        ctx: Context = {}
        stem = _run(self.stem, x, ctx)
        return tuple(self._level(stem, 0, ctx))


class FineTarget(OntoTarget):
    """TorchSparse's transposed conv: back onto the rows cached at the finer stride."""

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        _, step = self.target
        fine = transposed_stride(x.stride, step, f"{self.path} (a transposed conv)")
        target = ctx.get(("stride", fine))
        if target is None:
            raise PortError(
                f"{self.path}: needs the rows TorchSparse cached at stride {list(fine)}, which "
                "no earlier layer of this call produced"
            )
        out: SparseTensor = self.inner(x, target)
        return out
