"""The records of a frozen execution plan, and the one model of a value's type.

These are the immutable dataclasses :meth:`RuntimePlan.from_native` builds
(see :mod:`lattice_contract.plan.freeze` for the checks that build them and
:mod:`lattice_contract.plan.abi` for the call ABI they expose).  Constructing
them directly skips every check: that is for code that already holds a
checked plan (tests, rewrites of a frozen plan).

:class:`ValueType` is the single description of a value's type: the
native importer reports one per MLIR type text, the plan keeps them in
``RuntimePlan.types``, and the type checker, the executor and the lowerings
read the very same objects (the checker attaches no second type class).  The
textual builder types its values with this class too; what a producer knows
statically beyond the MLIR type (a sparse value's stride and channel count, a
weight's layout, logical shape and packing) rides along in its
:class:`ValueFacts` record, which the importer leaves empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lattice_contract.dialect import DIALECT, TYPES, OpDef, WeightLayout

__all__ = [
    "ENTRY_NAME",
    "MAX_LOCATION_CHARS",
    "NO_FACTS",
    "LogicalInput",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "TypeInfo",
    "ValueFacts",
    "ValueType",
    "dialect_type_text",
    "group_operands",
]

ENTRY_NAME = "forward"
"""The only entry function name an executable artifact may have."""

MAX_LOCATION_CHARS = 4096
"""The longest source location (an op's module path) a plan takes: a diagnostic, not a payload."""


class PlanError(ValueError):
    """A native plan payload (or a plan built from one) breaks the contract."""


@dataclass(frozen=True)
class ValueFacts:
    """What a producer knows statically about a value beyond its MLIR type.

    The textual builder records these to check strides along the chain, infer
    channel counts and check weight shapes; the MLIR type does not carry them,
    so a type the native importer reports has none (:data:`NO_FACTS`).
    Sparse values: ``stride`` and ``channels``.  Weights: ``layout``, the
    logical ``weight_shape`` and the ``packing`` map (None when dense).
    """

    stride: tuple[int, int, int] | None = None
    channels: int | None = None
    layout: WeightLayout | None = None
    weight_shape: tuple[int, ...] | None = None
    packing: Mapping[str, object] | None = field(default=None, hash=False)


NO_FACTS = ValueFacts()
"""The facts of a type read from MLIR: none."""


def _type_params(mnemonic: str) -> Any:
    for item in TYPES:
        if item.mnemonic == mnemonic:
            return item.params
    raise KeyError(f"the schema defines no type !{DIALECT}.{mnemonic}")  # pragma: no cover


def dialect_type_text(mnemonic: str, values: Mapping[str, str]) -> str:
    """Spell ``!lattice.<mnemonic><...>`` from the schema's type parameters.

    Parameters with a single permitted value (``rank = 3``, the one coordinate
    and feature layout) are filled from the schema; the others come from
    ``values``.
    """
    parts = []
    for param in _type_params(mnemonic):
        if param.name in values:
            value = values[param.name]
        elif len(param.allowed) == 1:
            value = param.allowed[0]
        elif param.enum is not None and len(param.enum) == 1:
            value = next(iter(param.enum)).value
        else:  # pragma: no cover - a caller bug, not a user error
            raise KeyError(f"type !{DIALECT}.{mnemonic} needs parameter {param.name!r}")
        parts.append(f"{param.name} = {value}" if param.keyword else value)
    return f"!{DIALECT}.{mnemonic}<" + ", ".join(parts) + ">"


@dataclass(frozen=True)
class ValueType:
    """Kind, element type and shape of one value, as the native importer reports it.

    ``kind`` is ``"sparse"`` (``!lattice.sparse_tensor``), ``"weight"``
    (``!lattice.weight``) or ``"tensor"`` (a builtin ranked tensor).  Tensor
    shapes use ``-1`` for dynamic dimensions (MLIR's ``?``); sparse and weight
    types have no shape, and only weights have a ``family`` (its keyword).
    Python reads these records and never the MLIR type text itself.
    ``facts`` holds what a producer knows beyond the type (:class:`ValueFacts`;
    empty for imported types); the properties below read it.
    """

    kind: str
    dtype: str
    shape: tuple[int, ...] | None = None
    family: str | None = None
    facts: ValueFacts = field(default=NO_FACTS, repr=False)

    @property
    def rank(self) -> int | None:
        """Number of dimensions of a tensor type; None for sparse and weight types."""
        return None if self.shape is None else len(self.shape)

    @property
    def stride(self) -> tuple[int, int, int] | None:
        """A sparse value's static stride, where the producer knows it."""
        return self.facts.stride

    @property
    def channels(self) -> int | None:
        """A sparse value's channel count, where the producer knows it."""
        return self.facts.channels

    @property
    def layout(self) -> WeightLayout | None:
        """A weight's payload layout, where the producer knows it."""
        return self.facts.layout

    @property
    def weight_shape(self) -> tuple[int, ...] | None:
        """A weight's logical shape, where the producer knows it."""
        return self.facts.weight_shape

    @property
    def packing(self) -> Mapping[str, object] | None:
        """A packed weight's packing map (None when dense or unknown)."""
        return self.facts.packing

    @property
    def text(self) -> str:
        """The type as MLIR prints it."""
        if self.kind == "sparse":
            return dialect_type_text("sparse_tensor", {"dtype": self.dtype})
        if self.kind == "weight":
            assert self.family is not None
            return dialect_type_text("weight", {"family": self.family, "dtype": self.dtype})
        dims = "".join(("?" if d < 0 else str(d)) + "x" for d in self.shape or ())
        return f"tensor<{dims}{self.dtype}>"

    @classmethod
    def of(cls, info: ValueType) -> ValueType:
        """``info`` itself: kept for callers written when the plan had its own class."""
        return info

    def describe(self) -> str:
        """Human form for diagnostics.

        An imported type reads short (``tensor<?x8xf16>``, ``sparse<f16>``,
        ``weight<conv3d, f16>``); a value whose producer knows facts reads as
        its MLIR type with them, as the builder's messages show it
        (``!lattice.sparse_tensor<...> (stride (2, 2, 2), 8 channels)``).
        """
        if self.kind == "sparse":
            if self.stride is not None:
                return f"{self.text} (stride {self.stride}, {self.channels} channels)"
            return f"sparse<{self.dtype}>"
        if self.kind == "weight":
            if self.weight_shape is not None:
                return f"{self.text} (shape {self.weight_shape})"
            return f"weight<{self.family}, {self.dtype}>"
        dims = "x".join("?" if d < 0 else str(d) for d in self.shape or ())
        return f"tensor<{dims + 'x' if dims else ''}{self.dtype}>"


TypeInfo = ValueType
"""The name the seeds and ``mlx_lattice.artifact`` use for :class:`ValueType`."""


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


def group_operands(
    definition: OpDef, count: int, labels: Sequence[str]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(operand name, labels)`` per schema operand for ``count`` operand labels."""
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


@dataclass(frozen=True)
class PlanOperation:
    """One lattice operation in program order, resolved against the schema.

    ``name`` is the full MLIR name (``lattice.conv3d``) and ``definition`` its
    schema :class:`~lattice_contract.dialect.schema.OpDef`.  ``attrs`` is read-only and
    holds Python values typed per the schema: triples as ``tuple[int, int,
    int]``, enums as their ``str`` value, ``f32`` as ``float``, packing as a
    read-only mapping.  Lowerings never read ``operands`` or ``attrs``
    directly; :mod:`lattice_contract.runtime.lowering` binds them by schema name.
    """

    name: str
    definition: OpDef
    operands: tuple[str, ...]
    results: tuple[str, ...]
    attrs: Mapping[str, Any]
    operand_types: tuple[str, ...]
    result_types: tuple[str, ...]
    location: str | None = None
    """The source module path the exporter recorded (``loc("conv_input.0")``), if any.

    Native MLIR reads it from the op's name location and the importer hands it
    over in the plan payload; it never changes what the op computes.
    """

    def operand_groups(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Assign the operand labels to the schema's operands in declaration order.

        Each entry is ``(operand name, labels)``: one label for an ordinary
        operand, zero or one for an optional operand, any number for a
        variadic one.  The schema allows at most one optional or variadic
        operand per op, so the assignment is unambiguous.
        """
        return group_operands(self.definition, len(self.operands), self.operands)

    def describe(self) -> str:
        """``lattice.conv3d -> v3`` style label used in diagnostics (``at conv1.0`` when known)."""
        text = f"{self.name} -> {', '.join(self.results) or '(no results)'}"
        return text if self.location is None else f"{text} at {self.location}"


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
