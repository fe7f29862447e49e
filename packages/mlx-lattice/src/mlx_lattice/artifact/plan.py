"""The runtime plan types, under the names ``mlx_lattice.artifact.plan`` has always used.

They are defined once in :mod:`lattice_contract.plan` (backend-neutral, shared
with ``torch_lattice``); this module only re-exports them.
"""

from lattice_contract.plan import (
    LogicalInput,
    PlanArgument,
    PlanError,
    PlanOperation,
    PlanOutput,
    PlanTypeError,
    RuntimePlan,
    TypedPlan,
    TypeInfo,
    ValueType,
    typecheck_plan,
)

__all__ = [
    "LogicalInput",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "PlanTypeError",
    "RuntimePlan",
    "TypeInfo",
    "TypedPlan",
    "ValueType",
    "typecheck_plan",
]
