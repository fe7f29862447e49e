"""Freezing a native plan payload: one table-driven pass over every rule.

The native importer (``lattice_mlir.import_plan``) parses and verifies
``graph.mlir`` with real MLIR and hands Python a plain payload of dicts and
lists.  :func:`freeze_plan` checks every part of it against the dialect
schema and turns it into the frozen records of
:mod:`lattice_contract.plan.records`, so that

* a runtime never lowers a payload the schema does not describe (an unknown
  op, a wrong operand count, a missing or ill-typed attribute, a bad enum
  value, a malformed packing map);
* value labels form a proper SSA program (defined once, defined before use,
  every return defined);
* the call ABI (:mod:`lattice_contract.plan.abi`) is consistent; and
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
:class:`~lattice_contract.plan.records.PlanError` naming the op or label
involved and what the producer has to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from lattice_contract.dialect import (
    CURRENT_IR_VERSION,
    DIALECT,
    SCHEMA,
    SCHEMA_DIGEST,
    WEIGHT_FILE,
    OpDef,
)
from lattice_contract.plan.abi import check_role_types, freeze_arguments, freeze_outputs
from lattice_contract.plan.attrs import I64_MAX as _I64_MAX
from lattice_contract.plan.attrs import LEGACY_LAYOUTS, Where
from lattice_contract.plan.attrs import NO_ATTRS as _NO_ATTRS
from lattice_contract.plan.attrs import AttrRule as _AttrRule
from lattice_contract.plan.attrs import at as _at
from lattice_contract.plan.attrs import attr_rule as _attr_rule
from lattice_contract.plan.attrs import refused as _refused
from lattice_contract.plan.attrs import where_text as _where
from lattice_contract.plan.payload import (
    is_int,
    record,
    require_list,
    require_mapping,
    require_str,
    show,
)
from lattice_contract.plan.records import (
    ENTRY_NAME,
    MAX_LOCATION_CHARS,
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    ValueType,
)

__all__ = ["LEGACY_LAYOUTS", "freeze_plan"]


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
_OP_OPTIONAL = ("location",)  # the op's source module path, when the graph names one

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
    try:  # the six op fields, each present, and maybe a location (a key lookup beats a set)
        if type(raw) is not dict:
            raise KeyError
        size = len(raw)
        if size == len(_OP_FIELDS):
            location = None
        elif size == len(_OP_FIELDS) + 1:
            location = raw["location"]
        else:
            raise KeyError
        name, operands, results = raw["name"], raw["operands"], raw["results"]
        attrs_raw, operand_types, result_types = (
            raw["attrs"],
            raw["operand_types"],
            raw["result_types"],
        )
    except KeyError:
        item = record(raw, f"op #{index}", _OP_FIELDS, _OP_OPTIONAL)
        name, operands, results = item["name"], item["operands"], item["results"]
        attrs_raw, operand_types = item["attrs"], item["operand_types"]
        result_types = item["result_types"]
        location = item.get("location")
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
    if location is not None and (
        type(location) is not str or not 0 < len(location) <= MAX_LOCATION_CHARS
    ):
        location = _location(location, where)
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
    fields["location"] = location
    return op


def _location(location: Any, where: Where) -> str:
    """``location`` when it is a plan op's source location (a short, non-empty str), else raise."""
    text = require_str(location, f"{_at(where)}.location")
    if len(text) > MAX_LOCATION_CHARS:
        raise PlanError(
            f"{_at(where)}.location is {len(text)} characters long; a source location "
            f"(a module path) has at most {MAX_LOCATION_CHARS}"
        )
    return text


# ---------------------------------------------------------------------------
# The payload.


def _plain_type(text: Any, entry: Any) -> ValueType | None:
    """The type of an entry exactly as the native importer writes it, else None (look closer)."""
    if type(text) is not str or not text or type(entry) is not dict or len(entry) != 4:
        return None
    kind, dtype = entry.get("kind"), entry.get("dtype")
    shape, family = entry.get("shape", _ABSENT), entry.get("family", _ABSENT)
    if type(kind) is not str or type(dtype) is not str or not dtype:
        return None
    if kind == "tensor":
        if (
            family is not None
            or type(shape) is not list
            or not all(type(d) is int and -1 <= d <= _I64_MAX for d in shape)
        ):
            return None
        return ValueType(kind=kind, dtype=dtype, shape=tuple(shape), family=None)
    if shape is not None:
        return None
    if kind == "weight":
        return ValueType(kind, dtype, None, family) if type(family) is str and family else None
    if kind == "sparse" and family is None:
        return ValueType(kind=kind, dtype=dtype, shape=None, family=None)
    return None


