"""Schema-driven argument checks of the textual builder.

Operand kinds, attribute values (ranges, closed sets, finiteness, packing
maps) and the keyword defaults users may omit, all read from the op's schema
record; each failure names its rule ID from :mod:`lattice_contract.dialect.rules`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NoReturn

from lattice_contract.builder.text import (
    _TENSOR_DTYPES,
    MISSING,
    BuilderError,
    Value,
    _f32_round,
    mlir_f32,
    rule_error,
)
from lattice_contract.dialect import (
    FLOAT_DTYPES,
    GROUP_SIZES,
    PACKING_FIELDS,
    AttrKind,
    AttrSpec,
    OpDef,
    PackingBits,
    SchemaEnum,
    TypeConstraint,
    TypeKind,
    WeightLayout,
    as_triple,
    is_group_size,
    layout_family,
    triple_violation,
)

# Keyword defaults for attributes users expect to omit.  Each must name an
# attribute of some schema op and be a valid value for it (checked below).
ATTRIBUTE_DEFAULTS: Mapping[str, object] = MappingProxyType(
    {
        "stride": 1,
        "padding": 0,
        "dilation": 1,
        "approximate": "none",
        "alpha": 0.01,
        "beta": 1.0,
        "threshold": 20.0,
        # Optional in the dialect but always written, as upstream writes them.
        "coord_order": "batch_x_y_z",
        "fill": 0.0,
        "lhs_fill": 0.0,
        "rhs_fill": 0.0,
        "axis": -1,
        "origin": 0.0,
    }
)


def attr_default(spec: AttrSpec, name: str) -> Any:
    """The default a user may omit, or MISSING.

    Required string attributes whose schema allows exactly one value
    (``accumulation`` on convolutions) default to it; optional ones are left
    out (upstream spells pools and ``linear`` without ``accumulation``).
    """
    if name in ATTRIBUTE_DEFAULTS:
        return ATTRIBUTE_DEFAULTS[name]
    if not spec.required:
        return None
    if spec.kind is AttrKind.string and len(spec.allowed) == 1:
        return spec.allowed[0]
    return MISSING


# ---------------------------------------------------------------------------
# Generic argument validation driven by the schema.


def _owner_error(op: OpDef, name: str) -> BuilderError:
    return BuilderError(
        f"{op.mlir_name}: argument {name!r} is a Value of another MLIRModuleBuilder; "
        "values can only be used in the builder that created them"
    )


def _check_constraint(op: OpDef, name: str, value: Value, constraint: TypeConstraint) -> None:
    vt = value.type
    kind = constraint.kind
    ok: bool
    if kind is TypeKind.sparse:
        ok = vt.kind == "sparse"
    elif kind is TypeKind.weight:
        ok = vt.kind == "weight" and vt.family in {f.value for f in constraint.families}
    elif vt.kind != "tensor" or vt.shape is None:
        ok = False
    elif kind is TypeKind.coords:
        ok = vt.dtype == "i32" and len(vt.shape) == 2 and vt.shape[1] == 4
    elif kind is TypeKind.active:
        ok = vt.dtype == "i32" and vt.shape == (1,)
    elif kind is TypeKind.features:
        ok = vt.dtype in FLOAT_DTYPES and len(vt.shape) == 2 and vt.shape[1] >= 0
    elif kind is TypeKind.points:
        ok = vt.dtype == "f32" and len(vt.shape) == 2 and vt.shape[1] == 3
    elif kind is TypeKind.batch_index:
        ok = vt.dtype == "i32" and len(vt.shape) == 1
    else:
        ok = vt.dtype in _TENSOR_DTYPES
    if ok:
        return
    if kind is TypeKind.weight:
        families = "|".join(f.value for f in constraint.families)
        hint = (
            f"bind a weight of family {families} (layout "
            + " or ".join(
                lay.value for lay in WeightLayout if layout_family(lay) in constraint.families
            )
            + ")"
        )
    elif kind is TypeKind.features:
        hint = "pass a rank-2 float tensor with a static channel count, e.g. from sparse_decompose"
    elif kind is TypeKind.sparse:
        hint = "pass a sparse value (from add_sparse_input, sparse_make or a sparse op)"
    else:
        hint = f"pass a value of type {constraint.describe()}"
    rule_id = "weight.family" if kind is TypeKind.weight and vt.kind == "weight" else "value.kind"
    raise rule_error(
        op, rule_id, name, f"must be {constraint.describe()}, got {vt.describe()} ({hint})"
    )


def _normalize_attr(op: OpDef, name: str, spec: AttrSpec, raw: object) -> Any:
    def fail(problem: str, hint: str, rule_id: str = "attr.allowed") -> NoReturn:
        raise rule_error(op, rule_id, name, f"{problem} ({hint})")

    kind = spec.kind
    if kind is AttrKind.triple:
        try:
            value = as_triple(raw, name)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            fail(f"is {raw!r}", "pass an int or a sequence of three ints", "attr.triple")
        minimum = None if spec.minimum is None else int(spec.minimum)
        broken = triple_violation(value, minimum)
        if broken == "attr.minimum":
            fail(f"is {raw!r}", f"every component must be >= {spec.minimum}", broken)
        if broken is not None:
            fail(f"is {raw!r}", "a component is outside int32 (the coordinates' range)", broken)
        return value
    if kind is AttrKind.f64_triple:
        items = (raw, raw, raw) if isinstance(raw, int | float) else raw
        if (
            isinstance(items, str | bytes)
            or not isinstance(items, Sequence)
            or len(items) != 3
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in items)
            or not all(math.isfinite(float(v)) for v in items)
        ):
            fail(
                f"is {raw!r}",
                "pass a finite number or a sequence of three finite numbers",
                "attr.triple",
            )
        floats = (float(items[0]), float(items[1]), float(items[2]))
        if spec.minimum is not None and any(
            v < spec.minimum or (spec.exclusive_minimum and v == spec.minimum) for v in floats
        ):
            bound = ">" if spec.exclusive_minimum else ">="
            fail(f"is {raw!r}", f"every component must be {bound} {spec.minimum}", "attr.minimum")
        return floats
    if kind is AttrKind.i64:
        if not isinstance(raw, int) or isinstance(raw, bool):
            fail(f"is {raw!r}", "pass an int")
        if spec.minimum is not None and raw < spec.minimum:
            fail(f"is {raw}", f"it must be >= {spec.minimum}", "attr.minimum")
        if spec.allowed and str(raw) not in spec.allowed:
            fail(f"is {raw}", "it must be one of " + ", ".join(spec.allowed))
        if not -(2**63) <= raw < 2**63:
            fail(f"is {raw}", "it must fit in a signed 64-bit integer")
        return raw
    if kind is AttrKind.f32:
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            fail(f"is {raw!r}", "pass a float")
        try:
            mlir_f32(float(raw))
        except (ValueError, OverflowError) as exc:
            fail(f"is {raw!r}: {exc}", "pass a finite value within the f32 range", "attr.finite")
        value32 = _f32_round(float(raw))
        if spec.minimum is not None and (
            value32 < spec.minimum or (spec.exclusive_minimum and value32 == spec.minimum)
        ):
            bound = ">" if spec.exclusive_minimum else ">="
            fail(
                f"is {raw!r} (as f32: {value32!r})",
                f"it must be {bound} {spec.minimum}",
                "attr.minimum",
            )
        return value32
    if kind in (AttrKind.string, AttrKind.symbol):
        if not isinstance(raw, str) or not raw:
            empty_rule = "weight.storage_key" if op.name == "weight" else "attr.allowed"
            fail(f"is {raw!r}", "pass a non-empty string", empty_rule)
        if spec.allowed and raw not in spec.allowed:
            fail(f"is {raw!r}", "it must be one of " + ", ".join(repr(a) for a in spec.allowed))
        return raw
    if kind is AttrKind.enum:
        assert spec.enum is not None
        return _enum_member(spec.enum, raw, fail)
    if kind is AttrKind.packing:
        return _normalize_packing(raw, fail)
    raise AssertionError(kind)  # pragma: no cover


def _enum_member(
    enum_type: type[SchemaEnum], raw: object, fail: Callable[..., NoReturn]
) -> SchemaEnum:
    values = ", ".join(repr(m.value) for m in enum_type)
    if isinstance(raw, enum_type):
        return raw
    if isinstance(raw, SchemaEnum):
        fail(
            f"is {type(raw).__name__}.{raw.name}, a member of the wrong enum",
            f"pass a {enum_type.__name__} member or one of {values}",
        )
    if isinstance(raw, str):
        try:
            return enum_type(raw)
        except ValueError:
            pass
    fail(f"is {raw!r}, not a {enum_type.__mnemonic__} value", f"use one of {values}")


def _normalize_packing(raw: object, fail: Callable[..., NoReturn]) -> Mapping[str, object] | None:
    """A packed weight's packing map; None for dense (``{"bits": "dense"}``)."""
    names = [n for n, _ in PACKING_FIELDS]
    if not isinstance(raw, Mapping):
        fail(f"is {raw!r}", "pass a mapping with keys " + ", ".join(names))
    if raw.get(names[0]) in (PackingBits.dense, PackingBits.dense.value):
        if len(raw) != 1:
            fail(f"is {dict(raw)!r}", "dense packing has no other field; pass {'bits': 'dense'}")
        return None
    unknown = sorted(set(raw) - set(names))
    if unknown:
        fail(f"has unknown keys {unknown}", "use only " + ", ".join(names))
    out: dict[str, object] = {}
    for name, enum_type in PACKING_FIELDS:
        item = raw.get(name, MISSING)
        if enum_type is not None:
            if item is MISSING and len(enum_type) == 1:
                item = next(iter(enum_type))
            if item is MISSING:
                fail(f"lacks {name!r}", f"pass {name}= one of {[m.value for m in enum_type]}")

            def field_fail(problem: str, fix: str, key: str = name) -> NoReturn:
                fail(f"field {key!r} {problem}", fix)

            out[name] = _enum_member(enum_type, item, field_fail).value
        else:
            if not is_group_size(item):
                fail(
                    f"field {name!r} is {item!r}",
                    "pass one of " + ", ".join(map(str, GROUP_SIZES)),
                    "weight.group_size",
                )
            out[name] = item
    return MappingProxyType(out)


def _attr_hint(spec: AttrSpec) -> str:
    if spec.kind is AttrKind.triple:
        return "an int or three ints" + (
            f" (each >= {spec.minimum})" if spec.minimum is not None else ""
        )
    if spec.kind is AttrKind.enum:
        assert spec.enum is not None
        return "one of " + ", ".join(repr(m.value) for m in spec.enum)
    if spec.kind is AttrKind.packing:
        return "a packing mapping (" + ", ".join(n for n, _ in PACKING_FIELDS) + ")"
    return {
        AttrKind.i64: "an int",
        AttrKind.f32: "a float",
        AttrKind.string: "a string",
        AttrKind.symbol: "a symbol name",
    }[spec.kind]
