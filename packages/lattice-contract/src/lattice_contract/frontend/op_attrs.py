"""How a functional op's keyword attributes are declared, defaulted, checked and documented.

Both runtimes' functional ops (``mlx_lattice.ops``, ``torch_lattice.ops``)
take their array arguments positionally and their attributes (``kernel_size``,
``stride``, ``mode``, ``eps``...) as keywords.  The keywords are declared
once, in :mod:`lattice_contract.frontend.ops`, as one ``TypedDict`` per op whose
fields are ``Annotated`` with an :class:`Attr` from this module:

* the ``TypedDict`` is what a runtime's op takes as ``**attrs:
  Unpack[...]``, so mypy checks a caller's keyword names and value types
  (``kernel_sise=`` is an error before anything runs);
* the :class:`Attr` says how the value is checked (with the contract's
  existing checks and messages, :mod:`lattice_contract.dialect.values`) and what an
  omitted keyword means: the textual builder's default for that attribute
  name where the schema op has one (:data:`SCHEMA_DEFAULT`), else the
  functional API's own default, written here or in the declaration once;
* :func:`normalise_attrs` applies the defaults and the checks, and refuses
  an unknown keyword with one clear message on both runtimes.

The help text of each op (its keywords, their types and defaults) is
generated from the same declaration (:func:`keywords_doc`).
"""

from __future__ import annotations

import difflib
import functools
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from lattice_contract.builder import ATTRIBUTE_DEFAULTS
from lattice_contract.dialect import as_enum, int_triple, positive_float

__all__ = [
    "REQUIRED",
    "SCHEMA_DEFAULT",
    "Attr",
    "AttrDecl",
    "IntOrTriple",
    "enum_attr",
    "finite_float_attr",
    "keyword_error",
    "keywords_doc",
    "normalise_attrs",
    "positive_float_attr",
    "raw_attr",
    "read_declaration",
    "triple_attr",
]


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


REQUIRED: Final = _Marker("REQUIRED")

IntOrTriple = int | Sequence[int]
"""A per-axis geometry keyword: one int for every axis, or three."""
"""Default of a keyword the caller must give (a ``Required[...]`` field)."""

SCHEMA_DEFAULT: Final = _Marker("SCHEMA_DEFAULT")
"""Default taken from the textual builder's table for the attribute of that name
(:data:`lattice_contract.builder.args.ATTRIBUTE_DEFAULTS`), so a graph built by
hand and one exported from the functional API mean the same thing by omission."""

Check = Callable[[object, str, str], object]
"""``check(value, keyword, op) -> normalised value``; raises the contract's error."""

Joint = Callable[[dict[str, Any], str], None]
"""``joint(attrs, op)``: checks attributes together and normalises them in place."""


@dataclass(frozen=True)
class Attr:
    """One keyword attribute's meaning: what it accepts, how it is checked, its default.

    ``check`` is None for a value the op checks together with others (an
    activation's parameters, a voxel grid's size and origin) through an
    existing shared check; the value then passes through unchanged.
    """

    accepts: str
    """What the keyword accepts, as the help text says it."""
    check: Check | None = None
    default: object = REQUIRED

    def with_default(self, default: object) -> Attr:
        """The same attribute with another default (an op's own, e.g. ``eps``)."""
        return Attr(self.accepts, self.check, default)


def triple_attr(minimum: int, default: object = SCHEMA_DEFAULT) -> Attr:
    """An int or three ints (one per axis), each at least ``minimum``; normalised to a triple."""

    def check(value: object, name: str, op: str) -> object:
        return int_triple(value, name, minimum=minimum)  # type: ignore[arg-type]

    return Attr(f"int or three ints, each >= {minimum}", check, default)


def enum_attr(enum_type: type[Enum], default: object = REQUIRED) -> Attr:
    """A schema enum member or its string value; normalised to the member."""

    def check(value: object, name: str, op: str) -> object:
        return as_enum(value, enum_type, name)

    values = " | ".join(repr(m.value) for m in enum_type)
    return Attr(f"{enum_type.__name__} or one of {values}", check, default)


def positive_float_attr(default: object = REQUIRED) -> Attr:
    """A positive finite number (``eps``); normalised to a float."""
    return Attr("positive finite number", positive_float, default)


def finite_float_attr(default: object = SCHEMA_DEFAULT) -> Attr:
    """A finite number (a fill value: what the textual builder and an f32 attribute hold)."""

    def check(value: object, name: str, op: str) -> object:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{op}: {name} must be a finite number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{op}: {name} must be a finite number, got {value!r}")
        return float(value)

    return Attr("finite number", check, default)


def raw_attr(accepts: str, default: object = SCHEMA_DEFAULT) -> Attr:
    """A value the op checks itself, with a shared check that looks at several keywords."""
    return Attr(accepts, None, default)


@dataclass(frozen=True)
class AttrDecl:
    """One op's keywords as read from its ``TypedDict``: names, meanings, resolved defaults."""

    op: str
    attrs: tuple[tuple[str, Attr, object], ...]
    """``(keyword, attribute, default)`` in declaration order; default REQUIRED or a value."""
    runtime_keywords: tuple[str, ...] = ()
    """Keywords each runtime declares itself because their type is the runtime's own
    (``coordinates``: its SparseTensor; ``scale_dtype``: its dtype)."""
    joint: Joint | None = None
    """A check of several attributes together (an existing shared check: an activation's
    parameters, a voxel grid's size and origin), run after the per-attribute ones."""

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """Every keyword the op takes, declared attributes first (computed once, read per call)."""
        return (*(name for name, _, _ in self.attrs), *self.runtime_keywords)

    def defaults(self) -> dict[str, object]:
        """Keyword -> default of every optional declared attribute."""
        return {name: d for name, _, d in self.attrs if d is not REQUIRED}


