"""The base of every ``mlx_lattice.nn`` module: torch-style state dicts on ``mlx.nn.Module``.

Parameter names are the artifact's storage keys and the torch_lattice
module's ``state_dict`` keys, one to one: a conv's ``weight`` is
``(C_out, Kx, Ky, Kz, C_in)``, a container's children are named ``0``, ``1``,
... like ``torch.nn.Sequential``.  :meth:`LatticeModule.load_state_dict` takes
such a flat mapping (MLX arrays, NumPy arrays, or anything NumPy can convert,
e.g. a CPU torch tensor's ``.numpy()``) and checks names and shapes before
changing anything, so a mismatched checkpoint never half-loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mlx.core as mx
import numpy as np
from mlx.nn.layers.base import Module
from mlx.utils import tree_flatten

from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight
from mlx_lattice.sparse import SparseTensor

__all__ = [
    "IGNORED_KEYS",
    "LatticeModule",
    "Sequential",
    "WeightedModule",
    "map_features",
]

IGNORED_KEYS: tuple[str, ...] = ("num_batches_tracked",)
"""Leaf names a torch state dict carries that have no meaning at inference (skipped)."""

Features = SparseTensor | mx.array


def map_features(x: Features, fn: Callable[[mx.array], mx.array]) -> Features:
    """Apply a row-wise feature map to a dense array, or to a sparse value's feats.

    A sparse value keeps its support (and kernel-map cache): the contract's
    ``sparse.decompose`` / ``sparse.with_features`` pair.
    """
    if isinstance(x, SparseTensor):
        return x.with_feats(fn(x.feats))
    return fn(x)


def _to_mx(value: Any, key: str) -> mx.array:
    if isinstance(value, mx.array):
        return value
    host = np.asarray(value) if hasattr(value, "__array__") or isinstance(value, list) else None
    if host is None or host.dtype.kind not in "biuf":
        raise TypeError(
            f"state entry {key!r} is a {type(value).__name__}, which cannot be converted to an "
            "MLX array; pass mx.array or NumPy arrays (torch tensors: .numpy())"
        )
    return mx.array(host)


class LatticeModule(Module):
    """``mlx.nn.Module`` with flat, torch-compatible ``state_dict`` / ``load_state_dict``.

    It is also the MLX base behind the layers declared once for both
    runtimes (:mod:`lattice_contract.frontend.nn_layers`): a declared layer's
    constructor and ``extra_repr`` become the module's, and each
    ``mlx_lattice.nn`` class writes its own ``__call__`` (one
    :mod:`mlx_lattice.ops` call), as ``mlx.nn``'s layers do.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # mlx.nn ships no annotations

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward``: a user's module may be written torch-style (the library's own
        modules define ``__call__``, as ``mlx.nn``'s layers do)."""
        forward: Callable[..., Any] | None = getattr(self, "forward", None)
        if forward is None:
            raise NotImplementedError(f"{type(self).__name__} defines neither __call__ nor forward")
        return forward(*args, **kwargs)

    def extra_repr(self) -> str:
        """The text inside the module's repr (``mlx.nn.Module`` reads ``_extra_repr``)."""
        return ""

    def _extra_repr(self) -> str:
        return self.extra_repr()

    def bias_operand(self) -> mx.array | None:
        """The bias, or None when the module was made without one."""
        bias = self.get("bias")
        return bias if isinstance(bias, mx.array) else None

    def state_dict(self) -> dict[str, mx.array]:
        """Every parameter and buffer by its dotted name (e.g. ``0.weight``)."""
        params = self.parameters()  # type: ignore[no-untyped-call]
        return dict(tree_flatten(params))

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Replace parameters from a flat ``name -> array`` mapping.

        Names and shapes are checked first (strict: every parameter present and
        no unknown key, except the ignored torch bookkeeping keys in
        :data:`IGNORED_KEYS`); nothing changes unless all checks pass.  Arrays
        keep their dtype (an f16 checkpoint gives an f16 module).
        """
        own = self.state_dict()
        updates: dict[str, mx.array] = {}
        unknown: list[str] = []
        for key, value in state.items():
            if key not in own:
                if key.rsplit(".", 1)[-1] not in IGNORED_KEYS:
                    unknown.append(key)
                continue
            array = _to_mx(value, key)
            if tuple(array.shape) != tuple(own[key].shape):
                hint = ""
                if array.dtype == mx.uint32 and own[key].dtype != mx.uint32:
                    hint = "; it is packed: call .quantize(bits, group_size) on the module first"
                raise ValueError(
                    f"state entry {key!r} has shape {tuple(array.shape)} but the module's "
                    f"parameter has shape {tuple(own[key].shape)}{hint}"
                )
            updates[key] = array
        missing = sorted(set(own) - set(updates))
        if strict and (unknown or missing):
            parts = []
            if missing:
                parts.append("missing: " + ", ".join(missing))
            if unknown:
                parts.append("unexpected: " + ", ".join(sorted(unknown)))
            raise ValueError(
                "state dict does not match the module (" + "; ".join(parts) + "); "
                "pass strict=False to load a subset"
            )
        nested: dict[str, Any] = {}
        for key, array in updates.items():
            *path, leaf = key.split(".")
            node = nested
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = array
        self.update(nested)


class WeightedModule(LatticeModule):
    """A module with a ``weight`` that may be packed, and an optional ``bias`` (conv, linear)."""

    weight: mx.array

    def __init__(self) -> None:
        super().__init__()
        self.bits: int | None = None
        self.group_size: int | None = None
        self.logical_shape: tuple[int, ...] | None = None

    @property
    def quantized(self) -> bool:
        """Whether the weight is held packed (after :meth:`quantize`)."""
        return self.bits is not None

    def quantize(
        self, bits: int = 4, group_size: int = 32, scale_dtype: mx.Dtype | None = None
    ) -> None:
        """Pack ``weight`` in place as int4/int8 affine groups along C_in.

        Afterwards the module holds ``weight`` (uint32 words), ``scales`` and
        ``biases`` -- the three safetensors entries of a packed artifact weight --
        frozen, and its forward pass runs MLX's quantized matmul.  Quantize
        before loading a packed state dict into the module.
        """
        if self.quantized:
            raise ValueError("this module's weight is already quantized")
        packed = quantize_weight(
            self.weight, bits=bits, group_size=group_size, scale_dtype=scale_dtype
        )
        self.weight, self.scales, self.biases = packed.weight, packed.scales, packed.biases
        self.bits, self.group_size = packed.bits, packed.group_size
        self.logical_shape = packed.shape
        self.freeze(keys=["weight", "scales", "biases"], recurse=False)

    def weight_operand(self) -> mx.array | QuantizedWeight:
        """The weight as the functional op takes it (a QuantizedWeight when packed)."""
        if self.bits is None or self.group_size is None:
            return self.weight
        return QuantizedWeight(
            self.weight, self.scales, self.biases, self.bits, self.group_size, self.logical_shape
        )

    def _extra_repr(self) -> str:
        text = self.extra_repr()
        if self.quantized:
            text += f", bits={self.bits}, group_size={self.group_size}"
        return text


class Sequential(LatticeModule):
    """Apply modules in order; children are named ``0``, ``1``, ... as in torch."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, module in enumerate(modules):
            if not isinstance(module, Module):
                raise TypeError(
                    f"Sequential item {i} is a {type(module).__name__}, not an mlx.nn.Module"
                )
            self[str(i)] = module
        self._count = len(modules)

    @property
    def layers(self) -> list[Module]:
        """The children in call order."""
        return [self[str(i)] for i in range(self._count)]

    def __getitem__(self, key: Any) -> Any:
        # Module is a dict keyed by child name; integers index like torch's Sequential.
        if isinstance(key, int) and not isinstance(key, bool):
            if not -self._count <= key < self._count:
                raise IndexError(f"Sequential index {key} out of range ({self._count} modules)")
            key = str(key % self._count)
        return super().__getitem__(key)

    def __call__(self, x: Any) -> Any:
        for module in self.layers:
            x = module(x)
        return x
