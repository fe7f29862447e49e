"""``torch.autocast`` for the sparse modules, the way torch treats its own convs.

Under autocast torch runs ``conv3d`` and ``linear`` in the autocast dtype
(f16/bf16) whatever the parameters' dtype, so f32 master weights train with
half-precision compute.  Our functional ops are not on autocast's op lists,
so without this they would see f32 weights next to half features (or ignore
autocast entirely).  The modules therefore cast their inputs, weight and bias
to the autocast dtype themselves and run the op with autocast switched off,
so that the op's own f32 accumulation is not re-cast underneath it.  The
casts are differentiable: gradients reach the f32 parameters in f32.  A
weight's half copy records its f32 master (:mod:`torch_lattice._master`), so
a conv keeps the master for its backward pass rather than a second, half
copy of every weight; the rest of the network (batch norm, activations,
``linear``) likewise keeps half activations only, as torch's own modules do
under autocast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

import torch

from torch_lattice._master import half_copy
from torch_lattice.sparse import SparseTensor

T = TypeVar("T", SparseTensor, torch.Tensor)


def autocast_dtype(x: SparseTensor | torch.Tensor) -> torch.dtype | None:
    """The dtype autocast asks for on ``x``'s device, or None when autocast is off there."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def cast_input(x: T, dtype: torch.dtype) -> T:
    """``x`` (a SparseTensor's features, or a dense tensor) converted to ``dtype``."""
    if isinstance(x, SparseTensor):
        return x if x.dtype == dtype else x.with_feats(x.feats.to(dtype))
    return x if x.dtype == dtype else x.to(dtype)


def cast_param(p: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A parameter in the compute dtype; the same object when it already is."""
    return p if p is None or p.dtype == dtype else p.to(dtype)


@contextmanager
def autocast_off(x: SparseTensor | torch.Tensor) -> Iterator[None]:
    """Run the op's body without autocast re-casting its internal matmuls."""
    with torch.autocast(x.device.type, enabled=False):
        yield


class autocast_operands(Generic[T]):
    """``with autocast_operands(x, weight, bias) as (x, weight, bias):`` the op's operands.

    When autocast is on for ``x``'s device, the operands come out in the
    autocast dtype and the block runs with autocast off (so the op's own f32
    accumulation is not re-cast underneath it); otherwise they come out
    unchanged and nothing is entered.  A conv's target value only lends its
    rows, so it is not an operand here.
    """

    __slots__ = ("_off", "_operands")

    def __init__(self, x: T, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        dtype = autocast_dtype(x)
        self._off: torch.autocast | None = None
        self._operands: tuple[T, torch.Tensor, torch.Tensor | None] = (x, weight, bias)
        if dtype is not None:
            # The weight's half copy records its master, so that the conv saves the
            # f32 parameter for backward instead of a second, half copy of it.
            w = half_copy(weight, dtype)
            self._operands = (cast_input(x, dtype), w, cast_param(bias, dtype))
            self._off = torch.autocast(x.device.type, enabled=False)

    def __enter__(self) -> tuple[T, torch.Tensor, torch.Tensor | None]:
        if self._off is not None:
            self._off.__enter__()  # type: ignore[no-untyped-call]
        return self._operands

    def __exit__(self, *exc: object) -> None:
        if self._off is not None:
            self._off.__exit__(*exc)
