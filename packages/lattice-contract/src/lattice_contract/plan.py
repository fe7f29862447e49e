"""The typed, frozen execution plan of a verified lattice artifact.

The native importer (``lattice_mlir.import_plan``) parses and verifies
``graph.mlir`` with real MLIR and hands Python a plain payload of dicts and
lists.  That payload is only a transport: :meth:`RuntimePlan.from_native`
checks every part of it against the dialect schema and turns it into frozen
dataclasses.  The plan is the same for every backend; ``mlx_lattice`` and
``torch_lattice`` lower it with their own registries (see
:mod:`lattice_contract.lowering`).

This module is the public face of three parts, each on its own:

* :mod:`lattice_contract.plan_records`: the frozen records
  (:class:`RuntimePlan`, :class:`PlanOperation`, ...) and :class:`ValueType`,
  the one model of a value's type;
* :mod:`lattice_contract.plan_freeze`: the one table-driven freezer behind
  ``from_native`` (schema and SSA rules; the attribute rules are in
  :mod:`lattice_contract.plan_attrs`);
* :mod:`lattice_contract.plan_abi`: the call ABI (argument and output roles,
  sparse input triples, logical inputs).

Every failure is a :class:`PlanError` (a ``ValueError``) naming the op or
label involved and what the producer has to change.
"""

from __future__ import annotations

from lattice_contract.plan_freeze import LEGACY_LAYOUTS
from lattice_contract.plan_records import (
    ENTRY_NAME,
    LogicalInput,
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    RuntimePlan,
    TypeInfo,
    ValueType,
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
    "ValueType",
]
