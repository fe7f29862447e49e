"""The typed, frozen execution plan of a verified lattice artifact.

The native importer (``lattice_mlir.import_plan``) parses and verifies
``graph.mlir`` with real MLIR and hands Python a plain payload of dicts and
lists.  That payload is only a transport: :meth:`RuntimePlan.from_native`
checks every part of it against the dialect schema and turns it into frozen
dataclasses.  The plan is the same for every backend; ``mlx_lattice`` and
``torch_lattice`` lower it with their own registries (see
:mod:`lattice_contract.runtime.lowering`).

This package's face re-exports its parts, each a module of its own:

* :mod:`lattice_contract.plan.records`: the frozen records
  (:class:`RuntimePlan`, :class:`PlanOperation`, ...) and :class:`ValueType`,
  the one model of a value's type;
* :mod:`lattice_contract.plan.freeze`: the one table-driven freezer behind
  ``from_native`` (schema and SSA rules; the attribute rules are in
  :mod:`lattice_contract.plan.attrs`);
* :mod:`lattice_contract.plan.abi`: the call ABI (argument and output roles,
  sparse input triples, logical inputs).

Every failure is a :class:`PlanError` (a ``ValueError``) naming the op or
label involved and what the producer has to change.
"""

from __future__ import annotations

from lattice_contract.plan import verify
from lattice_contract.plan.freeze import LEGACY_LAYOUTS
from lattice_contract.plan.records import (
    ENTRY_NAME,
    MAX_LOCATION_CHARS,
    NO_FACTS,
    LogicalInput,
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    TypeInfo,
    ValueFacts,
    ValueType,
)
from lattice_contract.plan.runtime_plan import RuntimePlan
from lattice_contract.plan.typecheck import (
    PlanTypeError,
    TypedPlan,
    typecheck_plan,
)
from lattice_contract.plan.verify import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    LatticeValidationError,
    graph_status_and_plan,
    import_native_plan,
    native_module,
    require_native,
)

__all__ = [
    "ENTRY_NAME",
    "LEGACY_LAYOUTS",
    "MAX_LOCATION_CHARS",
    "NO_FACTS",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeValidationError",
    "LogicalInput",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "PlanTypeError",
    "RuntimePlan",
    "TypeInfo",
    "TypedPlan",
    "ValueFacts",
    "ValueType",
    "graph_status_and_plan",
    "import_native_plan",
    "native_module",
    "require_native",
    "typecheck_plan",
    "verify",
]
