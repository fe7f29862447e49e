"""Textual MLIR builder for lattice artifacts, generated from the dialect schema.

Producers (the torch exporter, tests, examples) describe a graph by calling one
builder method per dialect op; the builder checks every argument against the
schema while the graph is being built, infers each result's type, and finally
prints the module exactly as MLIR itself prints it.  Nothing outside
:mod:`lattice_contract.dialect.schema` lists op, operand or attribute names: the
methods (``conv3d``, ``sparse_make``, ``sparse_binary``...) and their typed
keyword arguments are generated from the :class:`~lattice_contract.dialect.schema.OpDef`
records into :mod:`lattice_contract.builder.methods` (checked in, so mypy
rejects ``kernel_sise=``; a test regenerates it).  What the schema cannot say
-- how a result's type follows from the operands (strides multiply or divide,
channel counts come from weight shapes) -- lives in the result-type rules of
:mod:`lattice_contract.builder.result_types`; the schema-driven argument checks are in
:mod:`lattice_contract.builder.args` and the MLIR spellings in
:mod:`lattice_contract.builder.text`.  Every error names its rule ID.

Typical use::

    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=16, dtype="f16", stride=1)
    w = b.weight(storage_key="stem.weight", layout="conv3d_o_xyz_i",
                 dtype="f16", shape=(32, 3, 3, 3, 16))
    y = b.conv3d(input=x, weight=w, kernel_size=3, stride=2, padding=1)
    b.add_output("y", y)
    text = b.build()

Errors are :class:`BuilderError` (a ``ValueError``) naming the op, the
argument and the fix, raised at the call that introduced the problem, so an
exporter fails at the layer that caused it rather than in the native verifier.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from lattice_contract.builder.args import (
    ATTRIBUTE_DEFAULTS,
    _attr_hint,
    _check_constraint,
    _normalize_attr,
    _owner_error,
    attr_default,
)
from lattice_contract.builder.methods import GeneratedOps
from lattice_contract.builder.result_types import (
    _ACTIVE_TYPE,
    _COORDS_TYPE,
    RESULT_TYPE_RULES,
    _Call,
    _features_type,
    _Rule,
)
from lattice_contract.builder.text import (
    MISSING,
    SPELLED_WHEN_ABSENT,
    BuilderError,
    Value,
    _attr_text,
    _parse_tensor_type,
    mlir_f32,
    mlir_string,
    mlir_symbol,
    rule_error,
    tensor_type,
)
from lattice_contract.dialect import (
    CURRENT_IR_VERSION,
    DIALECT,
    FLOAT_DTYPES,
    SCHEMA,
    SCHEMA_DIGEST,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
    WEIGHT_FILE,
    AttrKind,
    OpDef,
    TypeConstraint,
    rule_tag,
)
from lattice_contract.plan import MAX_LOCATION_CHARS, ValueType

__all__ = [
    "BuilderError",
    "BuiltOp",
    "MLIRModuleBuilder",
    "Value",
    "ValueType",
    "mlir_f32",
    "mlir_string",
    "mlir_symbol",
    "tensor_type",
]


# ---------------------------------------------------------------------------
# The builder.


@dataclass(frozen=True)
class BuiltOp:
    """One op as the builder recorded it: what the native plan of the module must show.

    ``attrs`` holds every attribute the op carries (defaults included) as
    normalized Python values: triples as tuples, f32 values already rounded to
    f32, enums as schema enum members, packing as a mapping of field values.
    """

    op: OpDef
    operands: tuple[Value, ...]
    results: tuple[Value, ...]
    attrs: Mapping[str, Any]
    location: str | None = None


@dataclass(frozen=True)
class _Arg:
    value: Value
    abi_name: str
    role: str


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class MLIRModuleBuilder(GeneratedOps):
    """Builds one lattice artifact module, one op per method call.

    Besides the ABI methods below, the builder has one method per schema op,
    named after :attr:`OpDef.python_name` (``conv3d``, ``sparse_make``,
    ``sparse_decompose``...), taking keyword arguments named after the op's
    operands and attributes.  Single-result ops return a :class:`Value`;
    ``sparse_decompose`` returns a tuple.  :meth:`emit` is the same entry point
    by op name, for code that is itself generic over the schema.

    ``schema_digest``, ``ir_version`` and ``weight_file`` override the module
    attributes; they exist to produce deliberately invalid modules in tests.
    """

    def __init__(
        self,
        *,
        schema_digest: str = SCHEMA_DIGEST,
        ir_version: int = CURRENT_IR_VERSION,
        weight_file: str = WEIGHT_FILE,
    ) -> None:
        self._schema_digest = schema_digest
        self._ir_version = ir_version
        self._weight_file = weight_file
        self._token = object()
        self._args: list[_Arg] = []
        self._lines: list[str] = []
        self._ops: list[BuiltOp] = []
        self._outputs: list[tuple[str, Value]] = []
        self._next_result = 0
        self._used_names: set[str] = set()
        self._next_conflict = 0
        self._symbols: dict[str, str] = {}
        self._storage_keys: set[str] = set()
        self._location: str | None = None

    @property
    def location(self) -> str | None:
        """The source location (a module path) the next ops are written with, if any."""
        return self._location

    def set_location(self, location: str | None) -> None:
        """Write the next ops with ``loc("location")`` (None: no location).

        Locations name where an op came from (``conv_input.0``); they do not
        change what the graph computes, and every MLIR verifier accepts them.
        """
        if location is not None and not isinstance(location, str):
            raise BuilderError(f"set_location: expected a str or None, got {location!r}")
        if location is not None and len(location) > MAX_LOCATION_CHARS:
            raise BuilderError(
                f"set_location: a location of {len(location)} characters is too long; a plan "
                f"takes at most {MAX_LOCATION_CHARS} (name the op by a shorter module path)"
            )
        self._location = location or None

    # -- module ABI ---------------------------------------------------------

    def _check_abi_name(self, call: str, name: object, taken: set[str]) -> str:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise BuilderError(
                f"{call}: name {name!r} is not a valid ABI name; use an ASCII identifier "
                "(letters, digits, underscores, not starting with a digit)"
            )
        if name in taken:
            raise BuilderError(f"{call}: name {name!r} is already used; pick a unique name")
        return name

    def _add_arg(self, abi_name: str, vtype: ValueType, role: str) -> Value:
        value = Value(f"%arg{len(self._args)}", vtype, self._token)
        self._args.append(_Arg(value, abi_name, role))
        return value

    def add_input(self, name: str, type: str | ValueType) -> Value:
        """Add a dense tensor entry argument (role ``tensor``) and return it.

        ``type`` is a builtin tensor type, as text (``"tensor<?x3xf32>"``) or
        from :func:`tensor_type`.
        """
        taken = {a.abi_name for a in self._args}
        self._check_abi_name("add_input", name, taken)
        if isinstance(type, str):
            vtype = _parse_tensor_type(type, "add_input")
        elif isinstance(type, ValueType) and type.kind == "tensor":
            vtype = type
        else:
            raise BuilderError(
                f"add_input: type {type!r} is not a tensor type; pass text like "
                "'tensor<?x3xf32>' or tensor_type(shape, dtype) (sparse inputs use "
                "add_sparse_input)"
            )
        return self._add_arg(name, vtype, "tensor")

    def add_sparse_input(
        self,
        name: str | None,
        *,
        channels: int,
        dtype: str,
        stride: int | Sequence[int] = 1,
    ) -> Value:
        """Add one logical sparse input and return its sparse value.

        Adds the three consecutive entry arguments ``<name>_coords``,
        ``<name>_features`` and ``<name>_active`` (roles sparse_coords,
        sparse_features, sparse_active) and emits the ``lattice.sparse.make``
        that records ``stride``.  ``name=None`` gives the bare names
        ``coords``, ``features``, ``active``, allowed for a module's only
        sparse input (a second sparse input is then refused, and vice versa).
        """
        taken = {a.abi_name for a in self._args}
        sparse_before = [a.abi_name for a in self._args if a.role == SPARSE_INPUT_ROLES[0]]
        bare = SPARSE_ABI_SUFFIXES[0].lstrip("_")
        if name is None or bare in sparse_before:
            if sparse_before:
                raise BuilderError(
                    "add_sparse_input: the bare names coords, features, active are for a "
                    "module's only sparse input, and this module has another; give every "
                    "sparse input a name"
                )
            name = None
        else:
            self._check_abi_name("add_sparse_input", name, taken)
        prefix = "" if name is None else name
        suffixes = [s.lstrip("_") if name is None else s for s in SPARSE_ABI_SUFFIXES]
        for suffix in suffixes:
            self._check_abi_name("add_sparse_input", prefix + suffix, taken)
        if not isinstance(channels, int) or isinstance(channels, bool) or channels <= 0:
            raise BuilderError(
                f"add_sparse_input: channels {channels!r} is invalid; pass a positive int"
            )
        if dtype not in FLOAT_DTYPES:
            raise BuilderError(
                f"add_sparse_input: dtype {dtype!r} is invalid; "
                f"use one of {', '.join(FLOAT_DTYPES)}"
            )
        types = (_COORDS_TYPE, _features_type(None, channels, dtype), _ACTIVE_TYPE)
        make = SCHEMA.op("sparse.make")
        before = len(self._args)
        args = [
            self._add_arg(prefix + suffix, vt, role)
            for suffix, vt, role in zip(suffixes, types, SPARSE_INPUT_ROLES, strict=True)
        ]
        kwargs: dict[str, Any] = {o.name: v for o, v in zip(make.operands, args, strict=True)}
        try:
            result = self.emit(make.name, **kwargs, stride=stride)
        except BuilderError as exc:
            del self._args[before:]  # leave the builder as it was
            raise BuilderError(f"add_sparse_input({name!r}): {exc}") from None
        assert isinstance(result, Value)
        return result

    def add_output(self, name: str, value: Value) -> None:
        """Return ``value`` from ``@forward`` under the ABI name ``name``."""
        self._check_abi_name("add_output", name, {n for n, _ in self._outputs})
        if not isinstance(value, Value):
            raise BuilderError(f"add_output: {name!r} must be a Value, got {type(value).__name__}")
        if value._owner is not self._token:
            raise BuilderError(
                f"add_output: {name!r} is a Value of another MLIRModuleBuilder; "
                "return values of this builder"
            )
        if value.kind == "weight":
            raise BuilderError(
                f"add_output: {name!r} is a weight ({value.type_text}); outputs are sparse "
                "values or tensors"
            )
        self._outputs.append((name, value))

    # -- ops ------------------------------------------------------------------

    def emit(self, op_name: str, /, **kwargs: Any) -> Value | tuple[Value, ...]:
        """Append one op given by schema name: ``conv3d``, ``lattice.conv3d`` or ``sparse_make``."""
        try:
            op = SCHEMA.op(op_name)
        except KeyError as exc:
            raise BuilderError(str(exc.args[0])) from None
        rule = RESULT_TYPE_RULES.get(op.name)
        if rule is None:  # pragma: no cover - guarded by a test over the schema
            raise BuilderError(f"{op.mlir_name}: the builder has no result-type rule for this op")
        kwargs = dict(kwargs)
        derived = rule.prepare(kwargs) if rule.prepare is not None else set()
        call = self._bind(op, rule, kwargs, derived)
        results = rule.infer(call)
        self._check_symbols(call)
        values = self._print_op(call, results)
        return values[0] if len(values) == 1 else values

    def _bind(self, op: OpDef, rule: _Rule, kwargs: dict[str, Any], derived: set[str]) -> _Call:
        known = [o.name for o in op.operands] + [a.name for a in op.attributes] + list(rule.extras)
        unknown = [k for k in kwargs if k not in known]
        if unknown:
            hint = difflib.get_close_matches(unknown[0], known, n=1)
            raise BuilderError(
                f"{op.mlir_name}: unexpected keyword {unknown[0]!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f"; its keywords are: {', '.join(known)}"
                + rule_tag("attr.declared")
            )
        operands: dict[str, Value | None] = {}
        variadic: dict[str, tuple[Value, ...]] = {}
        for operand in op.operands:
            raw = kwargs.get(operand.name)
            if operand.variadic:
                items = () if raw is None else raw
                if isinstance(items, Value) or not isinstance(items, Sequence):
                    raise BuilderError(
                        f"{op.mlir_name}: argument {operand.name!r} takes a sequence of "
                        f"Values, got {type(raw).__name__}; pass a list or tuple"
                    )
                for item in items:
                    self._check_value(op, operand.name, item, operand.type)
                variadic[operand.name] = tuple(items)
                continue
            if raw is None:
                if not operand.optional:
                    raise rule_error(
                        op,
                        "value.kind",
                        None,
                        f"missing operand {operand.name!r} (pass {operand.name}= a Value of type "
                        f"{operand.type.describe()})",
                    )
                operands[operand.name] = None
                continue
            self._check_value(op, operand.name, raw, operand.type)
            operands[operand.name] = raw
        attrs: dict[str, Any] = {}
        # attributes derived from others are checked last, so errors name the source
        for attr in sorted(op.attributes, key=lambda a: a.name in derived):
            raw = kwargs.get(attr.name, MISSING)
            if raw is MISSING or raw is None:
                raw = attr_default(attr.spec, attr.name)
            if raw is None:
                continue  # optional attribute left out
            if raw is MISSING:
                raise rule_error(
                    op,
                    "attr.required",
                    None,
                    f"missing attribute {attr.name!r} (pass {attr.name}= {_attr_hint(attr.spec)})",
                )
            value = _normalize_attr(op, attr.name, attr.spec, raw)
            if value is not None:  # dense packing normalizes to "absent"
                attrs[attr.name] = value
        extras: dict[str, Any] = {}
        for name, default in rule.extras.items():
            raw = kwargs.get(name, default)
            if raw is MISSING:
                raise BuilderError(
                    f"{op.mlir_name}: missing keyword {name!r}; the builder needs it to "
                    "infer the result type"
                )
            extras[name] = raw
        return _Call(op, operands, variadic, attrs, extras)

    def _check_value(self, op: OpDef, name: str, raw: object, constraint: TypeConstraint) -> None:
        if not isinstance(raw, Value):
            raise BuilderError(
                f"{op.mlir_name}: argument {name!r} must be a Value from this builder, got "
                f"{type(raw).__name__}; pass the result of an earlier builder call"
            )
        if raw._owner is not self._token:
            raise _owner_error(op, name)
        _check_constraint(op, name, raw, constraint)

    def _print_op(self, call: _Call, results: tuple[ValueType, ...]) -> tuple[Value, ...]:
        op = call.op
        assert len(results) == len(op.results)
        if len(results) == 1:
            number = self._next_result
            self._next_result += 1
            values: tuple[Value, ...] = (Value(f"%{number}", results[0], self._token),)
        else:
            # ODS gives multi-result ops OpAsmOpInterface names from the result
            # names, so MLIR prints ``%coords, %features, %active = ...``.
            values = tuple(
                Value("%" + self._unique_name(r.name), vt, self._token)
                for r, vt in zip(op.results, results, strict=True)
            )
        lhs = ", ".join(v.name for v in values)
        used: list[Value] = []
        for operand in op.operands:
            if operand.variadic:
                used.extend(call.variadic[operand.name])
            elif call.operands[operand.name] is not None:
                used.append(call.value(operand.name))
        text = f"{lhs} = {op.mlir_name}"
        dict_items = []
        for attr in sorted(op.attributes, key=lambda a: a.name):
            if attr.name not in call.attrs:
                if attr.name in SPELLED_WHEN_ABSENT:
                    dict_items.append(f"{attr.name} = {SPELLED_WHEN_ABSENT[attr.name]}")
                continue
            if attr.spec.kind is AttrKind.symbol:
                continue
            dict_items.append(f"{attr.name} = {_attr_text(attr.spec, call.attrs[attr.name])}")
        for attr in op.attributes:
            if attr.spec.kind is AttrKind.symbol:
                text += " " + mlir_symbol(call.attrs[attr.name])
        if used:
            text += " " + ", ".join(v.name for v in used)
        if dict_items:
            text += " {" + ", ".join(dict_items) + "}"
        result_texts = [vt.text for vt in results]
        operand_texts = [v.type_text for v in used]
        if not op.operands:
            text += " : " + ", ".join(result_texts)
        elif len(results) > 1 and len(used) == 1:
            text += f" : {operand_texts[0]} -> (" + ", ".join(result_texts) + ")"
        else:
            outs = result_texts[0] if len(results) == 1 else "(" + ", ".join(result_texts) + ")"
            text += " : (" + ", ".join(operand_texts) + ") -> " + outs
        if self._location is not None:
            text += f" loc({mlir_string(self._location)})"
        self._lines.append(text)
        attrs = MappingProxyType(dict(call.attrs))
        self._ops.append(BuiltOp(op, tuple(used), values, attrs, self._location))
        return values

    def _unique_name(self, name: str) -> str:
        """MLIR's SSA name uniquing: a taken name gets ``_<n>`` from one shared counter."""
        if name in self._used_names:
            while f"{name}_{self._next_conflict}" in self._used_names:
                self._next_conflict += 1
            name = f"{name}_{self._next_conflict}"
            self._next_conflict += 1
        self._used_names.add(name)
        return name

    def _check_symbols(self, call: _Call) -> None:
        """Reject a second binding of one symbol or storage key, then record the binding.

        Runs after every other check, so a rejected call leaves the builder unchanged.
        """
        symbols = [a.name for a in call.op.attributes if a.spec.kind is AttrKind.symbol]
        if not symbols:
            return
        symbol = call.attrs[symbols[0]]
        key = call.attrs.get("storage_key", symbol)
        if symbol in self._symbols:
            call.fail(
                "weight.unique",
                symbols[0],
                f"{symbol!r} is already bound (to storage key {self._symbols[symbol]!r})",
            )
        if key in self._storage_keys:
            call.fail("weight.unique", "storage_key", f"{key!r} is already bound")
        self._symbols[symbol] = key
        self._storage_keys.add(key)

    # -- output ---------------------------------------------------------------

    @property
    def arguments(self) -> tuple[tuple[str, str, Value], ...]:
        """Entry arguments so far as ``(abi_name, role, value)``, in order."""
        return tuple((a.abi_name, a.role, a.value) for a in self._args)

    @property
    def operations(self) -> tuple[BuiltOp, ...]:
        """The ops emitted so far, in program order."""
        return tuple(self._ops)

    @property
    def outputs(self) -> tuple[tuple[str, Value], ...]:
        """Outputs so far as ``(abi_name, value)``, in return order."""
        return tuple(self._outputs)

    def build(self) -> str:
        """The whole module as MLIR text (ending in a newline)."""
        if not self._outputs:
            raise BuilderError(
                "build: the module has no outputs; call add_output(name, value) at least once"
            )

        def strings(items: Sequence[str]) -> str:
            return "[" + ", ".join(mlir_string(s) for s in items) + "]"

        module_attrs = {
            f"{DIALECT}.input_names": strings([a.abi_name for a in self._args]),
            f"{DIALECT}.input_roles": strings([a.role for a in self._args]),
            f"{DIALECT}.ir_version": f"{self._ir_version} : i64",
            f"{DIALECT}.output_names": strings([n for n, _ in self._outputs]),
            f"{DIALECT}.output_roles": strings(
                ["sparse_tensor" if v.kind == "sparse" else "tensor" for _, v in self._outputs]
            ),
            f"{DIALECT}.schema_digest": mlir_string(self._schema_digest),
            f"{DIALECT}.weight_file": mlir_string(self._weight_file),
        }
        header = ", ".join(f"{k} = {v}" for k, v in sorted(module_attrs.items()))
        params = ", ".join(f"{a.value.name}: {a.value.type_text}" for a in self._args)
        out_types = [v.type_text for _, v in self._outputs]
        signature = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
        lines = [
            f"module attributes {{{header}}} {{",
            f"  func.func @forward({params}) -> {signature} {{",
            *("    " + line for line in self._lines),
            "    return "
            + ", ".join(v.name for _, v in self._outputs)
            + " : "
            + ", ".join(out_types),
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    # -- generated surface ------------------------------------------------------

    if not TYPE_CHECKING:  # unknown names stay type errors for mypy

        def __getattr__(self, name: str) -> Callable[..., Any]:
            """Unknown attribute: suggest the nearest schema op (methods exist for every op)."""
            if name.startswith("__"):
                raise AttributeError(name)
            hint = difflib.get_close_matches(
                name, [o.python_name for o in SCHEMA.ops.values()], n=1
            )
            raise AttributeError(
                f"MLIRModuleBuilder has no method {name!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + "; there is one method per lattice op, named after OpDef.python_name"
            )


def _check_surface() -> None:
    """The typed methods, the result-type rules and the defaults match the schema."""
    missing = sorted(set(SCHEMA.ops) - set(RESULT_TYPE_RULES))
    if missing:  # pragma: no cover - a schema op without a result-type rule
        raise TypeError("builder has no result-type rule for: " + ", ".join(missing))
    for name in ATTRIBUTE_DEFAULTS:
        if not any(a.name == name for o in SCHEMA.ops.values() for a in o.attributes):
            raise TypeError(f"builder default for {name!r} names no schema attribute")
    for op in SCHEMA.ops.values():
        if op.python_name in vars(MLIRModuleBuilder):
            raise TypeError(f"schema op {op.name} collides with builder method {op.python_name}")
        if op.python_name not in vars(GeneratedOps):  # pragma: no cover - regenerate the file
            raise TypeError(
                f"builder_methods.py lacks {op.python_name}; run python -m "
                "lattice_contract.codegen.builder_methods"
            )


_check_surface()
