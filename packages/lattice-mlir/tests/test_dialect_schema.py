"""The compiled dialect is the schema: ops, operands, results, attributes, digest.

``dialect_ops()`` reads what ODS compiled (registered op names, inherent
attribute names, operand/result count traits), so these tests fail when the
native build drifts from ``lattice_contract.dialect.schema`` (for example a stale
build after a schema change).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import lattice_mlir
import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST


@pytest.fixture(scope="module")
def registered() -> dict[str, dict[str, Any]]:
    return {op["name"]: op for op in lattice_mlir.dialect_ops()}


def test_native_digest_equals_contract_digest() -> None:
    assert lattice_mlir.SCHEMA_DIGEST == SCHEMA_DIGEST
    assert lattice_mlir.IR_VERSION == 2


def test_registered_ops_are_exactly_the_schema_ops(
    registered: dict[str, dict[str, Any]],
) -> None:
    assert sorted(registered) == sorted(op.mlir_name for op in SCHEMA.ops.values())


@pytest.mark.parametrize("name", sorted(SCHEMA.ops))
def test_op_surface_matches_schema(name: str, registered: dict[str, dict[str, Any]]) -> None:
    op = SCHEMA.ops[name]
    native = registered[op.mlir_name]
    assert native["operand_names"] == [o.name for o in op.operands]
    assert native["min_operands"] == op.min_operands
    assert native["variadic_operands"] == op.variadic
    assert native["num_results"] == len(op.results)
    assert sorted(native["attribute_names"]) == sorted(a.name for a in op.attributes)


def test_module_with_another_digest_is_rejected(
    valid_modules: dict[str, str], run_opt: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    text = valid_modules["conv3d"]
    other = SCHEMA_DIGEST[::-1]
    stamped = text.replace(SCHEMA_DIGEST, other)
    assert stamped != text
    status = lattice_mlir.verify(stamped)
    assert not status.valid
    assert f'lattice.schema_digest = "{other}" does not match' in status.diagnostics
    with pytest.raises(lattice_mlir.LatticeMLIRError) as info:
        lattice_mlir.import_plan(stamped)
    assert "schema digest" in info.value.diagnostics
    run = run_opt("--lattice-verify-artifact", "-", stdin=stamped)
    assert run.returncode == 1 and "does not match this build's schema digest" in run.stderr


def test_module_without_digest_is_rejected(valid_modules: dict[str, str]) -> None:
    text = valid_modules["conv3d"].replace(f'lattice.schema_digest = "{SCHEMA_DIGEST}", ', "")
    status = lattice_mlir.verify(text)
    assert not status.valid and "lattice.schema_digest is missing" in status.diagnostics


def test_plan_carries_the_digest(valid_modules: dict[str, str]) -> None:
    plan = lattice_mlir.import_plan(valid_modules["conv3d"])
    assert plan["schema_digest"] == SCHEMA_DIGEST and plan["ir_version"] == 2
