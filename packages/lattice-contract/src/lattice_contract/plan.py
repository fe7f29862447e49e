"""The typed, frozen execution plan of a verified lattice artifact.

The native importer (``lattice_mlir.import_plan``) parses and verifies
``graph.mlir`` with real MLIR and hands Python a plain payload of dicts and
lists.  That payload is only a transport: :meth:`RuntimePlan.from_native`
checks every part of it against the dialect schema and turns it into frozen
dataclasses, so that

* a runtime never lowers a payload the schema does not describe (an unknown
  op, a wrong operand count, a missing or ill-typed attribute, a bad enum
  value, a malformed packing map);
* value labels form a proper SSA program (defined once, defined before use,
  every return defined);
* the call ABI (argument roles and names, output roles) is consistent; and
* no lowering can mutate importer state (attributes are deep-frozen:
  mappings become ``MappingProxyType``, lists become tuples).

Every failure is a :class:`PlanError` (a ``ValueError``) naming the op or
label involved and what the producer has to change.  The plan is the same
for every backend; ``mlx_lattice`` and ``torch_lattice`` lower it with their
own registries (see :mod:`lattice_contract.lowering`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from lattice_contract.constants import (
    CURRENT_IR_VERSION,
    INPUT_ROLES,
    OUTPUT_ROLES,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
    WEIGHT_FILE,
)
from lattice_contract.digest import SCHEMA_DIGEST
from lattice_contract.options import GROUP_SIZES
from lattice_contract.schema import (
    DIALECT,
    PACKED_DTYPE_OF_BITS,
    PACKING_FIELDS,
    SCHEMA,
    AttrDef,
    AttrKind,
    OpDef,
    SchemaEnum,
    WeightLayout,
)

__all__ = [
    "ENTRY_NAME",
    "LEGACY_LAYOUTS",
    "LogicalInput",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "RuntimePlan",
    "TypeInfo",
]

ENTRY_NAME = "forward"
"""The only entry function name an executable artifact may have."""

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


class PlanError(ValueError):
    """A native plan payload (or a plan built from one) breaks the contract."""


# Integer ranges per attribute kind: MLIR stores i64, and triples (kernel
# sizes, strides, paddings, dilations) act on int32 coordinates, so no entry
# can exceed int32 (the native verifier applies the same bound).
_I64_RANGE = (-(2**63), 2**63 - 1)
_INT_RANGES: Mapping[AttrKind, tuple[int, int]] = MappingProxyType(
    {AttrKind.triple: (-(2**31), 2**31 - 1), AttrKind.i64: _I64_RANGE}
)
_TRIPLE_MAX = _INT_RANGES[AttrKind.triple][1]


def _show(value: Any, depth: int = 0) -> str:
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
        items = [_show(v, depth + 1) for v in value[:4]]
        return "[" + ", ".join(items + (["..."] if len(value) > 4 else [])) + "]"
    if type(value) is dict:
        if depth >= 2:
            return "{...}"
        pairs = [f"{_show(k, 2)}: {_show(v, depth + 1)}" for k, v in list(value.items())[:4]]
        return "{" + ", ".join(pairs + (["..."] if len(value) > 4 else [])) + "}"
    return f"<{type(value).__name__}>"


def _int_in_range(value: Any, low: int, high: int) -> bool:
    return _is_int(value) and low <= value <= high


# ---------------------------------------------------------------------------
# Records.


@dataclass(frozen=True)
class TypeInfo:
    """Structured form of one MLIR type text, as the native importer reports it.

    ``kind`` is ``"sparse"`` (``!lattice.sparse_tensor``), ``"weight"``
    (``!lattice.weight``) or ``"tensor"`` (a builtin ranked tensor).  Tensor
    shapes use ``-1`` for dynamic dimensions; sparse and weight types have no
    shape.  Python reads these records and never the type text itself.
    """

    kind: str
    dtype: str
    shape: tuple[int, ...] | None = None
    family: str | None = None

    @property
    def rank(self) -> int | None:
        """Number of dimensions of a tensor type; None for sparse and weight types."""
        return None if self.shape is None else len(self.shape)


@dataclass(frozen=True)
class PlanArgument:
    """One entry argument of the plan.

    ``name`` is the importer's value label (``arg0``...), ``abi_name`` the
    stable public input name from ``lattice.input_names``, ``type`` the MLIR
    type text and ``role`` one of ``tensor``, ``sparse_coords``,
    ``sparse_features``, ``sparse_active``.
    """

    name: str
    abi_name: str
    type: str
    role: str


@dataclass(frozen=True)
class PlanOutput:
    """One entry result: the returned label, its public name, type text and role."""

    name: str
    abi_name: str
    type: str
    role: str


@dataclass(frozen=True)
class PlanOperation:
    """One lattice operation in program order, resolved against the schema.

    ``name`` is the full MLIR name (``lattice.conv3d``) and ``definition`` its
    schema :class:`~lattice_contract.schema.OpDef`.  ``attrs`` is read-only and
    holds Python values typed per the schema: triples as ``tuple[int, int,
    int]``, enums as their ``str`` value, ``f32`` as ``float``, packing as a
    read-only mapping.  Lowerings never read ``operands`` or ``attrs``
    directly; :mod:`lattice_contract.lowering` binds them by schema name.
    """

    name: str
    definition: OpDef
    operands: tuple[str, ...]
    results: tuple[str, ...]
    attrs: Mapping[str, Any]
    operand_types: tuple[str, ...]
    result_types: tuple[str, ...]

    def operand_groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Assign the operand labels to the schema's operands in declaration order.

        Each entry is ``(operand name, labels)``: one label for an ordinary
        operand, zero or one for an optional operand, any number for a
        variadic one.  The schema allows at most one optional or variadic
        operand per op, so the assignment is unambiguous.
        """
        return _group_operands(self.definition, len(self.operands), self.operands)

    def describe(self) -> str:
        """``lattice.conv3d -> v3`` style label used in diagnostics."""
        return f"{self.name} -> {', '.join(self.results) or '(no results)'}"


