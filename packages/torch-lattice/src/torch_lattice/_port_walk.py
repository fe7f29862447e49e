"""What every port shares: the type registry, the refusals, and names that survive.

A port is only as good as its knowledge of what each source module computes.
That knowledge is tied to a *type*: ``spconv.pytorch.SubMConv3d`` computes a
submanifold conv whatever it is called, while a user class that happens to be
named ``ReLU`` computes whatever its ``forward`` says.  So the ports look
modules up by type in a :data:`Registry` (built from the framework's own
classes when the framework imports, extended by the caller's ``types=``),
accept a subclass of a registered type only when it adds no methods (an own
``forward`` or helper could change the result), and refuse, with the module's
path and the reason, what they cannot reproduce: forward hooks and pre-hooks
(they run code the ported model would not), and a module object that appears
at two places of the tree unless re-running it is all that sharing means.

Ported models keep the source model's parameter names, so a checkpoint
converted by ``convert-checkpoint`` loads into them with ``strict=True``.  The
modules the port adds around a layer (a grid bound, a keyed input, a target)
are :class:`Transparent`: they hold the layer's parameters, buffers and
children as their own instead of as a child, so they add no name segment.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from torch_lattice.sparse import SparseTensor

__all__ = [
    "Context",
    "PortError",
    "Ported",
    "Registry",
    "Transparent",
    "Walk",
    "framework_types",
    "run",
]

Context = dict[Any, SparseTensor]
"""Per-call memory of a ported model: inputs of keyed convs and tensors by stride."""

Registry = Mapping[type, str]
"""Source module type -> the kind of layer the port rebuilds it as (``"SubMConv3d"``...)."""


class PortError(ValueError):
    """A module the port cannot rebuild faithfully; the message names its path."""


class Ported(torch.nn.Module):
    """A module whose forward also sees the call's :data:`Context`."""

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        raise NotImplementedError

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self.call(x, {})


def run(module: torch.nn.Module, x: SparseTensor, ctx: Context) -> SparseTensor:
    """Apply ``module`` inside a ported model's call (threading ``ctx`` where it is ported)."""
    if isinstance(module, Ported):
        return module.call(x, ctx)
    out: SparseTensor = module(x)
    return out


class Transparent(Ported):
    """A wrapper that owns its layer's parameters, buffers and children under their own names.

    ``wrapper.inner`` is the wrapped module, reachable but not a child: the
    wrapper's ``state_dict`` is the layer's, key for key, and moving or
    casting the wrapper moves the layer (they share the dictionaries).
    """

    inner: torch.nn.Module

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.__dict__["inner"] = inner
        self._parameters = inner._parameters
        self._buffers = inner._buffers
        self._non_persistent_buffers_set = inner._non_persistent_buffers_set
        self._modules = inner._modules

    def train(self, mode: bool = True) -> Transparent:
        super().train(mode)
        self.inner.train(mode)
        return self


_TORCH_KINDS: dict[type, str] = {
    torch.nn.Sequential: "Sequential",
    torch.nn.BatchNorm1d: "BatchNorm1d",
    torch.nn.ReLU: "ReLU",
    torch.nn.LeakyReLU: "LeakyReLU",
    torch.nn.Identity: "Identity",
    torch.nn.Dropout: "Dropout",
}

# The framework classes the ports know, by import path: the registry holds the
# classes themselves, imported when the framework is installed.
_FRAMEWORK_CLASSES: dict[str, dict[str, str]] = {
    "spconv": {
        "spconv.pytorch.SubMConv3d": "SubMConv3d",
        "spconv.pytorch.SparseConv3d": "SparseConv3d",
        "spconv.pytorch.SparseConvTranspose3d": "SparseConvTranspose3d",
        "spconv.pytorch.SparseInverseConv3d": "SparseInverseConv3d",
        "spconv.pytorch.SparseMaxPool3d": "SparseMaxPool3d",
        "spconv.pytorch.SparseSequential": "SparseSequential",
        "spconv.pytorch.ToDense": "ToDense",
        "pcdet.models.backbones_3d.spconv_backbone.VoxelBackBone8x": "VoxelBackBone8x",
        "pcdet.models.backbones_3d.spconv_backbone.VoxelResBackBone8x": "VoxelResBackBone8x",
        "pcdet.models.backbones_3d.spconv_backbone.SparseBasicBlock": "SparseBasicBlock",
        "pcdet.models.backbones_3d.spconv_unet.UNetV2": "UNetV2",
        "pcdet.models.backbones_2d.map_to_bev.height_compression.HeightCompression": (
            "HeightCompression"
        ),
    },
    "torchsparse": {
        "torchsparse.nn.Conv3d": "Conv3d",
        "torchsparse.nn.BatchNorm": "BatchNorm",
        "torchsparse.nn.ReLU": "ReLU",
        "torchsparse.nn.LeakyReLU": "LeakyReLU",
        "torchsparse.backbones.modules.SparseConvBlock": "SparseConvBlock",
        "torchsparse.backbones.modules.SparseConvTransposeBlock": "SparseConvTransposeBlock",
        "torchsparse.backbones.modules.SparseResBlock": "SparseResBlock",
        "torchsparse.backbones.SparseResUNet42": "SparseResUNet42",
        "torchsparse.backbones.unet.SparseResUNet": "SparseResUNet",
    },
    "minkowski": {
        "MinkowskiEngine.MinkowskiConvolution": "MinkowskiConvolution",
        "MinkowskiEngine.MinkowskiConvolutionTranspose": "MinkowskiConvolutionTranspose",
        "MinkowskiEngine.MinkowskiGenerativeConvolutionTranspose": (
            "MinkowskiGenerativeConvolutionTranspose"
        ),
        "MinkowskiEngine.MinkowskiBatchNorm": "MinkowskiBatchNorm",
        "MinkowskiEngine.MinkowskiReLU": "MinkowskiReLU",
        "MinkowskiEngine.MinkowskiUnion": "MinkowskiUnion",
    },
}


