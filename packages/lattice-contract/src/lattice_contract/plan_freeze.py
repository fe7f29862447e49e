"""Freezing a native plan payload: one table-driven pass over every rule.

The native importer (``lattice_mlir.import_plan``) parses and verifies
``graph.mlir`` with real MLIR and hands Python a plain payload of dicts and
lists.  :func:`freeze_plan` checks every part of it against the dialect
schema and turns it into the frozen records of
:mod:`lattice_contract.plan_records`, so that

* a runtime never lowers a payload the schema does not describe (an unknown
  op, a wrong operand count, a missing or ill-typed attribute, a bad enum
  value, a malformed packing map);
* value labels form a proper SSA program (defined once, defined before use,
  every return defined);
* the call ABI (:mod:`lattice_contract.plan_abi`) is consistent; and
* no lowering can mutate importer state (attributes are deep-frozen:
  mappings become ``MappingProxyType``, lists become tuples).

Payloads are almost always well formed, and native verification plus plan
import has a budget of 5 ms for a 200-op graph.  So each rule is written
once, as a cheap test on the common shape (an exact ``list`` of exact
``int`` for a triple, an exact ``str`` in a precomputed value set for an
enum); only when that test fails does the same rule look closer, accept the
other shapes a payload may legitimately use (tuples, mappings, ``int`` for
an ``f32``), and build its message.  The per-op rules come from tables
computed once from the schema (:data:`_OP_RULES`).  Every failure is a
:class:`~lattice_contract.plan_records.PlanError` naming the op or label
involved and what the producer has to change.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from lattice_contract.constants import CURRENT_IR_VERSION, WEIGHT_FILE
from lattice_contract.digest import SCHEMA_DIGEST
from lattice_contract.options import GROUP_SIZES
from lattice_contract.plan_abi import check_role_types, freeze_arguments, freeze_outputs
from lattice_contract.plan_payload import (
    is_int,
    record,
    require_list,
    require_mapping,
    require_str,
    show,
)
from lattice_contract.plan_records import (
    ENTRY_NAME,
    PlanError,
    PlanOperation,
    RuntimePlan,
    ValueType,
)
from lattice_contract.schema import (
    DIALECT,
    PACKED_DTYPE_OF_BITS,
    PACKING_FIELDS,
    SCHEMA,
    AttrDef,
    AttrKind,
    OpDef,
    WeightLayout,
)
from lattice_contract.schema_rules import rule_message

__all__ = ["LEGACY_LAYOUTS", "freeze_plan"]

LEGACY_LAYOUTS: Mapping[str, str] = MappingProxyType(
    {
        "conv3d_o_zyx_i": (
            "the legacy z-major convolution layout is not accepted; permute the kernel "
            "axes once to (C_out, Kx, Ky, Kz, C_in) and declare conv3d_o_xyz_i"
        ),
    }
)
"""Retired layout names with the migration each needs."""

_PAYLOAD_KEYS = (
    "ir_version",
    "schema_digest",
    "weight_file",
    "name",
    "args",
    "ops",
    "returns",
    "outputs",
    "types",
)
_TYPE_KINDS = ("sparse", "weight", "tensor")
_OP_FIELDS = ("name", "operands", "results", "attrs", "operand_types", "result_types")

# Integer ranges per attribute kind: MLIR stores i64, and triples (kernel
# sizes, strides, paddings, dilations) act on int32 coordinates, so no entry
# can exceed int32 (the native verifier applies the same bound).
_INT_RANGES: Mapping[AttrKind, tuple[int, int]] = MappingProxyType(
    {AttrKind.triple: (-(2**31), 2**31 - 1), AttrKind.i64: (-(2**63), 2**63 - 1)}
)
_TRIPLE_MIN, _TRIPLE_MAX = _INT_RANGES[AttrKind.triple]
_I64_MIN, _I64_MAX = _INT_RANGES[AttrKind.i64]
_F32 = struct.Struct("<f")
_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})

Where = tuple[int, str, tuple[str, ...]]
"""An op's index, name and result labels: what :func:`_at` spells when a message is needed."""