@dataclass(frozen=True)
class LogicalInput:
    """One public input as a caller sees it.

    A sparse input groups its three consecutive ABI arguments under the shared
    prefix of their names (``x`` for ``x_coords``/``x_features``/``x_active``);
    a tensor input is one argument under its own ABI name.
    """

    name: str
    kind: str  # "sparse" | "tensor"
    args: tuple[PlanArgument, ...]


@dataclass(frozen=True)
class RuntimePlan:
    """Typed, frozen view of a natively verified lattice program.

    Build it with :meth:`from_native`; constructing it directly skips every
    check and is meant only for code that already holds a checked plan.
    ``types`` maps each MLIR type text the plan uses to its structured form.
    """

    ir_version: int
    schema_digest: str
    weight_file: str
    name: str
    args: tuple[PlanArgument, ...]
    ops: tuple[PlanOperation, ...]
    returns: tuple[str, ...]
    outputs: tuple[PlanOutput, ...]
    types: Mapping[str, TypeInfo] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_native(cls, raw: Mapping[str, Any]) -> RuntimePlan:
        """Check a native importer payload against the schema and freeze it.

        Raises :class:`PlanError` naming the offending field, op or label.
        """
        return _freeze_plan(raw)

    def type_info(self, type_text: str) -> TypeInfo:
        """Structured form of a type text used by this plan."""
        try:
            return self.types[type_text]
        except KeyError:
            raise PlanError(
                f"the plan has no structured entry for type {type_text!r}; the native "
                "importer must report every type it uses in 'types'"
            ) from None

    @property
    def logical_inputs(self) -> tuple[LogicalInput, ...]:
        """Public inputs in argument order (sparse triples grouped)."""
        return _logical_inputs(self.args)

    def weight_operations(self) -> tuple[PlanOperation, ...]:
        """Every ``lattice.weight`` op, in program order."""
        return tuple(op for op in self.ops if op.definition.name == "weight")

    def producer(self, label: str) -> PlanOperation | None:
        """The op that defines ``label`` (None for entry arguments or unknown labels)."""
        for op in self.ops:
            if label in op.results:
                return op
        return None


# ---------------------------------------------------------------------------
# Freezing.


