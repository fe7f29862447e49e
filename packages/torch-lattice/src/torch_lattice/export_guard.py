"""Refuse Python control flow that depends on the traced data.

The exporter runs the model once and records its ops; a Python ``if`` on a
feature value, a loop over a tensor's rows or an ``int(x.num_rows_tensor)``
is decided by *that* input and frozen into the graph without a trace of the
decision, so the artifact computes something else on the next input.  While
the model runs for export, :class:`ControlFlowGuard` (a
``TorchFunctionMode``) follows every tensor computed from a traced value
outside the recorded ops, and refuses ``bool()``, ``int()``, ``float()``,
``len()``, iteration, ``.item()`` and ``.tolist()`` on such a tensor when
the call comes from the model's own code, naming the module that made it.
Shapes read with ``.shape`` are not data: a channel count is static; a row
count read as ``x.feats.shape[0]`` is not seen (documented in
``docs/export.md``).  Checks inside torch_lattice itself (input validation)
are not the model's control flow and are let through.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from torch_lattice._trace import active_tracer
from torch_lattice.export_trace import ExportError, GraphTracer
from torch_lattice.sparse import SparseTensor

__all__ = ["ControlFlowGuard"]

_DECIDING: dict[Any, str] = {
    torch.Tensor.__bool__: "bool()",
    torch.Tensor.__int__: "int()",
    torch.Tensor.__float__: "float()",
    torch.Tensor.__index__: "an index (int)",
    torch.Tensor.__len__: "len()",
    torch.Tensor.__iter__: "iteration",
    torch.Tensor.unbind: "iteration (unbind)",  # what Tensor.__iter__ runs
    torch.Tensor.item: ".item()",
    torch.Tensor.tolist: ".tolist()",
    torch.Tensor.numpy: ".numpy()",
}

_PACKAGE = str(Path(__file__).resolve().parent)
_TORCH = str(Path(torch.__file__).resolve().parent)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)


def _caller_is_library() -> bool:
    """Whether the first frame outside torch and this module is torch_lattice's own code."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_TORCH) and path != __file__:
            return path.startswith(_PACKAGE)
        frame = frame.f_back  # type: ignore[assignment]
    return False


class ControlFlowGuard(TorchFunctionMode):
    """Taint-follows tensors derived from traced values; refuses deciding on them."""

    def __init__(self, tracer: GraphTracer) -> None:
        super().__init__()
        self.tracer = tracer
        self.derived: dict[int, torch.Tensor] = {}  # id -> tensor (kept alive: ids stay unique)

    def _tainted(self, t: torch.Tensor) -> bool:
        key = id(t)
        if key in self.derived or key in self.tracer.components:
            return True
        if key in self.tracer.values:
            return True
        for obj, _ in self.tracer.values.values():
            if isinstance(obj, SparseTensor) and (t is obj.feats or t is obj.coords):
                return True
        return False

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if active_tracer() is None:  # inside a recorded op: the op's own business
            return func(*args, **kwargs)
        decision = _DECIDING.get(func)
        if (
            decision is not None
            and args
            and isinstance(args[0], torch.Tensor)
            and self._tainted(args[0])
            and not _caller_is_library()
        ):
            raise ExportError(
                f"{self.tracer.where()} uses {decision} on a tensor computed from the "
                "model's input: a Python branch, loop or count decided by the data is "
                "frozen by export (the artifact would take the same path for every "
                "input); express it with ops (masks, sparse ops) or move it out of "
                "forward"
            )
        out = func(*args, **kwargs)
        if any(self._tainted(t) for t in _tensors((args, kwargs))):
            for t in _tensors(out):
                self.derived[id(t)] = t
        return out