def _where(index: int, name: str) -> str:
    return f"op #{index} ({name})"


def _at(where: Where) -> str:
    """The ``op #3 (lattice.conv3d -> v2)`` prefix of a message about one op."""
    index, name, results = where
    return _where(index, f"{name} -> {', '.join(results)}" if results else name)


def _refused(rule_id: str, problem: str) -> PlanError:
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


class _AttrRule(NamedTuple):
    """One schema attribute with what its freezer needs, computed once."""

    name: str
    freeze: Callable[[_AttrRule, Any, Where], Any]
    minimum: int | float | None
    exclusive_minimum: bool
    values: frozenset[str] | None  # closed value set of an enum, string or i64 attribute
    required: bool
    default: Any  # filled in when an optional attribute is absent (None: left out)
    definition: AttrDef


def _attr_prefix(rule: _AttrRule, where: Where) -> str:
    return f"{_at(where)}: attribute {rule.name!r}"


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
            raise _refused("geometry.int32", problem)
        raise PlanError(problem)


def _three(value: Any, entry_ok: Callable[[Any], bool]) -> bool:
    """Whether ``value`` is a sequence (not text) of three entries that each pass ``entry_ok``."""
    return (
        not isinstance(value, (str, bytes))
        and isinstance(value, Sequence)
        and len(value) == 3
        and all(entry_ok(v) for v in value)
    )


def _freeze_triple(rule: _AttrRule, value: Any, where: Where) -> tuple[int, int, int]:
    if type(value) is list and len(value) == 3:
        a, b, c = value
        if type(a) is int and type(b) is int and type(c) is int:
            low = rule.minimum
            least = min(a, b, c)
            if (
                (low is None or least >= low)
                and least >= _TRIPLE_MIN
                and max(a, b, c) <= _TRIPLE_MAX
            ):
                return (a, b, c)
    what = _attr_prefix(rule, where)
    if not _three(value, is_int):
        raise _refused(
            "attr.triple", f"{what} must be three integers (array<i64: a, b, c>), got {show(value)}"
        )
    triple = (int(value[0]), int(value[1]), int(value[2]))
    if rule.minimum is not None and any(v < rule.minimum for v in triple):
        raise _refused(
            "attr.minimum", f"{what} must have every entry >= {rule.minimum}, got {show(triple)}"
        )
    _check_int_range(what, AttrKind.triple, triple)
    return triple


def _freeze_i64(rule: _AttrRule, value: Any, where: Where) -> int:
    if (
        type(value) is int
        and (rule.minimum is None or value >= rule.minimum)
        and _I64_MIN <= value <= _I64_MAX
        and (rule.values is None or str(value) in rule.values)
    ):
        return value
    what = _attr_prefix(rule, where)
    if not is_int(value):
        raise PlanError(f"{what} must be an integer (i64), got {show(value)}")
    if rule.minimum is not None and value < rule.minimum:
        raise _refused("attr.minimum", f"{what} must be >= {rule.minimum}, got {show(value)}")
    _check_int_range(what, AttrKind.i64, (value,))
    allowed = rule.definition.spec.allowed
    if allowed and str(int(value)) not in allowed:
        raise _refused("attr.allowed", f"{what} must be one of {', '.join(allowed)}, got {value}")
    return int(value)


def _freeze_f64_triple(rule: _AttrRule, value: Any, where: Where) -> tuple[float, float, float]:
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
        raise _refused(
            finite, f"{what} must be three finite numbers (array<f64: a, b, c>), got {show(value)}"
        )
    floats = (float(value[0]), float(value[1]), float(value[2]))
    if low is not None and any(v < low or (rule.exclusive_minimum and v == low) for v in floats):
        bound = ">" if rule.exclusive_minimum else ">="
        raise _refused("attr.minimum", f"{what} must have every entry {bound} {low}, got {floats}")
    return floats