def _group_operands(
    definition: OpDef, count: int, labels: Sequence[str]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    extra = count - definition.min_operands
    groups: list[tuple[str, tuple[str, ...]]] = []
    position = 0
    for operand in definition.operands:
        if operand.variadic:
            take = max(extra, 0)
        elif operand.optional:
            take = 1 if extra > 0 else 0
        else:
            take = 1
        groups.append((operand.name, tuple(labels[position : position + take])))
        position += take
    return tuple(groups)


def _where(index: int, name: str) -> str:
    return f"op #{index} ({name})"


def _require_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _require_list(value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise PlanError(f"{what} must be a list, got {type(value).__name__}")
    return value


def _require_str(value: Any, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise PlanError(f"{what} must not be empty")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite_number(value: Any) -> bool:
    """A real number that is finite as an f64 (an integer too large for f64 is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite converts an int to float first
        return False


def _record(
    raw: Any, what: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    if type(raw) is dict and len(raw) == len(keys) and all(k in raw for k in keys):
        return raw  # the common, well-formed case: exactly the required fields
    item = _require_mapping(raw, what)
    missing = [k for k in keys if k not in item]
    if missing:
        raise PlanError(f"{what} lacks {', '.join(map(repr, missing))}")
    unknown = sorted(_show(k) for k in set(item) - set(keys) - set(optional))
    if unknown:
        raise PlanError(
            f"{what} has unknown field(s) {', '.join(unknown)}; the payload "
            f"fields are {', '.join(keys + optional)}"
        )
    return item


def _labels(raw: Any, what: Callable[[], str]) -> tuple[str, ...]:
    """A list of non-empty strings as a tuple; messages are only built on failure."""
    if type(raw) is list or type(raw) is tuple:
        items = tuple(raw)
    else:
        items = tuple(_require_list(raw, what()))
    for value in items:
        if type(value) is not str or not value:
            _require_str(value, f"{what()} entry")
    return items


def _freeze_types(raw: Any) -> Mapping[str, TypeInfo]:
    table = _require_mapping(raw, "plan 'types'")
    frozen: dict[str, TypeInfo] = {}
    for text, entry in table.items():
        what = f"plan 'types'[{_show(text)}]"
        _require_str(text, "a plan 'types' key")
        item = _record(entry, what, ("kind", "dtype"), ("shape", "family"))
        kind = _require_str(item["kind"], f"{what}.kind")
        if kind not in _TYPE_KINDS:
            raise PlanError(f"{what}.kind is {kind!r}; expected one of {', '.join(_TYPE_KINDS)}")
        dtype = _require_str(item["dtype"], f"{what}.dtype")
        shape_raw = item.get("shape")
        shape: tuple[int, ...] | None = None
        if kind == "tensor":
            dims = _require_list(shape_raw, f"{what}.shape")
            if not all(_int_in_range(d, -1, _I64_RANGE[1]) for d in dims):
                raise PlanError(
                    f"{what}.shape must be ints >= -1 (-1 is dynamic) within i64, got {_show(dims)}"
                )
            shape = tuple(int(d) for d in dims)
        elif shape_raw is not None:
            raise PlanError(f"{what} is a {kind} type and must have shape null")
        family_raw = item.get("family")
        family: str | None = None
        if kind == "weight":
            family = _require_str(family_raw, f"{what}.family")
        elif family_raw is not None:
            raise PlanError(f"{what} is a {kind} type and must have family null")
        frozen[text] = TypeInfo(kind=kind, dtype=dtype, shape=shape, family=family)
    return MappingProxyType(frozen)


def _freeze_attr(op: Callable[[], str], attr: AttrDef, value: Any) -> Any:
    spec = attr.spec
    kind = spec.kind
    if kind is AttrKind.triple and type(value) is list and len(value) == 3:
        a, b, c = value
        if type(a) is int and type(b) is int and type(c) is int:  # the common, valid case
            low = spec.minimum
            if (low is None or (a >= low and b >= low and c >= low)) and max(a, b, c) <= (
                _TRIPLE_MAX
            ):
                return (a, b, c)
    if type(value) is str and value:
        if kind is AttrKind.enum:
            assert spec.enum is not None
            if value in _ENUM_VALUES[spec.enum]:
                return value
        elif kind in (AttrKind.string, AttrKind.symbol) and (
            not spec.allowed or value in spec.allowed
        ):
            return value
    what = f"{op()}: attribute {attr.name!r}"
    if kind is AttrKind.triple:
        if (
            isinstance(value, (str, bytes))
            or not isinstance(value, Sequence)
            or len(value) != 3
            or not all(_is_int(v) for v in value)
        ):
            raise PlanError(
                f"{what} must be three integers (array<i64: a, b, c>), got {_show(value)}"
            )
        triple = (int(value[0]), int(value[1]), int(value[2]))
        if spec.minimum is not None and any(v < spec.minimum for v in triple):
            raise PlanError(f"{what} must have every entry >= {spec.minimum}, got {_show(triple)}")
        _check_int_range(what, kind, triple)
        return triple
    if kind is AttrKind.i64:
        if not _is_int(value):
            raise PlanError(f"{what} must be an integer (i64), got {_show(value)}")
        if spec.minimum is not None and value < spec.minimum:
            raise PlanError(f"{what} must be >= {spec.minimum}, got {_show(value)}")
        _check_int_range(what, kind, (value,))
        if spec.allowed and str(int(value)) not in spec.allowed:
            raise PlanError(f"{what} must be one of {', '.join(spec.allowed)}, got {value}")
        return int(value)
    if kind is AttrKind.f64_triple:
        if (
            isinstance(value, (str, bytes))
            or not isinstance(value, Sequence)
            or len(value) != 3
            or not all(_finite_number(v) for v in value)
        ):
            raise PlanError(
                f"{what} must be three finite numbers (array<f64: a, b, c>), got {_show(value)}"
            )
        floats = (float(value[0]), float(value[1]), float(value[2]))
        if spec.minimum is not None and any(
            v < spec.minimum or (spec.exclusive_minimum and v == spec.minimum) for v in floats
        ):
            bound = ">" if spec.exclusive_minimum else ">="
            raise PlanError(f"{what} must have every entry {bound} {spec.minimum}, got {floats}")
        return floats
    if kind is AttrKind.f32:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlanError(f"{what} must be a number (f32), got {_show(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise PlanError(f"{what} = {_show(value)} is outside the f32 range") from None
        if not math.isfinite(number):
            raise PlanError(f"{what} must be finite, got {number}")
        try:  # the attribute is f32: keep exactly the f32 value, however it was transported
            number = struct.unpack("<f", struct.pack("<f", number))[0]
        except OverflowError:
            raise PlanError(f"{what} = {number} is outside the f32 range") from None
        if spec.minimum is not None:
            low = float(spec.minimum)
            if number < low or (spec.exclusive_minimum and number == low):
                bound = ">" if spec.exclusive_minimum else ">="
                raise PlanError(f"{what} must be {bound} {spec.minimum}, got {number}")
        return number
    if kind in (AttrKind.string, AttrKind.symbol):
        text = _require_str(value, what)
        if spec.allowed and text not in spec.allowed:
            raise PlanError(f"{what} must be one of {', '.join(spec.allowed)}; got {text!r}")
        return text
    if kind is AttrKind.enum:
        assert spec.enum is not None
        text = _require_str(value, what)
        allowed = [m.value for m in spec.enum]
        if text not in allowed:
            hint = LEGACY_LAYOUTS.get(text) if spec.enum is WeightLayout else None
            if hint is not None:
                raise PlanError(f"{what}: {hint}")
            raise PlanError(
                f"{what} has invalid #{DIALECT}.{spec.enum.__mnemonic__} value {text!r}; "
                f"expected one of {', '.join(allowed)}"
            )
        return text
    if kind is AttrKind.packing:
        return _freeze_packing(what, value)
    raise PlanError(f"{what} has an attribute kind this release cannot read")  # pragma: no cover


def _check_int_range(what: str, kind: AttrKind, values: tuple[int, ...]) -> None:
    low, high = _INT_RANGES[kind]
    if any(v < low or v > high for v in values):
        reason = (
            "coordinates are int32, so no kernel size, stride, padding or dilation can leave "
            "that range"
            if kind is AttrKind.triple
            else "the attribute is stored as i64"
        )
        raise PlanError(f"{what} = {_show(values)} is outside [{low}, {high}]: {reason}")


def _freeze_packing(what: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanError(f"{what} must be a packing map, got {type(value).__name__}")
    names = [n for n, _ in PACKING_FIELDS]
    missing = [n for n in names if n not in value]
    unknown = sorted(_show(k) for k in set(value) - set(names))
    if missing or unknown:
        raise PlanError(
            f"{what} must have exactly the fields {', '.join(names)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    frozen: dict[str, Any] = {}
    for name, enum_type in PACKING_FIELDS:
        item = value[name]
        if enum_type is None:
            if not _is_int(item) or item not in GROUP_SIZES:
                raise PlanError(
                    f"{what}.{name} must be one of {', '.join(map(str, GROUP_SIZES))} (the "
                    f"group sizes MLX's affine quantization supports), got {_show(item)}"
                )
            frozen[name] = int(item)
        else:
            allowed = [m.value for m in enum_type]
            if not isinstance(item, str) or item not in allowed:
                raise PlanError(
                    f"{what}.{name} must be one of {', '.join(allowed)}, got {_show(item)}"
                )
            frozen[name] = item
    if frozen["bits"] not in PACKED_DTYPE_OF_BITS:
        raise PlanError(
            f"{what}.bits is {frozen['bits']!r}; a packing map describes packed storage "
            f"({', '.join(PACKED_DTYPE_OF_BITS)}), dense weights carry none"
        )
    # Each of GROUP_SIZES is a multiple of 32 / bits: a group fills whole uint32 words.
    return MappingProxyType(frozen)


def _resolve_op(index: int, name: str) -> OpDef:
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
    definition = SCHEMA.ops.get(short)
    if definition is None:
        raise PlanError(
            f"op #{index} is {name!r}, which the lattice schema does not define; "
            f"known ops: {', '.join(sorted(SCHEMA.ops))}"
        )
    return definition


_OP_FIELDS = ("name", "operands", "results", "attrs", "operand_types", "result_types")


def _freeze_op(index: int, raw: Any) -> PlanOperation:
    item = _record(raw, f"op #{index}", _OP_FIELDS)
    name = _require_str(item["name"], f"op #{index}.name")
    definition = _resolve_op(index, name)
    results = _labels(item["results"], lambda: f"{_where(index, name)}.results")

    def where() -> str:
        return _where(index, f"{name} -> {', '.join(results)}" if results else name)

    operands = _labels(item["operands"], lambda: f"{where()}.operands")
    operand_types = _labels(item["operand_types"], lambda: f"{where()}.operand_types")
    result_types = _labels(item["result_types"], lambda: f"{where()}.result_types")
    low, high = definition.min_operands, definition.max_operands
    if len(operands) < low or (high is not None and len(operands) > high):
        expected = f"{low}" if low == high else (f"{low} to {high}" if high else f"at least {low}")
        names = ", ".join(
            o.name + ("?" if o.optional else "*" if o.variadic else "") for o in definition.operands
        )
        raise PlanError(
            f"{where()} has {len(operands)} operand(s); the schema expects {expected} ({names})"
        )
    if len(results) != len(definition.results):
        raise PlanError(
            f"{where()} has {len(results)} result(s); the schema expects "
            f"{len(definition.results)} ({', '.join(r.name for r in definition.results)})"
        )
    if len(operand_types) != len(operands):
        raise PlanError(
            f"{where()} lists {len(operand_types)} operand type(s) for {len(operands)} operand(s)"
        )
    if len(result_types) != len(results):
        raise PlanError(
            f"{where()} lists {len(result_types)} result type(s) for {len(results)} result(s)"
        )
    attrs_raw = item["attrs"]
    if type(attrs_raw) is not dict:
        attrs_raw = _require_mapping(attrs_raw, f"{where()}.attrs")
    known = _ATTRIBUTES[definition.name]
    if any(key not in known for key in attrs_raw):
        unknown = sorted(_show(k) for k in set(attrs_raw) - set(known))
        raise PlanError(
            f"{where()} has unknown attribute(s) {', '.join(unknown)}; "
            f"{name} takes {', '.join(known) or 'no attributes'}"
        )
    attrs: dict[str, Any] = {}
    for attr in definition.attributes:
        if attr.name not in attrs_raw:
            if attr.spec.required:
                raise PlanError(
                    f"{where()} lacks required attribute {attr.name!r} "
                    f"({attr.spec.kind.value}); the producer must emit it"
                )
            if attr.spec.default is not None:  # what the absent attribute means
                attrs[attr.name] = attr.spec.default
            continue
        attrs[attr.name] = _freeze_attr(where, attr, attrs_raw[attr.name])
    return PlanOperation(
        name=name,
        definition=definition,
        operands=operands,
        results=results,
        attrs=MappingProxyType(attrs),
        operand_types=operand_types,
        result_types=result_types,
    )


_ENUM_VALUES: Mapping[type[SchemaEnum], frozenset[str]] = MappingProxyType(
    {e: frozenset(m.value for m in e) for e in SCHEMA.enums}
)
_ATTRIBUTES: Mapping[str, Mapping[str, AttrDef]] = MappingProxyType(
    {d.name: MappingProxyType({a.name: a for a in d.attributes}) for d in SCHEMA.ops.values()}
)


# ---------------------------------------------------------------------------
# The plain-payload fast path.
#
# Payloads come from the native importer and are almost always well formed,
# while the budget for native verification plus plan import is 5 ms for a 200-op
# graph.  ``_plain_op`` therefore accepts only the plain valid shape (a dict
# with exactly the op fields, lists of non-empty strings, each attribute of
# exactly its schema type and range) using per-op tables computed once here,
# and returns None on anything else.  The caller then runs the diagnosing
# ``_freeze_op``, which applies every rule in order and reports the first
# broken one in its usual words.  The fast path accepts a subset of what
# ``_freeze_op`` accepts and builds an equal record, so no check is weakened
# and no message changes.


_TEXT_KINDS = (AttrKind.enum, AttrKind.string, AttrKind.symbol)


class _AttrCheck(NamedTuple):
    """One schema attribute, flattened for the fast path."""

    name: str
    kind: str  # "triple", "text" (enum, string, symbol), "i64", "f32" or "packing"
    minimum: int | float | None
    exclusive_minimum: bool
    values: frozenset[str] | None  # closed value set of an enum or string attribute
    required: bool
    default: Any  # filled in when an optional attribute is absent (None: left out)


class _OpCheck(NamedTuple):
    """One schema op, flattened for the fast path (keyed by its full MLIR name)."""

    definition: OpDef
    min_operands: int
    max_operands: int | None
    result_count: int
    attrs: tuple[_AttrCheck, ...]


def _attr_check(attr: AttrDef) -> _AttrCheck:
    spec = attr.spec
    values: frozenset[str] | None = None
    if spec.kind is AttrKind.enum:
        assert spec.enum is not None
        values = _ENUM_VALUES[spec.enum]
    elif spec.allowed:
        values = frozenset(spec.allowed)
    kind = "text" if spec.kind in _TEXT_KINDS else spec.kind.value
    return _AttrCheck(
        attr.name, kind, spec.minimum, spec.exclusive_minimum, values, spec.required, spec.default
    )


def _op_check(definition: OpDef) -> _OpCheck:
    return _OpCheck(
        definition=definition,
        min_operands=definition.min_operands,
        max_operands=definition.max_operands,
        result_count=len(definition.results),
        attrs=tuple(_attr_check(a) for a in definition.attributes),
    )


_OP_CHECKS: Mapping[str, _OpCheck] = MappingProxyType(
    {d.mlir_name: _op_check(d) for d in SCHEMA.ops.values()}
)
_OP_FIELD_SET = frozenset(_OP_FIELDS)
_F32 = struct.Struct("<f")
_MISS: Any = object()  # "not the plain case": let the diagnosing path decide
_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})


def _plain_attr(check: _AttrCheck, value: Any) -> Any:
    """``value`` frozen when it is plainly valid for ``check``, else ``_MISS``."""
    kind = check.kind
    if kind == "triple":
        if type(value) is list and len(value) == 3:
            a, b, c = value
            if type(a) is int and type(b) is int and type(c) is int:
                low = check.minimum
                if (low is None or (a >= low and b >= low and c >= low)) and max(a, b, c) <= (
                    _TRIPLE_MAX
                ):
                    return (a, b, c)
    elif kind == "text":
        if type(value) is str and value and (check.values is None or value in check.values):
            return value
    elif kind == "i64":
        if (
            type(value) is int
            and (check.minimum is None or value >= check.minimum)
            and _I64_RANGE[0] <= value <= _I64_RANGE[1]
            and (check.values is None or str(value) in check.values)
        ):
            return value
    elif kind == "f64_triple":
        if type(value) is list and len(value) == 3:
            a, b, c = value
            if type(a) is float and type(b) is float and type(c) is float:
                low = check.minimum
                if math.isfinite(a) and math.isfinite(b) and math.isfinite(c):
                    if low is None:
                        return (a, b, c)
                    if min(a, b, c) > low or (not check.exclusive_minimum and min(a, b, c) == low):
                        return (a, b, c)
    elif kind == "f32":
        if type(value) is float and math.isfinite(value):
            try:
                number = _F32.unpack(_F32.pack(value))[0]
            except OverflowError:
                return _MISS
            low = check.minimum
            if low is None or number > low or (number == low and not check.exclusive_minimum):
                return number
    elif kind == "packing" and type(value) is dict:
        try:
            return _freeze_packing("", value)
        except PlanError:
            return _MISS
    return _MISS


_new_object = object.__new__


def _plain_op(raw: Any, defined: dict[str, str]) -> PlanOperation | None:
    """The frozen op when ``raw`` is a plainly valid op record, else None.

    ``defined`` maps each label defined so far to its type text; operands must
    be in it with the same type and results must not.  On success the results
    are added to it; on None it is left untouched.
    """
    if type(raw) is not dict or raw.keys() != _OP_FIELD_SET:
        return None
    name = raw["name"]
    check = _OP_CHECKS.get(name) if type(name) is str else None
    if check is None:
        return None
    operands = raw["operands"]
    results = raw["results"]
    operand_types = raw["operand_types"]
    result_types = raw["result_types"]
    if not (
        type(operands) is list
        and type(results) is list
        and type(operand_types) is list
        and type(result_types) is list
    ):
        return None
    labels = operands + results + operand_types + result_types
    try:
        "".join(labels)  # every entry a string, checked in C
    except TypeError:
        return None
    if "" in labels:
        return None
    count = len(operands)
    high = check.max_operands
    if (
        count < check.min_operands
        or (high is not None and count > high)
        or len(results) != check.result_count
        or len(operand_types) != count
        or len(result_types) != len(results)
    ):
        return None
    attrs_raw = raw["attrs"]
    if type(attrs_raw) is not dict:
        return None
    attrs_dict: dict[str, Any] = {}
    given = 0
    for attr in check.attrs:
        if attr.name in attrs_raw:
            value = _plain_attr(attr, attrs_raw[attr.name])
            if value is _MISS:
                return None
            attrs_dict[attr.name] = value
            given += 1
        elif attr.required:
            return None
        elif attr.default is not None:
            attrs_dict[attr.name] = attr.default
    if given != len(attrs_raw):
        return None  # an attribute this op does not take
    attrs = MappingProxyType(attrs_dict) if attrs_dict else _NO_ATTRS
    for label, type_text in zip(operands, operand_types, strict=True):
        if defined.get(label) != type_text:
            return None  # undefined, or defined with another type
    for label in results:
        if label in defined:
            return None
    if len(results) > 1 and len(set(results)) != len(results):
        return None
    defined.update(zip(results, result_types, strict=True))
    # Filling the instance dictionary yields the same frozen, equal record as
    # the dataclass constructor, which pays an ``object.__setattr__`` per field
    # (PlanOperation has no ``__post_init__`` to skip).
    op: PlanOperation = _new_object(PlanOperation)
    fields = op.__dict__
    fields["name"] = name
    fields["definition"] = check.definition
    fields["operands"] = tuple(operands)
    fields["results"] = tuple(results)
    fields["attrs"] = attrs
    fields["operand_types"] = tuple(operand_types)
    fields["result_types"] = tuple(result_types)
    return op


def _freeze_io(
    payload: Mapping[str, Any], key: str, roles: tuple[str, ...]
) -> list[tuple[str, str, str, str]]:
    """``(name, abi_name, type, role)`` of each ABI record in ``payload[key]``, roles checked."""
    what, attribute = (
        ("argument", "lattice.input_roles") if key == "args" else ("output", "lattice.output_roles")
    )
    records: list[tuple[str, str, str, str]] = []
    for i, entry in enumerate(_require_list(payload[key], f"plan '{key}'")):
        where = f"{what} #{i}"
        item = _record(entry, where, ("name", "abi_name", "type", "role"))
        fields = tuple(
            _require_str(item[k], f"{where}.{k}") for k in ("name", "abi_name", "type", "role")
        )
        if fields[3] not in roles:
            raise PlanError(
                f"{where} ({fields[1]!r}) has role {fields[3]!r}; {attribute} entries must be "
                f"one of {', '.join(roles)}"
            )
        records.append((fields[0], fields[1], fields[2], fields[3]))
    return records


def _logical_inputs(args: Sequence[PlanArgument]) -> tuple[LogicalInput, ...]:
    found: list[LogicalInput] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.role == "tensor":
            found.append(LogicalInput(arg.abi_name, "tensor", (arg,)))
            i += 1
            continue
        group = tuple(args[i : i + 3])
        roles = tuple(a.role for a in group)
        if roles != SPARSE_INPUT_ROLES:
            raise PlanError(
                f"argument #{i} ({arg.abi_name!r}) starts a sparse input but the roles from "
                f"there are {list(roles)}; each logical sparse input must be three consecutive "
                f"arguments with roles {', '.join(SPARSE_INPUT_ROLES)}"
            )
        suffix = SPARSE_ABI_SUFFIXES[0]
        if not arg.abi_name.endswith(suffix) or len(arg.abi_name) == len(suffix):
            raise PlanError(
                f"argument #{i} has role sparse_coords but ABI name {arg.abi_name!r}; sparse "
                f"inputs are named <name>_coords, <name>_features, <name>_active"
            )
        prefix = arg.abi_name[: -len(suffix)]
        for offset, (member, want) in enumerate(zip(group, SPARSE_ABI_SUFFIXES, strict=True)):
            if member.abi_name != prefix + want:
                raise PlanError(
                    f"argument #{i + offset} of sparse input {prefix!r} is named "
                    f"{member.abi_name!r}; expected {prefix + want!r}"
                )
        found.append(LogicalInput(prefix, "sparse", group))
        i += 3
    names = [f.name for f in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PlanError(
            f"logical input name(s) {', '.join(map(repr, duplicates))} are used twice; every "
            "public input needs its own name"
        )
    return tuple(found)


def _check_role_type(what: str, role: str, info: TypeInfo) -> None:
    ok: bool
    if role == "sparse_coords":
        ok = info.kind == "tensor" and info.dtype == "i32" and info.rank == 2
        ok = ok and info.shape is not None and info.shape[1] == 4
        want = "tensor<?x4xi32>"
    elif role == "sparse_active":
        ok = info.kind == "tensor" and info.dtype == "i32" and info.shape == (1,)
        want = "tensor<1xi32>"
    elif role == "sparse_features":
        ok = info.kind == "tensor" and info.rank == 2 and info.dtype in ("f16", "bf16", "f32")
        want = "a rank-2 float tensor"
    elif role == "sparse_tensor":
        ok = info.kind == "sparse"
        want = "!lattice.sparse_tensor"
    else:  # tensor
        ok = info.kind == "tensor"
        want = "a ranked tensor"
    if not ok:
        raise PlanError(f"{what} has role {role!r} but its type is not {want}")


def _freeze_plan(raw: Mapping[str, Any]) -> RuntimePlan:
    payload = _require_mapping(raw, "the native plan payload")
    missing = [k for k in _PAYLOAD_KEYS if k not in payload]
    if missing:
        raise PlanError(
            f"the native plan payload lacks {', '.join(map(repr, missing))}; rebuild "
            "lattice_mlir against this lattice_contract"
        )
    unknown = sorted(_show(k) for k in set(payload) - set(_PAYLOAD_KEYS))
    if unknown:
        raise PlanError(f"the native plan payload has unknown field(s) {', '.join(unknown)}")
    version = payload["ir_version"]
    if not _is_int(version) or version != CURRENT_IR_VERSION:
        raise PlanError(
            f"lattice.ir_version is {_show(version)}; this release reads only version "
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
            f"lattice.weight_file is {_show(weight_file)}; artifacts store weights only in "
            f"{WEIGHT_FILE!r}"
        )
    name = _require_str(payload["name"], "plan 'name'")
    if name != ENTRY_NAME:
        raise PlanError(f"the entry function is @{name}; it must be @{ENTRY_NAME}")
    types = _freeze_types(payload["types"])
    args = tuple(PlanArgument(*r) for r in _freeze_io(payload, "args", INPUT_ROLES))
    _logical_inputs(args)  # raises on role/ABI-name inconsistencies

    defined: dict[str, str] = {}  # label -> type text
    abi_seen: set[str] = set()
    for i, arg in enumerate(args):
        if arg.name in defined:
            raise PlanError(f"argument #{i} reuses value label {arg.name!r}")
        if arg.abi_name in abi_seen:
            raise PlanError(f"argument #{i} reuses ABI name {arg.abi_name!r}")
        abi_seen.add(arg.abi_name)
        defined[arg.name] = arg.type

    ops: list[PlanOperation] = []
    for index, entry in enumerate(_require_list(payload["ops"], "plan 'ops'")):
        op = _plain_op(entry, defined)
        if op is not None:
            ops.append(op)
            continue
        op = _freeze_op(index, entry)
        for label, type_text in zip(op.operands, op.operand_types, strict=True):
            if label not in defined:
                raise PlanError(
                    f"{_where(index, op.describe())} uses value {label!r} before it is defined; "
                    "ops must come in "
                    "def-before-use order"
                )
            if defined[label] != type_text:
                raise PlanError(
                    f"{_where(index, op.describe())} uses {label!r} as {type_text!r} but it was "
                    "defined as "
                    f"{defined[label]!r}"
                )
        for label, type_text in zip(op.results, op.result_types, strict=True):
            if label in defined:
                raise PlanError(
                    f"{_where(index, op.describe())} redefines value label {label!r}; labels "
                    "are SSA"
                )
            defined[label] = type_text
        ops.append(op)

    returns = tuple(
        _require_str(v, "return label") for v in _require_list(payload["returns"], "plan 'returns'")
    )
    if not returns:
        raise PlanError(f"@{ENTRY_NAME} returns nothing; an executable artifact returns a value")
    for label in returns:
        if label not in defined:
            raise PlanError(f"return value {label!r} is not defined by any argument or op")

    outputs = [PlanOutput(*r) for r in _freeze_io(payload, "outputs", OUTPUT_ROLES)]
    if len(outputs) != len(returns):
        raise PlanError(
            f"the plan declares {len(outputs)} output(s) for {len(returns)} returned value(s); "
            "lattice.output_names/roles must have one entry per return"
        )
    out_names: set[str] = set()
    for i, (out, label) in enumerate(zip(outputs, returns, strict=True)):
        if out.name != label:
            raise PlanError(f"output #{i} names value {out.name!r} but return #{i} is {label!r}")
        if out.type != defined[label]:
            raise PlanError(
                f"output #{i} ({out.abi_name!r}) declares type {out.type!r} but {label!r} "
                f"has type {defined[label]!r}"
            )
        if out.abi_name in out_names:
            raise PlanError(f"output #{i} reuses ABI name {out.abi_name!r}")
        out_names.add(out.abi_name)

    missing_types = sorted(t for t in set(defined.values()) if t not in types)
    if missing_types:
        raise PlanError(
            f"plan 'types' has no entry for {', '.join(map(repr, missing_types))}; the native "
            "importer must describe every type it uses"
        )
    for i, arg in enumerate(args):
        _check_role_type(f"argument #{i} ({arg.abi_name!r})", arg.role, types[arg.type])
    for i, out in enumerate(outputs):
        _check_role_type(f"output #{i} ({out.abi_name!r})", out.role, types[out.type])

    return RuntimePlan(
        ir_version=int(version),
        schema_digest=digest,
        weight_file=WEIGHT_FILE,
        name=name,
        args=args,
        ops=tuple(ops),
        returns=returns,
        outputs=tuple(outputs),
        types=types,
    )
