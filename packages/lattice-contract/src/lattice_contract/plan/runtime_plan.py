"""The frozen plan itself: :class:`RuntimePlan`, built only by :meth:`RuntimePlan.from_native`.

It sits above the parts it is made of and checked by: the records
(:mod:`.records`), the freezer that checks a native payload and returns the
plan's fields (:mod:`.freeze`), the call ABI (:mod:`.abi`) and the type
checker (:mod:`.typecheck`), so none of them imports it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lattice_contract.plan.abi import logical_inputs
from lattice_contract.plan.freeze import freeze_plan
from lattice_contract.plan.records import (
    LogicalInput,
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    ValueType,
)
from lattice_contract.plan.typecheck import TypedPlan, typecheck_plan

__all__ = ["RuntimePlan"]


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
    types: Mapping[str, ValueType] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_native(cls, raw: Mapping[str, Any]) -> RuntimePlan:
        """Check a native importer payload against the schema and freeze it.

        Raises :class:`PlanError` naming the offending field, op or label.
        """
        return cls(**freeze_plan(raw))

    def check(self, implemented_primitives: Iterable[str] = ()) -> TypedPlan:
        """Type-check the plan: the typed-program text's ``Program.check``.

        The same as :func:`lattice_contract.plan.typecheck_plan`: every op's
        element-type signature, casts, registered primitives (``lattice.call``
        of a primitive outside ``implemented_primitives`` is an error).
        Returns the :class:`~lattice_contract.plan.typecheck.TypedPlan`;
        raises :class:`~lattice_contract.plan.typecheck.PlanTypeError`.
        """
        return typecheck_plan(self, implemented_primitives)

    def dtype(self, label: str) -> str:
        """Element type of one value, by its label: the typed-program text's ``Program.dtype``.

        Labels are the plan's SSA ids (``PlanArgument.name``, op results);
        an unknown label is a :class:`PlanError` that names the valid ones.
        """
        defined = {arg.name: arg.type for arg in self.args}
        for op in self.ops:
            defined.update(zip(op.results, op.result_types, strict=True))
        if label not in defined:
            shown = ", ".join(list(defined)[:8]) + (", ..." if len(defined) > 8 else "")
            raise PlanError(f"no value is labelled {label!r} in this plan; labels are {shown}")
        return self.type_info(defined[label]).dtype

    def primitive(self, label: str) -> str | None:
        """The registered primitive that computes ``label`` (``lattice.call``'s callee), or None.

        The typed-program text's ``Program.primitive?``: an op that is not a
        call has no primitive; an unknown label is a :class:`PlanError`.
        """
        self.dtype(label)  # refuses an unknown label, naming the valid ones
        for op in self.ops:
            if label in op.results and op.definition.name == "call":
                return str(op.attrs["callee"])
        return None

    def type_info(self, type_text: str) -> ValueType:
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
        return logical_inputs(self.args)

    def weight_operations(self) -> tuple[PlanOperation, ...]:
        """Every ``lattice.weight`` op, in program order."""
        return tuple(op for op in self.ops if op.definition.name == "weight")

    def producer(self, label: str) -> PlanOperation | None:
        """The op that defines ``label`` (None for entry arguments or unknown labels)."""
        for op in self.ops:
            if label in op.results:
                return op
        return None