def _freeze_f32(rule: _AttrRule, value: Any, where: Where) -> float:
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
        raise _refused("attr.finite", f"{what} = {show(value)} is outside the f32 range") from None
    if not math.isfinite(number):
        raise _refused("attr.finite", f"{what} must be finite, got {number}")
    try:
        number = _F32.unpack(_F32.pack(number))[0]
    except OverflowError:
        raise _refused("attr.finite", f"{what} = {number} is outside the f32 range") from None
    if low is not None:
        bound_value = float(low)
        if number < bound_value or (rule.exclusive_minimum and number == bound_value):
            bound = ">" if rule.exclusive_minimum else ">="
            raise _refused("attr.minimum", f"{what} must be {bound} {low}, got {number}")
    return number


def _freeze_text(rule: _AttrRule, value: Any, where: Where) -> str:
    """An enum, string or symbol attribute, as an exact ``str``."""
    if type(value) is str and value and (rule.values is None or value in rule.values):
        return value
    what = _attr_prefix(rule, where)
    text = str(require_str(value, what))  # a str subclass becomes a plain str
    if rule.values is None or text in rule.values:
        return text
    spec = rule.definition.spec
    if spec.enum is None:
        raise _refused(
            "attr.allowed", f"{what} must be one of {', '.join(spec.allowed)}; got {text!r}"
        )
    hint = LEGACY_LAYOUTS.get(text) if spec.enum is WeightLayout else None
    if hint is not None:
        raise _refused("attr.allowed", f"{what}: {hint}")
    raise _refused(
        "attr.allowed",
        f"{what} has invalid #{DIALECT}.{spec.enum.__mnemonic__} value {text!r}; "
        f"expected one of {', '.join(m.value for m in spec.enum)}",
    )


