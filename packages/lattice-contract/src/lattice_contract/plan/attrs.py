"""The attribute rules of the plan freezer: one function per schema attribute kind.

Each :class:`AttrRule` is one schema attribute with what its freezer needs,
computed once (:func:`attr_rule`); :mod:`lattice_contract.plan.freeze`
applies them to every op record.  A rule is written once, as a cheap test on
the common shape (an exact ``list`` of exact ``int`` for a triple, an exact
``str`` in a precomputed value set for an enum); only when that test fails
does it look closer, accept the other shapes a payload may legitimately use
(tuples, mappings, ``int`` for an ``f32``) and build its message, a
:class:`~lattice_contract.plan.records.PlanError` that names the op and the
attribute and, for a schema rule, carries its ID.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from lattice_contract.dialect import (
    DIALECT,
    GROUP_SIZES,
    PACKED_DTYPE_OF_BITS,
    PACKING_FIELDS,
    SCHEMA,
    AttrDef,
    AttrKind,
    WeightLayout,
    is_group_size,
    rule_message,
    triple_violation,
)
from lattice_contract.plan.payload import is_int, require_str, show
from lattice_contract.plan.records import PlanError

__all__ = [
    "I64_MAX",
    "LEGACY_LAYOUTS",
    "NO_ATTRS",
    "AttrRule",
    "Where",
    "at",
    "attr_rule",
    "freeze_packing",
    "refused",
    "where_text",
]

LEGACY_LAYOUTS: Mapping[str, str] = MappingProxyType(
    {
        "conv3d_o_zyx_i": (
            "the legacy z-major convolution layout is not accepted; permute the kernel "
            "axes once to (C_out, Kx, Ky, Kz, C_in) and declare conv3d_o_xyz_i"
        ),
    }
)
"""Retired layout names with the migration each needs."""

# Integer ranges per attribute kind: MLIR stores i64, and triples (kernel
# sizes, strides, paddings, dilations) act on int32 coordinates, so no entry
# can exceed int32 (the native verifier applies the same bound).
_INT_RANGES: Mapping[AttrKind, tuple[int, int]] = MappingProxyType(
    {AttrKind.triple: (-(2**31), 2**31 - 1), AttrKind.i64: (-(2**63), 2**63 - 1)}
)
_I64_MIN, I64_MAX = _INT_RANGES[AttrKind.i64]
_F32 = struct.Struct("<f")
NO_ATTRS: Mapping[str, Any] = MappingProxyType({})

Where = tuple[int, str, tuple[str, ...]]
"""An op's index, name and result labels: what :func:`at` spells when a message is needed."""


def where_text(index: int, name: str) -> str:
    """The ``op #3 (lattice.conv3d)`` prefix of a message about an op whose results are unknown."""
    return f"op #{index} ({name})"


def at(where: Where) -> str:
    """The ``op #3 (lattice.conv3d -> v2)`` prefix of a message about one op."""
    index, name, results = where
    return where_text(index, f"{name} -> {', '.join(results)}" if results else name)


def refused(rule_id: str, problem: str) -> PlanError:
    """The PlanError of a payload that breaks schema rule ``rule_id`` (its one message)."""
    return PlanError(rule_message(rule_id, problem))