def _resolve_default(op: str, name: str, attr: Attr) -> object:
    if attr.default is not SCHEMA_DEFAULT:
        return attr.default
    if name not in ATTRIBUTE_DEFAULTS:  # pragma: no cover - a declaration error
        raise TypeError(f"{op}.{name}: the builder has no default for {name!r}; declare one")
    return ATTRIBUTE_DEFAULTS[name]


def read_declaration(
    op: str, keywords: type, runtime_keywords: Sequence[str] = (), joint: Joint | None = None
) -> AttrDecl:
    """The :class:`AttrDecl` of an op's keyword ``TypedDict``, checked for consistency.

    The class is declared ``total=False`` and each field is ``Annotated``
    with an :class:`Attr`; a field is ``Required[...]`` exactly when its
    attribute has no default, so the static type (what mypy enforces) and the
    run-time check agree.
    """
    if getattr(keywords, "__total__", True):  # pragma: no cover - a declaration error
        raise TypeError(f"{op}: declare {keywords.__name__} with total=False")
    hints = typing.get_type_hints(keywords, include_extras=True)
    attrs = []
    for name, hint in hints.items():
        required = typing.get_origin(hint) is typing.Required
        while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
            hint = typing.get_args(hint)[0]
        found = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Attr)]
        if len(found) != 1:  # pragma: no cover - a declaration error
            raise TypeError(f"{op}.{name}: annotate the field with exactly one Attr")
        attr = found[0]
        if (attr.default is REQUIRED) != required:  # pragma: no cover - a declaration error
            raise TypeError(f"{op}.{name}: Required[...] exactly when the Attr has no default")
        attrs.append((name, attr, _resolve_default(op, name, attr)))
    return AttrDecl(op, tuple(attrs), tuple(runtime_keywords), joint)


def keyword_error(
    where: str, key: str, known: Sequence[str], arrays: Sequence[str] = ()
) -> TypeError:
    """The one message for a keyword an op does not take: the closest name and the lists.

    ``arrays`` are the op's array parameters, which may also be passed by
    name: a misspelt ``bais=`` is suggested ``bias`` rather than reported as
    an unknown keyword of an op with no keywords.
    """
    hint = difflib.get_close_matches(key, [*arrays, *known], n=1)
    return TypeError(
        f"{where}: unexpected keyword {key!r}"
        + (f" (did you mean {hint[0]!r}?)" if hint else "")
        + (f"; its arrays are: {', '.join(arrays)}" if arrays else "")
        + f"; its keywords are: {', '.join(known) or 'none'}"
    )


_PLAIN = (int, str, bool, type(None))
_CHECKED: dict[tuple[Any, ...], tuple[AttrDecl, dict[str, Any]]] = {}
"""Attributes already checked, by op and typed value: a layer passes the same ones each call."""
_CHECKED_MAX = 4096


def _typed(value: object) -> object:
    """A hashable key that tells apart what compares equal (``True`` and ``1``), or None.

    Only plain values, enum members and tuples of them are keys; anything
    else (a list the caller may change later, a tensor, a NumPy integer) is
    checked afresh each call.
    """
    kind = type(value)
    if kind is float:  # -0.0 == 0.0 and nan != nan: key floats by their exact bits
        return (kind, value.hex())  # type: ignore[attr-defined]
    if kind in _PLAIN or isinstance(value, Enum):
        return (kind, value)
    if kind is tuple:
        inner = tuple(_typed(v) for v in value)  # type: ignore[attr-defined]
        return None if None in inner else (kind, inner)
    return None


def normalise_attrs(decl: AttrDecl, given: Mapping[str, object]) -> dict[str, Any]:
    """Every declared attribute of ``decl.op``: the given value checked, or its default.

    An unknown keyword and a missing required one are TypeErrors naming the
    op and the keywords it takes; each value is checked (and normalised:
    triples, enum members, floats) by its attribute's check, in declaration
    order, with the messages of :mod:`lattice_contract.dialect.values`, then the
    declaration's joint check, if any.  A layer passes the same attributes on
    every call, so values that passed are remembered by op and typed value
    (a few microseconds a check, dozens of checks a network call).
    """
    typed = tuple((k, _typed(v)) for k, v in given.items())
    key = None if any(t is None for _, t in typed) else (id(decl), typed)
    if key is not None:
        found = _CHECKED.get(key)
        if found is not None and found[0] is decl:
            return dict(found[1])
    out = _normalised(decl, given)
    if key is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = (decl, dict(out))
    return out


def _normalised(decl: AttrDecl, given: Mapping[str, object]) -> dict[str, Any]:
    names = decl.names
    for key in given:
        if key not in names:
            raise keyword_error(decl.op, key, names)
    out: dict[str, Any] = {}
    for name, attr, default in decl.attrs:
        if name in given:
            value = given[name]
        elif default is REQUIRED:
            raise TypeError(f"{decl.op}: missing required keyword {name!r} ({attr.accepts})")
        else:
            value = default
        out[name] = value if attr.check is None else attr.check(value, name, decl.op)
    if decl.joint is not None:
        decl.joint(out, decl.op)
    return out


def keywords_doc(decl: AttrDecl, runtime_docs: Mapping[str, str]) -> str:
    """The ``Keywords:`` section of an op's help text, generated from its declaration."""
    lines = ["Keywords:"]
    for name, attr, default in decl.attrs:
        when = "required" if default is REQUIRED else f"default {_shown(default)}"
        lines.append(f"    {name}: {attr.accepts} ({when}).")
    for name in decl.runtime_keywords:
        lines.append(f"    {name}: {runtime_docs[name]}")
    return "\n".join(lines)


def _shown(value: object) -> str:
    return repr(value.value) if isinstance(value, Enum) else repr(value)
