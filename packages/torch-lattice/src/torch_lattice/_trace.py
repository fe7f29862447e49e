"""The export hook: a decorator every public functional op wears.

The exporter lowers a model by running it once while a *tracer* is active and
recording each public op call with its bound arguments and its result.  Ops
call other public ops internally (an nn module calls ``ops.conv3d``, which may
call helpers that are themselves public), so only the outermost call is
recorded: tracing is suspended while a recorded op runs.  Without an active
tracer the wrapper costs one ``ContextVar.get`` per call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar

from lattice_contract.dialect import Int32CoordinateError

__all__ = ["Tracer", "active_tracer", "traced", "tracing"]

P = ParamSpec("P")
R = TypeVar("R")


class Tracer(Protocol):
    """What the exporter installs: one callback per outermost public op call."""

    def record(
        self,
        op_name: str,
        fn: Callable[..., Any],
        bound_arguments: inspect.BoundArguments,
        result: Any,
    ) -> None:
        """Observe one op call; ``op_name`` is the schema's python name of the op."""


_TRACER: ContextVar[Tracer | None] = ContextVar("torch_lattice_tracer", default=None)


def active_tracer() -> Tracer | None:
    """The tracer recording calls in this context, if any."""
    return _TRACER.get()


@contextmanager
def tracing(tracer: Tracer) -> Iterator[Tracer]:
    """Record every outermost public op call made inside the block with ``tracer``."""
    token = _TRACER.set(tracer)
    try:
        yield tracer
    finally:
        _TRACER.reset(token)


def traced(op_name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a public op so an active tracer sees its calls as ``op_name``."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            tracer = _TRACER.get()
            if tracer is None:
                try:
                    return fn(*args, **kwargs)
                except Int32CoordinateError as err:  # the kernel map cannot name the op
                    raise err.with_op(op_name) from None
            token = _TRACER.set(None)
            try:
                result = fn(*args, **kwargs)
                # Recording is the exporter's code, not the model's: it runs untraced too.
                tracer.record(op_name, fn, signature.bind(*args, **kwargs), result)
            except Int32CoordinateError as err:
                raise err.with_op(op_name) from None
            finally:
                _TRACER.reset(token)
            return result

        wrapper.__lattice_op__ = op_name  # type: ignore[attr-defined]
        return wrapper

    return decorate