_ABSENT = object()
_DERIVE = object()


def _freeze_types(raw: Any) -> Mapping[str, ValueType]:
    table = require_mapping(raw, "plan 'types'")
    frozen: dict[str, ValueType] = {}
    for text, entry in table.items():
        plain = _plain_type(text, entry)
        if plain is not None:
            frozen[text] = plain
            continue
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


def _plan(
    header: tuple[int, str, str],
    types: Mapping[str, ValueType],
    args: tuple[PlanArgument, ...],
    ops: list[PlanOperation],
    returns: tuple[str, ...],
    outputs: tuple[PlanOutput, ...],
) -> dict[str, Any]:
    """The frozen plan's fields, once every argument's and output's type fits its role."""
    check_role_types(args, outputs, types)
    version, digest, name = header
    return {
        "ir_version": version,
        "schema_digest": digest,
        "weight_file": WEIGHT_FILE,
        "name": name,
        "args": args,
        "ops": tuple(ops),
        "returns": returns,
        "outputs": outputs,
        "types": types,
    }


_TENSOR_TEXT = re.compile(r"tensor<((?:(?:\?|\d+)x)*)([a-z]+\d*)>")
_SPARSE_TEXT = re.compile(
    rf"!{DIALECT}\.sparse_tensor<rank = 3, coord = \w+, feature = \w+, dtype = (\w+)>"
)
_WEIGHT_TEXT = re.compile(rf"!{DIALECT}\.weight<(\w+), (\w+)>")


def _derived_type(text: str) -> ValueType:
    """The record of one canonical type text, for a payload that carries no ``types`` table.

    Only the three forms the native printer writes are read -- a builtin
    ranked tensor, ``!lattice.sparse_tensor<...>`` and ``!lattice.weight<...>``
    -- and each must match whole; anything else is refused, never guessed.
    """
    if (m := _TENSOR_TEXT.fullmatch(text)) is not None:
        dims = tuple(-1 if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
        return ValueType(kind="tensor", dtype=m.group(2), shape=dims, family=None)
    if (m := _SPARSE_TEXT.fullmatch(text)) is not None:
        return ValueType(kind="sparse", dtype=m.group(1), shape=None, family=None)
    if (m := _WEIGHT_TEXT.fullmatch(text)) is not None:
        return ValueType(kind="weight", dtype=m.group(2), shape=None, family=m.group(1))
    raise PlanError(
        f"the plan payload has no 'types' table and type {text!r} is not a canonical tensor, "
        f"sparse or weight type; re-import the graph with lattice_mlir.import_plan"
    )


def _derived_types(payload: Mapping[str, Any]) -> Mapping[str, ValueType]:
    """``types`` for a payload of the older shape (argument, op and output type texts only)."""
    texts: set[str] = set()
    for key in ("args", "outputs"):
        for item in require_list(payload[key], f"plan {key!r}"):
            texts.add(
                require_str(
                    require_mapping(item, f"a plan {key!r} entry").get("type"),
                    f"a plan {key!r} type",
                )
            )
    for op in require_list(payload["ops"], "plan 'ops'"):
        entry = require_mapping(op, "a plan op")
        for key in ("operand_types", "result_types"):
            for text in require_list(entry.get(key), f"a plan op's {key}"):
                texts.add(require_str(text, f"a plan op's {key} entry"))
    return MappingProxyType({text: _derived_type(text) for text in sorted(texts)})


def freeze_plan(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check a native importer payload against the schema; the frozen plan's fields.

    :meth:`~lattice_contract.plan.RuntimePlan.from_native` builds the plan from them.

    A payload without ``types`` (the shape the artifact API text describes:
    labels, type texts, roles) is accepted: its type records are derived from
    the canonical type texts (:func:`_derived_type`).
    """
    payload = require_mapping(raw, "the native plan payload")
    if "types" not in payload:
        payload = {**payload, "types": _DERIVE}
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
    if payload["types"] is _DERIVE:
        types = _derived_types(payload)
    else:
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
    return _plan((version, digest, name), types, args, ops, returns, outputs)


# ---------------------------------------------------------------------------
# A payload native verification has just accepted.
