"""The torch module bases under the layers declared once for both runtimes.

:mod:`lattice_contract.frontend.nn_layers` declares each module's
constructor, repr and docstring; a ``torch_lattice.nn`` class puts
:class:`Module` behind the declared layer and writes its own ``forward``,
which calls :mod:`torch_lattice.ops` directly.  ``torch.nn.Module.__call__``
runs that ``forward`` with every hook (the exporter's tracer included), and
``extra_repr`` is the layer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

import torch

from torch_lattice.sparse import SparseTensor


@overload
def on_feats(x: SparseTensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> SparseTensor: ...
@overload
def on_feats(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor: ...
def on_feats(
    x: SparseTensor | torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]
) -> SparseTensor | torch.Tensor:
    """``fn`` on a dense tensor, or on a SparseTensor's features (keeping its support)."""
    if isinstance(x, SparseTensor):
        return x.with_feats(fn(x.feats))
    return fn(x)


class Module(torch.nn.Module):
    """``torch.nn.Module`` behind a declared layer: the bias lookup its repr reads."""

    def bias_operand(self) -> torch.Tensor | None:
        """The ``bias`` parameter, or None when the module was made without one."""
        bias = getattr(self, "bias", None)
        return bias if isinstance(bias, torch.Tensor) else None


class Weighted(Module):
    """A module whose ``weight`` and optional ``bias`` its functional op takes (conv, linear).

    Its ``forward`` runs the op through :func:`torch_lattice.nn._amp.run_autocast`, as
    ``torch.nn.Conv3d`` and ``torch.nn.Linear`` follow ``torch.autocast``.
    """

    weight: torch.nn.Parameter
    bias: torch.nn.Parameter | None
