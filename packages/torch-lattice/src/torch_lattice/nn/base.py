"""The torch side of the layers declared once for both runtimes.

:mod:`lattice_contract.frontend.nn_layers` declares each module's constructor, repr,
docstring and op call; a ``torch_lattice.nn`` class puts :class:`Module`
behind the declared layer.  ``torch.nn.Module.__call__`` then runs the
layer's ``forward`` with every hook (the exporter's tracer included), and
``extra_repr`` is the layer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, overload

import torch
from lattice_contract.runtime import RuntimeOps

from torch_lattice import ops
from torch_lattice.nn._amp import run_autocast
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
    """``torch.nn.Module`` with the runtime hooks of a declared layer."""

    _ops: ClassVar[RuntimeOps] = ops

    def _rows(self, x: Any, fn: Callable[[Any], Any]) -> Any:
        return on_feats(x, fn)

    def bias_operand(self) -> torch.Tensor | None:
        """The ``bias`` parameter, or None when the module was made without one."""
        bias = getattr(self, "bias", None)
        return bias if isinstance(bias, torch.Tensor) else None


class Weighted(Module):
    """A module whose ``weight`` and optional ``bias`` its functional op takes (conv, linear)."""

    weight: torch.nn.Parameter

    def _with_weights(self, x: Any, call: Callable[[Any, Any, Any], Any]) -> Any:
        """``call(x, weight, bias)``; under ``torch.autocast`` in the autocast dtype.

        As ``torch.nn.Conv3d`` and ``torch.nn.Linear`` do (see
        :mod:`torch_lattice.nn._amp`); a conv's target value only lends its
        rows, so its features are left alone.
        """
        return run_autocast(x, self.weight, self.bias_operand(), call)
