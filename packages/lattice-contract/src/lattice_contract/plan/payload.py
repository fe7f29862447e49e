"""Readers of untrusted native plan payloads, shared by the freezer and the ABI checks.

A payload is only a transport (dicts, lists, strings, numbers), and nothing
in it can be trusted to be of the shape it claims: each reader here checks
one shape and raises :class:`~lattice_contract.plan.records.PlanError`
naming the field, and :func:`show` renders any value for a message without
ever failing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lattice_contract.plan.records import PlanError

__all__ = ["is_int", "record", "require_list", "require_mapping", "require_str", "show"]


def show(value: Any, depth: int = 0) -> str:
    """A short, never-failing rendering of a payload value for a message.

    ``repr`` cannot be used on hostile payloads: an integer of thousands of
    digits raises ValueError, a list nested thousands deep RecursionError,
    and a long one floods the message.
    """
    if type(value) is int:
        if value.bit_length() > 64:
            return f"<an integer of {value.bit_length()} bits>"
        return repr(value)
    if type(value) in (str, float, bool) or value is None:
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    if type(value) in (list, tuple):
        if depth >= 2:
            return "[...]"
        items = [show(v, depth + 1) for v in value[:4]]
        return "[" + ", ".join(items + (["..."] if len(value) > 4 else [])) + "]"
    if type(value) is dict:
        if depth >= 2:
            return "{...}"
        pairs = [f"{show(k, 2)}: {show(v, depth + 1)}" for k, v in list(value.items())[:4]]
        return "{" + ", ".join(pairs + (["..."] if len(value) > 4 else [])) + "}"
    return f"<{type(value).__name__}>"


def is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an ``int`` to Python, not to the contract)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_mapping(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else a PlanError naming ``what``."""
    if not isinstance(value, Mapping):
        raise PlanError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def require_list(value: Any, what: str) -> Sequence[Any]:
    """``value`` when it is a list-like sequence (not text), else a PlanError."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PlanError(f"{what} must be a list, got {type(value).__name__}")
    return value


def require_str(value: Any, what: str, *, empty: bool = False) -> str:
    """``value`` when it is a (non-empty unless ``empty``) string, else a PlanError."""
    if not isinstance(value, str):
        raise PlanError(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise PlanError(f"{what} must not be empty")
    return value


def record(
    raw: Any, what: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """A mapping with every field of ``keys``, any of ``optional`` and nothing else."""
    if type(raw) is dict and all(k in raw for k in keys):
        extra = len(raw) - len(keys)
        if extra == 0 or (extra <= len(optional) and sum(k in raw for k in optional) == extra):
            return raw  # the common, well-formed case: the required fields and known ones
    item = require_mapping(raw, what)
    missing = [k for k in keys if k not in item]
    if missing:
        raise PlanError(f"{what} lacks {', '.join(map(repr, missing))}")
    unknown = sorted(show(k) for k in set(item) - set(keys) - set(optional))
    if unknown:
        raise PlanError(
            f"{what} has unknown field(s) {', '.join(unknown)}; the payload "
            f"fields are {', '.join(keys + optional)}"
        )
    return item
