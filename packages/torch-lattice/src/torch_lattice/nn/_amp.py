"""``torch.autocast`` for the sparse modules, the way torch treats its own convs.

Under autocast torch runs ``conv3d`` and ``linear`` in the autocast dtype
(f16/bf16) whatever the parameters' dtype, so f32 master weights train with
half-precision compute.  Our functional ops are not on autocast's op lists,
so without this they would see f32 weights next to half features (or ignore
autocast entirely).  The modules therefore cast their inputs, weight and bias
to the autocast dtype themselves and run the op with autocast switched off,
so that the op's own f32 accumulation is not re-cast underneath it.  The
casts are differentiable: gradients reach the f32 parameters in f32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import torch

from torch_lattice.sparse import SparseTensor

T = TypeVar("T", SparseTensor, torch.Tensor)
R = TypeVar("R")


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


def run_autocast(
    x: T,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    call: Callable[[T, torch.Tensor, torch.Tensor | None], R],
) -> R:
    """``call(x, weight, bias)``, in the autocast dtype when autocast is on for x's device."""
    dtype = autocast_dtype(x)
    if dtype is None:
        return call(x, weight, bias)
    w = cast_param(weight, dtype)
    assert w is not None
    with autocast_off(x):
        return call(cast_input(x, dtype), w, cast_param(bias, dtype))