def _freeze_packing_attr(rule: _AttrRule, value: Any, where: Where) -> Mapping[str, Any]:
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
            if not is_int(item) or item not in GROUP_SIZES:
                raise _refused(
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
    # Each of GROUP_SIZES is a multiple of 32 / bits: a group fills whole uint32 words.
    return MappingProxyType(frozen)


_ENUM_VALUES = MappingProxyType({e: frozenset(m.value for m in e) for e in SCHEMA.enums})

_FREEZERS: Mapping[AttrKind, Callable[[_AttrRule, Any, Where], Any]] = MappingProxyType(
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


def _attr_rule(attr: AttrDef) -> _AttrRule:
    spec = attr.spec
    values: frozenset[str] | None = None
    if spec.enum is not None:
        values = _ENUM_VALUES[spec.enum]
    elif spec.allowed:
        values = frozenset(spec.allowed)
    freeze = _FREEZERS.get(spec.kind)
    if freeze is None:  # pragma: no cover - a schema kind this freezer was not taught
        raise TypeError(f"the plan freezer cannot read attribute kind {spec.kind.value}")
    return _AttrRule(
        attr.name,
        freeze,
        spec.minimum,
        spec.exclusive_minimum,
        values,
        spec.required,
        spec.default,
        attr,
    )


# ---------------------------------------------------------------------------
# Op rules.


class _OpRule(NamedTuple):
    """One schema op, flattened for the freezer (keyed by its full MLIR name)."""

    definition: OpDef
    min_operands: int
    max_operands: int | None
    result_count: int
    attrs: tuple[_AttrRule, ...]
    attr_names: frozenset[str]


_OP_RULES: Mapping[str, _OpRule] = MappingProxyType(
    {
        d.mlir_name: _OpRule(
            d,
            d.min_operands,
            d.max_operands,
            len(d.results),
            tuple(_attr_rule(a) for a in d.attributes),
            frozenset(a.name for a in d.attributes),
        )
        for d in SCHEMA.ops.values()
    }
)


def _resolve_op(index: int, name: Any) -> tuple[str, _OpRule]:
    """The op's exact name and rule; a PlanError says why the name is not a schema op."""
    name = str(require_str(name, f"op #{index}.name"))
    rule = _OP_RULES.get(name)
    if rule is not None:
        return name, rule
    prefix = DIALECT + "."
    if not name.startswith(prefix):
        raise PlanError(
            f"op #{index} is {name!r}: only {DIALECT} dialect operations may appear in the "
            "entry body"
        )
    short = name[len(prefix) :]
    if short.startswith("quantized_"):
        raise PlanError(
            f"op #{index} is {name!r}: quantized op variants are not part of the dialect; "
            f"use {prefix}{short[len('quantized_') :]} with a packed lattice.weight "
            "(#lattice.packing<...>) instead"
        )
    raise PlanError(
        f"op #{index} is {name!r}, which the lattice schema does not define; "
        f"known ops: {', '.join(sorted(SCHEMA.ops))}"
    )


def _labels(raw: Any, what: Callable[[], str]) -> tuple[str, ...]:
    """A list of non-empty strings as a tuple."""
    if type(raw) is list or type(raw) is tuple:
        items = tuple(raw)
    else:
        items = tuple(require_list(raw, what()))
    try:
        "".join(items)  # every entry a string, checked in C
        plain = "" not in items
    except TypeError:
        plain = False
    if not plain:
        for value in items:
            require_str(value, f"{what()} entry")
    return items


def _plain_labels(labels: list[Any]) -> bool:
    """Whether every entry of ``labels`` is a non-empty string (the common case)."""
    try:
        "".join(labels)  # every entry a string, checked in C
    except TypeError:
        return False
    return "" not in labels


def _operand_count_error(where: str, definition: OpDef, count: int) -> PlanError:
    low, high = definition.min_operands, definition.max_operands
    expected = f"{low}" if low == high else (f"{low} to {high}" if high else f"at least {low}")
    names = ", ".join(
        o.name + ("?" if o.optional else "*" if o.variadic else "") for o in definition.operands
    )
    return PlanError(f"{where} has {count} operand(s); the schema expects {expected} ({names})")


def _check_known_attrs(attrs_raw: Mapping[Any, Any], rule: _OpRule, where: Where) -> None:
    """Raise when ``attrs_raw`` has an attribute the op does not take."""
    unknown = sorted(show(k) for k in set(attrs_raw) - rule.attr_names)
    if unknown:
        known = [a.name for a in rule.attrs]
        raise _refused(
            "attr.declared",
            f"{_at(where)} has unknown attribute(s) {', '.join(unknown)} "
            f"({where[1]} takes {', '.join(known) or 'no attributes'})",
        )


_new_object = object.__new__


def _freeze_op(index: int, raw: Any, defined: dict[str, str]) -> PlanOperation:
    """Op record ``index`` checked against its schema op and the SSA labels so far.

    ``defined`` maps each label defined so far to its type text; operands must
    be in it with the same type and results must not.  The results are added.
    """
    try:  # six fields, each present: exactly the op fields (a key lookup is cheaper than a set)
        if type(raw) is not dict or len(raw) != len(_OP_FIELDS):
            raise KeyError
        name, operands, results = raw["name"], raw["operands"], raw["results"]
        attrs_raw, operand_types, result_types = (
            raw["attrs"],
            raw["operand_types"],
            raw["result_types"],
        )
    except KeyError:
        item = record(raw, f"op #{index}", _OP_FIELDS)
        name, operands, results = item["name"], item["operands"], item["results"]
        attrs_raw, operand_types = item["attrs"], item["operand_types"]
        result_types = item["result_types"]
    rule = _OP_RULES.get(name) if type(name) is str else None
    if rule is None:
        name, rule = _resolve_op(index, name)
    if (
        type(operands) is list
        and type(results) is list
        and type(operand_types) is list
        and type(result_types) is list
        and _plain_labels(operands + results + operand_types + result_types)
    ):
        operands, results = tuple(operands), tuple(results)
        operand_types, result_types = tuple(operand_types), tuple(result_types)
        where: Where = (index, name, results)
    else:
        results = _labels(results, lambda: f"{_where(index, name)}.results")
        where = (index, name, results)
        operands = _labels(operands, lambda: f"{_at(where)}.operands")
        operand_types = _labels(operand_types, lambda: f"{_at(where)}.operand_types")
        result_types = _labels(result_types, lambda: f"{_at(where)}.result_types")
    definition, low, high, result_count, attr_rules, _ = rule
    count = len(operands)
    if count < low or (high is not None and count > high):
        raise _operand_count_error(_at(where), definition, count)
    if len(results) != result_count:
        raise PlanError(
            f"{_at(where)} has {len(results)} result(s); the schema expects "
            f"{result_count} ({', '.join(r.name for r in definition.results)})"
        )
    if len(operand_types) != count:
        raise PlanError(
            f"{_at(where)} lists {len(operand_types)} operand type(s) for {count} operand(s)"
        )
    if len(result_types) != len(results):
        raise PlanError(
            f"{_at(where)} lists {len(result_types)} result type(s) for {len(results)} result(s)"
        )

    if type(attrs_raw) is not dict:
        attrs_raw = require_mapping(attrs_raw, f"{_at(where)}.attrs")
    attrs = _NO_ATTRS
    frozen: dict[str, Any] = {}
    given = 0
    try:
        for attr in attr_rules:
            if attr.name in attrs_raw:
                frozen[attr.name] = attr.freeze(attr, attrs_raw[attr.name], where)
                given += 1
            elif attr.required:
                raise _refused(
                    "attr.required",
                    f"{_at(where)} lacks required attribute {attr.name!r} "
                    f"({attr.definition.spec.kind.value})",
                )
            elif attr.default is not None:  # what the absent attribute means
                frozen[attr.name] = attr.default
    except PlanError:
        _check_known_attrs(attrs_raw, rule, where)  # an unknown attribute is reported first
        raise
    if given != len(attrs_raw):
        _check_known_attrs(attrs_raw, rule, where)
    if frozen:
        attrs = MappingProxyType(frozen)

    for label, type_text in zip(operands, operand_types, strict=True):
        known_type = defined.get(label)
        if known_type == type_text:
            continue
        if known_type is None:
            raise PlanError(
                f"{_at(where)} uses value {label!r} before it is defined; ops must come in "
                "def-before-use order"
            )
        raise PlanError(
            f"{_at(where)} uses {label!r} as {type_text!r} but it was defined as {known_type!r}"
        )
    for label, type_text in zip(results, result_types, strict=True):
        if label in defined:
            raise PlanError(f"{_at(where)} redefines value label {label!r}; labels are SSA")
        defined[label] = type_text
    # Filling the instance dictionary yields the same frozen, equal record as
    # the dataclass constructor, which pays an ``object.__setattr__`` per field
    # (PlanOperation has no ``__post_init__`` to skip).
    op: PlanOperation = _new_object(PlanOperation)
    fields = op.__dict__
    fields["name"] = name
    fields["definition"] = definition
    fields["operands"] = operands
    fields["results"] = results
    fields["attrs"] = attrs
    fields["operand_types"] = operand_types
    fields["result_types"] = result_types
    return op


# ---------------------------------------------------------------------------
# The payload.


def _freeze_types(raw: Any) -> Mapping[str, ValueType]:
    table = require_mapping(raw, "plan 'types'")
    frozen: dict[str, ValueType] = {}
    for text, entry in table.items():
        what = f"plan 'types'[{show(text)}]"
        require_str(text, "a plan 'types' key")
        item = record(entry, what, ("kind", "dtype"), ("shape", "family"))
        kind = require_str(item["kind"], f"{what}.kind")
        if kind not in _TYPE_KINDS:
            raise PlanError(f"{what}.kind is {kind!r}; expected one of {', '.join(_TYPE_KINDS)}")
        dtype = require_str(item["dtype"], f"{what}.dtype")
        shape_raw = item.get("shape")
        shape: tuple[int, ...] | None = None
        if kind == "tensor":
            dims = require_list(shape_raw, f"{what}.shape")
            if not all(is_int(d) and -1 <= d <= _I64_MAX for d in dims):
                raise PlanError(
                    f"{what}.shape must be ints >= -1 (-1 is dynamic) within i64, got {show(dims)}"
                )
            shape = tuple(int(d) for d in dims)
        elif shape_raw is not None:
            raise PlanError(f"{what} is a {kind} type and must have shape null")
        family_raw = item.get("family")
        family: str | None = None
        if kind == "weight":
            family = str(require_str(family_raw, f"{what}.family"))
        elif family_raw is not None:
            raise PlanError(f"{what} is a {kind} type and must have family null")
        frozen[str(text)] = ValueType(kind=str(kind), dtype=str(dtype), shape=shape, family=family)
    return MappingProxyType(frozen)


def _check_header(payload: Mapping[str, Any]) -> tuple[int, str, str]:
    """``(ir_version, schema_digest, entry name)`` once each matches this release."""
    version = payload["ir_version"]
    if not is_int(version) or version != CURRENT_IR_VERSION:
        raise PlanError(
            f"lattice.ir_version is {show(version)}; this release reads only version "
            f"{CURRENT_IR_VERSION}: re-export the model with a current producer"
        )
    digest = payload["schema_digest"]
    if not isinstance(digest, str) or not digest:
        raise PlanError(
            "lattice.schema_digest is missing; re-export the model so the module records the "
            "digest of the dialect schema it was written against"
        )
    if digest != SCHEMA_DIGEST:
        raise PlanError(
            f"lattice.schema_digest {digest!r} does not match this release's schema "
            f"({SCHEMA_DIGEST}); producer and consumer disagree on the dialect, re-export "
            "with a matching lattice_contract"
        )
    weight_file = payload["weight_file"]
    if weight_file != WEIGHT_FILE:
        raise PlanError(
            f"lattice.weight_file is {show(weight_file)}; artifacts store weights only in "
            f"{WEIGHT_FILE!r}"
        )
    name = require_str(payload["name"], "plan 'name'")
    if name != ENTRY_NAME:
        raise PlanError(f"the entry function is @{name}; it must be @{ENTRY_NAME}")
    return int(version), SCHEMA_DIGEST, ENTRY_NAME


def freeze_plan(raw: Mapping[str, Any]) -> RuntimePlan:
    """Check a native importer payload against the schema and freeze it (``from_native``)."""
    payload = require_mapping(raw, "the native plan payload")
    missing = [k for k in _PAYLOAD_KEYS if k not in payload]
    if missing:
        raise PlanError(
            f"the native plan payload lacks {', '.join(map(repr, missing))}; rebuild "
            "lattice_mlir against this lattice_contract"
        )
    unknown = sorted(show(k) for k in set(payload) - set(_PAYLOAD_KEYS))
    if unknown:
        raise PlanError(f"the native plan payload has unknown field(s) {', '.join(unknown)}")
    version, digest, name = _check_header(payload)
    types = _freeze_types(payload["types"])
    args = freeze_arguments(payload)

    defined: dict[str, str] = {arg.name: arg.type for arg in args}  # label -> type text
    ops: list[PlanOperation] = []
    for index, entry in enumerate(require_list(payload["ops"], "plan 'ops'")):
        ops.append(_freeze_op(index, entry, defined))

    returns = tuple(
        str(require_str(v, "return label"))
        for v in require_list(payload["returns"], "plan 'returns'")
    )
    if not returns:
        raise PlanError(f"@{ENTRY_NAME} returns nothing; an executable artifact returns a value")
    for label in returns:
        if label not in defined:
            raise PlanError(f"return value {label!r} is not defined by any argument or op")
    outputs = freeze_outputs(payload, returns, defined)

    missing_types = sorted(t for t in set(defined.values()) if t not in types)
    if missing_types:
        raise PlanError(
            f"plan 'types' has no entry for {', '.join(map(repr, missing_types))}; the native "
            "importer must describe every type it uses"
        )
    check_role_types(args, outputs, types)
    return RuntimePlan(
        ir_version=version,
        schema_digest=digest,
        weight_file=WEIGHT_FILE,
        name=name,
        args=args,
        ops=tuple(ops),
        returns=returns,
        outputs=outputs,
        types=types,
    )