def _real_number(value: Any) -> bool:
    """An int or a float (not a bool), finite or not."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _finite_number(value: Any) -> bool:
    """A real number that is finite as an f64 (an integer too large for f64 is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite converts an int to float first
        return False


# ---------------------------------------------------------------------------
# Attribute rules, one function per attribute kind.


class AttrRule(NamedTuple):
    """One schema attribute with what its freezer needs, computed once."""

    name: str
    freeze: Callable[[AttrRule, Any, Where], Any]
    minimum: int | float | None
    int_minimum: int | None  # ``minimum`` of a triple, as the int :func:`triple_violation` takes
    exclusive_minimum: bool
    values: frozenset[str] | None  # closed value set of an enum, string or i64 attribute
    required: bool
    default: Any  # filled in when an optional attribute is absent (None: left out)
    definition: AttrDef


def _attr_prefix(rule: AttrRule, where: Where) -> str:
    return f"{at(where)}: attribute {rule.name!r}"


def _check_int_range(what: str, kind: AttrKind, values: tuple[int, ...]) -> None:
    low, high = _INT_RANGES[kind]
    if any(v < low or v > high for v in values):
        reason = (
            "coordinates are int32, so no kernel size, stride, padding or dilation can leave "
            "that range"
            if kind is AttrKind.triple
            else "the attribute is stored as i64"
        )
        problem = f"{what} = {show(values)} is outside [{low}, {high}]: {reason}"
        if kind is AttrKind.triple:
            raise refused("geometry.int32", problem)
        raise PlanError(problem)


def _three(value: Any, entry_ok: Callable[[Any], bool]) -> bool:
    """Whether ``value`` is a sequence (not text) of three entries that each pass ``entry_ok``."""
    return (
        not isinstance(value, (str, bytes))
        and isinstance(value, Sequence)
        and len(value) == 3
        and all(entry_ok(v) for v in value)
    )


def _freeze_triple(rule: AttrRule, value: Any, where: Where) -> tuple[int, int, int]:
    if type(value) is list and len(value) == 3:
        a, b, c = value
        if type(a) is int and type(b) is int and type(c) is int:
            triple = (a, b, c)
            if triple_violation(triple, rule.int_minimum) is None:
                return triple
    what = _attr_prefix(rule, where)
    if not _three(value, is_int):
        raise refused(
            "attr.triple", f"{what} must be three integers (array<i64: a, b, c>), got {show(value)}"
        )
    triple = (int(value[0]), int(value[1]), int(value[2]))
    broken = triple_violation(triple, rule.int_minimum)
    if broken == "attr.minimum":
        raise refused(
            "attr.minimum", f"{what} must have every entry >= {rule.minimum}, got {show(triple)}"
        )
    if broken is not None:
        _check_int_range(what, AttrKind.triple, triple)
    return triple


def _freeze_i64(rule: AttrRule, value: Any, where: Where) -> int:
    if (
        type(value) is int
        and (rule.minimum is None or value >= rule.minimum)
        and _I64_MIN <= value <= I64_MAX
        and (rule.values is None or str(value) in rule.values)
    ):
        return value
    what = _attr_prefix(rule, where)
    if not is_int(value):
        raise PlanError(f"{what} must be an integer (i64), got {show(value)}")
    if rule.minimum is not None and value < rule.minimum:
        raise refused("attr.minimum", f"{what} must be >= {rule.minimum}, got {show(value)}")
    _check_int_range(what, AttrKind.i64, (value,))
    allowed = rule.definition.spec.allowed
    if allowed and str(int(value)) not in allowed:
        raise refused("attr.allowed", f"{what} must be one of {', '.join(allowed)}, got {value}")
    return int(value)


def _freeze_f64_triple(rule: AttrRule, value: Any, where: Where) -> tuple[float, float, float]:
    low = rule.minimum
    if type(value) is list and len(value) == 3:
        a, b, c = value
        if (
            type(a) is float
            and type(b) is float
            and type(c) is float
            and math.isfinite(a)
            and math.isfinite(b)
            and math.isfinite(c)
        ):
            least = min(a, b, c)
            if low is None or least > low or (not rule.exclusive_minimum and least == low):
                return (a, b, c)
    what = _attr_prefix(rule, where)
    if not _three(value, _finite_number):
        # three numbers of which one is not finite break attr.finite, anything else the triple
        finite = "attr.triple" if not _three(value, _real_number) else "attr.finite"
        raise refused(
            finite, f"{what} must be three finite numbers (array<f64: a, b, c>), got {show(value)}"
        )
    floats = (float(value[0]), float(value[1]), float(value[2]))
    if low is not None and any(v < low or (rule.exclusive_minimum and v == low) for v in floats):
        bound = ">" if rule.exclusive_minimum else ">="
        raise refused("attr.minimum", f"{what} must have every entry {bound} {low}, got {floats}")
    return floats


def _freeze_f32(rule: AttrRule, value: Any, where: Where) -> float:
    low = rule.minimum
    if type(value) is float and math.isfinite(value):
        try:  # the attribute is f32: keep exactly the f32 value, however it was transported
            number: float = _F32.unpack(_F32.pack(value))[0]
        except OverflowError:
            number = math.inf  # outside the f32 range: diagnosed below
        if math.isfinite(number) and (
            low is None or number > low or (number == low and not rule.exclusive_minimum)
        ):
            return number
    what = _attr_prefix(rule, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(f"{what} must be a number (f32), got {show(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise refused("attr.finite", f"{what} = {show(value)} is outside the f32 range") from None
    if not math.isfinite(number):
        raise refused("attr.finite", f"{what} must be finite, got {number}")
    try:
        number = _F32.unpack(_F32.pack(number))[0]
    except OverflowError:
        raise refused("attr.finite", f"{what} = {number} is outside the f32 range") from None
    if low is not None:
        bound_value = float(low)
        if number < bound_value or (rule.exclusive_minimum and number == bound_value):
            bound = ">" if rule.exclusive_minimum else ">="
            raise refused("attr.minimum", f"{what} must be {bound} {low}, got {number}")
    return number


def _freeze_text(rule: AttrRule, value: Any, where: Where) -> str:
    """An enum, string or symbol attribute, as an exact ``str``."""
    if type(value) is str and value and (rule.values is None or value in rule.values):
        return value
    what = _attr_prefix(rule, where)
    text = str(require_str(value, what))  # a str subclass becomes a plain str
    if rule.values is None or text in rule.values:
        return text
    spec = rule.definition.spec
    if spec.enum is None:
        raise refused(
            "attr.allowed", f"{what} must be one of {', '.join(spec.allowed)}; got {text!r}"
        )
    hint = LEGACY_LAYOUTS.get(text) if spec.enum is WeightLayout else None
    if hint is not None:
        raise refused("attr.allowed", f"{what}: {hint}")
    raise refused(
        "attr.allowed",
        f"{what} has invalid #{DIALECT}.{spec.enum.__mnemonic__} value {text!r}; "
        f"expected one of {', '.join(m.value for m in spec.enum)}",
    )


def _freeze_packing_attr(rule: AttrRule, value: Any, where: Where) -> Mapping[str, Any]:
    return freeze_packing(lambda: _attr_prefix(rule, where), value)


def freeze_packing(what: Callable[[], str], value: Any) -> Mapping[str, Any]:
    """A packing map checked field by field and frozen (``what()`` prefixes a message)."""
    if not isinstance(value, Mapping):
        raise PlanError(f"{what()} must be a packing map, got {type(value).__name__}")
    if len(value) != len(PACKING_FIELDS) or any(n not in value for n, _ in PACKING_FIELDS):
        names = [n for n, _ in PACKING_FIELDS]
        missing = [n for n in names if n not in value]
        unknown = sorted(show(k) for k in set(value) - set(names))
        raise PlanError(
            f"{what()} must have exactly the fields {', '.join(names)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    frozen: dict[str, Any] = {}
    for name, enum_type in PACKING_FIELDS:
        item = value[name]
        if enum_type is None:
            if not is_group_size(item):
                raise refused(
                    "weight.group_size",
                    f"{what()}.{name} must be one of {', '.join(map(str, GROUP_SIZES))} (the "
                    f"group sizes MLX's affine quantization supports), got {show(item)}",
                )
            frozen[name] = int(item)
        else:
            allowed = _ENUM_VALUES[enum_type]
            if not isinstance(item, str) or item not in allowed:
                raise PlanError(
                    f"{what()}.{name} must be one of "
                    f"{', '.join(m.value for m in enum_type)}, got {show(item)}"
                )
            frozen[name] = str(item)
    if frozen["bits"] not in PACKED_DTYPE_OF_BITS:
        raise PlanError(
            f"{what()}.bits is {frozen['bits']!r}; a packing map describes packed storage "
            f"({', '.join(PACKED_DTYPE_OF_BITS)}), dense weights carry none"
        )
    # Each group size is a multiple of 32 / bits: a group fills whole uint32 words.
    return MappingProxyType(frozen)


_ENUM_VALUES = MappingProxyType({e: frozenset(m.value for m in e) for e in SCHEMA.enums})

_FREEZERS: Mapping[AttrKind, Callable[[AttrRule, Any, Where], Any]] = MappingProxyType(
    {
        AttrKind.triple: _freeze_triple,
        AttrKind.i64: _freeze_i64,
        AttrKind.f64_triple: _freeze_f64_triple,
        AttrKind.f32: _freeze_f32,
        AttrKind.string: _freeze_text,
        AttrKind.symbol: _freeze_text,
        AttrKind.enum: _freeze_text,
        AttrKind.packing: _freeze_packing_attr,
    }
)


def attr_rule(attr: AttrDef) -> AttrRule:
    spec = attr.spec
    values: frozenset[str] | None = None
    if spec.enum is not None:
        values = _ENUM_VALUES[spec.enum]
    elif spec.allowed:
        values = frozenset(spec.allowed)
    freeze = _FREEZERS.get(spec.kind)
    if freeze is None:  # pragma: no cover - a schema kind this freezer was not taught
        raise TypeError(f"the plan freezer cannot read attribute kind {spec.kind.value}")
    return AttrRule(
        attr.name,
        freeze,
        spec.minimum,
        None if spec.minimum is None else int(spec.minimum),
        spec.exclusive_minimum,
        values,
        spec.required,
        spec.default,
        attr,
    )
