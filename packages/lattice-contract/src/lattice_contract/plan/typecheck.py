"""Element-type checking of a frozen :class:`~lattice_contract.plan.RuntimePlan`.

Every value of a plan gets an element type and a rank from its MLIR type (via
the plan's structured ``types`` table, never by reading type text).  Each op
is then checked against its schema signature:

* operands and results must have the kind the schema declares (sparse value,
  weight of an allowed family, coordinates, active count, rank-2 features,
  points, batch index, any ranked tensor);
* ordinary ops are homogeneous: every float-typed operand and result of one
  op (sparse values, features, float weights, float tensors) shares a single
  element type.  Packed ``i4``/``i8`` weights stand outside that rule: their
  codes are integers and their scales carry their own ``scale_dtype``, and
  the consumer computes in its input's float type.  Coordinates, active
  counts and batch indices are ``i32`` and points ``f32`` by construction, so
  they never take part;
* only ``lattice.cast`` (with its rounding direction) and ``lattice.call`` of
  a registered primitive change element types; a call must match the
  primitive's exact element types and ranks, and the runtime must provide an
  implementation of it.

Passing proves that the declared program is consistent, nothing more: it
says nothing about what a frontend meant or how accurate a backend is.
Failures are :class:`PlanTypeError` naming the value label and the op.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from lattice_contract.dialect import (
    FLOAT_DTYPES,
    PACKED_DTYPE_OF_BITS,
    PACKED_DTYPES,
    SCHEMA,
    WEIGHT_DTYPES,
    TypeConstraint,
    TypeKind,
    WeightFamily,
    rule_message,
)
from lattice_contract.plan.records import PlanError, PlanOperation, ValueType

if TYPE_CHECKING:  # the plan is built above this module, from what it checks
    from lattice_contract.plan.runtime_plan import RuntimePlan

__all__ = [
    "LAYOUT_OF_FAMILY",
    "PACKABLE_FAMILIES",
    "PlanTypeError",
    "TypedPlan",
    "ValueType",
    "typecheck_plan",
]

LAYOUT_OF_FAMILY: Mapping[str, str] = MappingProxyType(
    {family.value: family.layout.value for family in WeightFamily}
)
"""The one layout each weight family is stored in (read from the schema's family table)."""

PACKABLE_FAMILIES: tuple[str, ...] = tuple(f.value for f in WeightFamily if f.packable)
"""The weight families whose weights may be packed (int4/int8)."""


class PlanTypeError(PlanError):
    """The plan's element types or ranks do not satisfy an op's signature."""


@dataclass(frozen=True)
class TypedPlan:
    """A plan together with the element type of every value label."""

    plan: RuntimePlan
    values: Mapping[str, ValueType]
    primitives: frozenset[str]

    def __getitem__(self, label: str) -> ValueType:
        return self.values[label]


def _fail(
    op: PlanOperation, index: int, label: str | None, message: str, rule_id: str | None = None
) -> PlanTypeError:
    """The PlanTypeError naming the op and value; a broken schema rule adds its fix and tag."""
    value = f"value {label!r} of " if label else ""
    if rule_id is not None:
        message = rule_message(rule_id, message)
    return PlanTypeError(f"{value}op #{index} ({op.describe()}): {message}")


def _matches(constraint: TypeConstraint, vt: ValueType) -> bool:
    kind = constraint.kind
    if kind is TypeKind.sparse:
        return vt.kind == "sparse" and vt.dtype in FLOAT_DTYPES
    if kind is TypeKind.weight:
        return (
            vt.kind == "weight"
            and vt.dtype in WEIGHT_DTYPES
            and vt.family in {f.value for f in constraint.families}
        )
    if vt.kind != "tensor" or vt.shape is None:
        return False
    if kind is TypeKind.coords:
        return vt.dtype == "i32" and vt.rank == 2 and vt.shape[1] in (4, -1)
    if kind is TypeKind.active:
        return vt.dtype == "i32" and vt.shape == (1,)
    if kind is TypeKind.features:
        return vt.dtype in FLOAT_DTYPES and vt.rank == 2
    if kind is TypeKind.points:
        return vt.dtype == "f32" and vt.rank == 2 and vt.shape[1] in (3, -1)
    if kind is TypeKind.batch_index:
        return vt.dtype == "i32" and vt.rank == 1
    return vt.dtype in FLOAT_DTYPES or vt.dtype == "i32"  # TypeKind.tensor


def _takes_part(constraint: TypeConstraint) -> bool:
    """Whether values of this constraint join the op's shared element type."""
    return constraint.kind in (
        TypeKind.sparse,
        TypeKind.weight,
        TypeKind.features,
        TypeKind.tensor,
    )


def _check_weight_op(op: PlanOperation, index: int, result: ValueType) -> None:
    label = op.results[0]
    layout = op.attrs["layout"]
    want_layout = LAYOUT_OF_FAMILY.get(result.family or "")
    if layout != want_layout:
        raise _fail(
            op,
            index,
            label,
            f"weights of family {result.family} use layout {want_layout}, not {layout}",
            "weight.layout",
        )
    # A packed weight declares its packed integer type or (upstream's
    # producer) the float type it dequantizes to; dense weights carry no packing.
    packing = op.attrs.get("packing")
    if packing is None:
        if result.dtype in PACKED_DTYPES:
            raise _fail(
                op,
                index,
                label,
                f"weight dtype {result.dtype} is packed and needs a #lattice.packing attribute",
                "weight.packed_dtype",
            )
        return
    if result.dtype in PACKED_DTYPES and PACKED_DTYPE_OF_BITS[packing["bits"]] != result.dtype:
        raise _fail(
            op,
            index,
            label,
            f"packing bits {packing['bits']} do not match weight dtype {result.dtype}",
            "weight.packing_bits",
        )
    if result.family not in PACKABLE_FAMILIES:
        raise _fail(
            op,
            index,
            label,
            f"{result.family} weights cannot be packed (only conv3d and linear weights are)",
            "weight.packable",
        )


def _check_call(
    op: PlanOperation,
    index: int,
    operands: Sequence[ValueType],
    result: ValueType,
    implemented: frozenset[str],
) -> None:
    callee = op.attrs["callee"]
    label = op.results[0]
    primitive = SCHEMA.primitives.get(callee)
    if primitive is None:
        raise _fail(
            op,
            index,
            label,
            f"callee {callee!r} is not a registered primitive; registered: "
            f"{', '.join(sorted(SCHEMA.primitives)) or 'none'}",
            "call.registered",
        )
    if len(operands) != len(primitive.inputs):
        raise _fail(
            op,
            index,
            label,
            f"primitive {callee!r} takes {len(primitive.inputs)} input(s), got {len(operands)}",
            "call.signature",
        )
    for position, (operand_label, vt, dtype, rank) in enumerate(
        zip(op.operands, operands, primitive.inputs, primitive.input_ranks, strict=True)
    ):
        if vt.dtype != dtype or vt.rank != rank:
            raise _fail(
                op,
                index,
                operand_label,
                f"input #{position} of primitive {callee!r} must be a rank-{rank} {dtype} "
                f"tensor, got {vt.describe()}",
                "call.signature",
            )
    if result.dtype != primitive.output or result.rank != primitive.output_rank:
        raise _fail(
            op,
            index,
            label,
            f"primitive {callee!r} returns a rank-{primitive.output_rank} "
            f"{primitive.output} tensor, but the result is declared {result.describe()}",
            "call.signature",
        )
    if callee not in implemented:
        raise _fail(
            op,
            index,
            label,
            f"primitive {callee!r} has no implementation in this runtime; it implements "
            f"{', '.join(sorted(implemented)) or 'none'}",
        )


def _check_cast(op: PlanOperation, index: int, operand: ValueType, result: ValueType) -> None:
    label = op.results[0]
    if "rounding" not in op.attrs:  # from_native already requires it; keep the rule local too
        raise _fail(op, index, label, "a cast must state its rounding direction", "attr.required")
    if operand.dtype not in FLOAT_DTYPES or result.dtype not in FLOAT_DTYPES:
        raise _fail(
            op,
            index,
            label,
            f"cast converts between float types, got {operand.describe()} -> {result.describe()}",
            "cast.float",
        )
    if operand.rank != result.rank:
        raise _fail(
            op,
            index,
            label,
            f"cast keeps the shape, got {operand.describe()} -> {result.describe()}",
            "cast.shape",
        )
    if operand.shape is not None and result.shape is not None:
        for a, b in zip(operand.shape, result.shape, strict=True):
            if a >= 0 and b >= 0 and a != b:
                raise _fail(
                    op,
                    index,
                    label,
                    f"cast keeps the shape, got {operand.describe()} -> {result.describe()}",
                    "cast.shape",
                )


def _check_signature(
    op: PlanOperation,
    index: int,
    operand_types: Sequence[ValueType],
    result_types: Sequence[ValueType],
) -> list[tuple[str, TypeConstraint, ValueType]]:
    """Every operand and result against its schema constraint; returns them paired."""
    definition = op.definition
    by_label = dict(zip(op.operands, operand_types, strict=True))
    constrained: list[tuple[str, TypeConstraint, ValueType]] = []
    for (name, labels), operand_def in zip(op.operand_groups(), definition.operands, strict=True):
        for label in labels:
            vt = by_label[label]
            if not _matches(operand_def.type, vt):
                raise _fail(
                    op,
                    index,
                    label,
                    f"operand {name!r} must be {operand_def.type.describe()}, got {vt.describe()}",
                    "value.kind",
                )
            constrained.append((label, operand_def.type, vt))
    for label, vt, result_def in zip(op.results, result_types, definition.results, strict=True):
        if not _matches(result_def.type, vt):
            raise _fail(
                op,
                index,
                label,
                f"result {result_def.name!r} must be {result_def.type.describe()}, "
                f"got {vt.describe()}",
                "value.kind",
            )
        constrained.append((label, result_def.type, vt))
    return constrained


def _check_homogeneous(
    op: PlanOperation, index: int, constrained: list[tuple[str, TypeConstraint, ValueType]]
) -> None:
    """Every float value that takes part in an ordinary op shares one element type."""
    shared: tuple[str, str] | None = None  # (label, dtype) that fixed the op's type
    for label, constraint, vt in constrained:
        if not _takes_part(constraint) or vt.dtype in PACKED_DTYPES:
            continue
        if vt.kind == "tensor" and vt.dtype not in FLOAT_DTYPES:
            raise _fail(
                op,
                index,
                label,
                f"{op.name} works on float values, got {vt.describe()}",
                "dtype.same",
            )
        if shared is None:
            shared = (label, vt.dtype)
        elif vt.dtype != shared[1]:
            raise _fail(
                op,
                index,
                label,
                f"element type {vt.dtype} differs from {shared[1]} of {shared[0]!r} "
                f"({op.name} is homogeneous)",
                "dtype.same",
            )


def _check_global_pool(op: PlanOperation, index: int, result: ValueType) -> None:
    """Static result rows equal batch_size; batch_size -1 (inferred) needs dynamic rows."""
    shape = result.shape or ()
    batch = op.attrs["batch_size"]
    if shape and shape[0] >= 0 and shape[0] != batch:
        raise _fail(
            op,
            index,
            op.results[0],
            f"result has {shape[0]} rows but batch_size is {batch}"
            + (" (batch_size -1 infers the rows at run time)" if batch == -1 else ""),
            "global_pool.rows",
        )


_ATTRIBUTE_RULES = frozenset(("cast", "call", "weight", "global_pool"))
"""Ops with rules that read attributes as well as types."""


def _check_op_rules(
    op: PlanOperation,
    index: int,
    operand_types: Sequence[ValueType],
    result_types: Sequence[ValueType],
    implemented: frozenset[str],
    constrained: list[tuple[str, TypeConstraint, ValueType]] | None,
) -> None:
    """The rules after the signature match, in order; homogeneity only with ``constrained``."""
    kind = op.definition.name
    if kind == "cast":
        _check_cast(op, index, operand_types[0], result_types[0])
    elif kind == "call":
        _check_call(op, index, operand_types, result_types[0], implemented)
    else:
        if kind == "weight":
            _check_weight_op(op, index, result_types[0])
        if constrained is not None:
            _check_homogeneous(op, index, constrained)
        if kind == "global_pool":
            _check_global_pool(op, index, result_types[0])


def typecheck_plan(plan: RuntimePlan, implemented_primitives: Iterable[str] = ()) -> TypedPlan:
    """Assign every value its element type and check every op's signature.

    ``implemented_primitives`` is the set of ``lattice.call`` primitives the
    executing runtime provides; a call to any other primitive is a compile
    error.  Returns the per-label value types; raises :class:`PlanTypeError`.

    The signature rules (operand and result kinds, homogeneity) depend only on
    the op's definition and the type texts of its operands and results, and a
    200-op graph repeats a few dozen such signatures.  Each distinct signature
    is checked in full once per plan; a repeat skips straight to the rules that
    read attributes (cast, call, weight, global_pool), which run for every op.
    """
    implemented = frozenset(implemented_primitives)
    value_type = plan.type_info
    values: dict[str, ValueType] = {arg.name: value_type(arg.type) for arg in plan.args}
    value_of = values.__getitem__
    results_of: dict[tuple[str, ...], tuple[ValueType, ...]] = {}
    # A frozen plan's operand type texts are those its operands were defined
    # with (``from_native`` checks it), so the texts key a signature.
    checked: set[tuple[int, tuple[str, ...], tuple[str, ...]]] = set()
    for index, op in enumerate(plan.ops):
        definition = op.definition
        result_types = results_of.get(op.result_types)
        if result_types is None:
            result_types = tuple(value_type(t) for t in op.result_types)
            results_of[op.result_types] = result_types
        signature = (id(definition), op.operand_types, op.result_types)
        if signature not in checked:
            operand_types = tuple(map(value_of, op.operands))
            constrained = _check_signature(op, index, operand_types, result_types)
            _check_op_rules(op, index, operand_types, result_types, implemented, constrained)
            checked.add(signature)
        elif definition.name in _ATTRIBUTE_RULES:
            operand_types = tuple(map(value_of, op.operands))
            _check_op_rules(op, index, operand_types, result_types, implemented, None)
        values.update(zip(op.results, result_types, strict=True))

    return TypedPlan(plan=plan, values=MappingProxyType(values), primitives=implemented)