def _import(dotted: str) -> type | None:
    module, _, name = dotted.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name, None)
    except Exception:
        return None
    return found if isinstance(found, type) else None


def framework_types(framework: str, extra: Registry | None = None) -> dict[type, str]:
    """torch's kinds, ``framework``'s classes that import here, then the caller's ``extra``."""
    kinds = dict(_TORCH_KINDS)
    for dotted, kind in _FRAMEWORK_CLASSES[framework].items():
        cls = _import(dotted)
        if cls is not None:
            kinds[cls] = kind
    for cls, kind in (extra or {}).items():
        if not isinstance(cls, type) or not isinstance(kind, str):
            raise TypeError(
                "types= maps module classes to the kind they are ported as, e.g. "
                f"{{MyBlock: 'SparseBasicBlock'}}; got {cls!r}: {kind!r}"
            )
        kinds[cls] = kind
    return kinds


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _adds_methods(cls: type, base: type) -> list[str]:
    """Callables ``cls`` or a class between it and ``base`` defines besides ``__init__``."""
    added: list[str] = []
    for klass in cls.__mro__:
        if klass is base:
            break
        for name, value in vars(klass).items():
            if name in ("__init__", "__module__", "__qualname__", "__doc__", "__annotations__"):
                continue
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                added.append(f"{klass.__qualname__}.{name}")
    return added


def _hooks(module: torch.nn.Module) -> list[str]:
    found = []
    if module._forward_hooks:
        found.append("a forward hook")
    if module._forward_pre_hooks:
        found.append("a forward pre-hook")
    return found


class Walk:
    """The walk over one source tree: kinds by type, refusals, and shared modules."""

    def __init__(self, framework: str, kinds: Mapping[type, str], shareable: frozenset[str]):
        self.framework = framework
        self.kinds = kinds
        self.shareable = shareable
        self.seen: dict[int, tuple[str, torch.nn.Module]] = {}
        glob = torch.nn.modules.module
        if glob._global_forward_hooks or glob._global_forward_pre_hooks:
            raise PortError(
                "a global module forward hook is registered (torch.nn.modules.module."
                "register_module_forward_hook / _pre_hook); it would run code the ported model "
                "does not: remove it before porting"
            )

    def kind(self, module: torch.nn.Module, where: str) -> str | None:
        """The registered kind of ``module``; None when its type is unknown.

        Refuses hooks, and subclasses of a known type that add methods.
        """
        hooks = _hooks(module)
        if hooks:
            raise PortError(
                f"{where}: has {' and '.join(hooks)}; the ported model would not run it, so it "
                "would compute something else: remove the hook (handle.remove()) before porting"
            )
        cls = type(module)
        kind = self.kinds.get(cls)
        if kind is not None:
            return kind
        for base in cls.__mro__[1:]:
            base_kind = self.kinds.get(base)
            if base_kind is None:
                continue
            added = _adds_methods(cls, base)
            if added:
                raise PortError(
                    f"{where}: {_qualname(cls)} subclasses {_qualname(base)} but defines "
                    f"{', '.join(added)}; the port reproduces {base.__qualname__} only, not code "
                    "a subclass adds: port a plain one, or declare the class with types= if it "
                    "computes exactly what a known kind computes"
                )
            return base_kind
        return None

    def unknown(self, module: torch.nn.Module, where: str, supported: str) -> PortError:
        cls = type(module)
        return PortError(
            f"{where}: the {self.framework} port does not know {_qualname(cls)} (modules are "
            f"matched by type, not by class name); supported are {supported}; a class that "
            "computes exactly what one of those computes can be declared with types="
        )

    def shared(
        self, module: torch.nn.Module, where: str, kind: str | None
    ) -> torch.nn.Module | None:
        """The earlier port of ``module`` when it appeared before (refused unless shareable)."""
        earlier = self.seen.get(id(module))
        if earlier is None:
            return None
        path, ported = earlier
        if kind not in self.shareable:
            raise PortError(
                f"{where}: is the same {type(module).__qualname__} object as {path}; a shared "
                f"{kind or 'container'} cannot be ported (its grid, keys or rows depend on "
                "where it runs): give each place its own module"
            )
        return ported

    def remember(self, module: torch.nn.Module, where: str, ported: torch.nn.Module) -> None:
        self.seen.setdefault(id(module), (where, ported))


def source_children(
    module: torch.nn.Module, path: str
) -> Iterator[tuple[str, str, torch.nn.Module]]:
    """``(name, path, child)`` for every child slot, repeats too (``named_children`` drops them)."""
    for name, child in module._modules.items():
        if child is not None:
            yield name, (f"{path}.{name}" if path else name), child
