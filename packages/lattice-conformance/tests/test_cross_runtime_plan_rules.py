"""Plan-level refusals of schema rules: tagged like the verifier, and alike on both runtimes.

The native verifier refuses most broken graphs itself; the plan freezer and
the type checker see what reaches them from the native payload (or from a
hand-made one) and must word a broken schema rule with that rule's one
message, ``<problem>; <fix> [rule <id>]``, as the verifier and the builder
do.  Each case corrupts the native payload of a verified graph (a deep copy,
so the native module's own result is untouched) and hands the same plan to
both runtimes' program constructors: the error class and the whole message
must be identical, and the message must end with the rule's fix and tag.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx_lattice.artifact as mart
import numpy as np
import pytest
import torch
import torch_lattice.artifact as tart
from lattice_contract import MLIRModuleBuilder
from lattice_contract.dialect import rule
from lattice_contract.plan import PlanError, PlanTypeError, RuntimePlan, require_native


def _payload() -> dict[str, Any]:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, 3, 3, 3, 4))
    y = b.subm_conv3d(input=x, weight=w, kernel_size=3)
    b.add_output("y", b.global_pool(input=y, mode="max", batch_size=2))
    payload: dict[str, Any] = require_native().import_plan(b.build())
    return copy.deepcopy(payload)


def _op(payload: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(op for op in payload["ops"] if op["name"] == f"lattice.{name}")
    return found


def _set_attr(op: str, attr: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: _op(p, op)["attrs"].__setitem__(attr, value)


def _drop_attr(op: str, attr: str) -> Callable[[dict[str, Any]], None]:
    return lambda p: _op(p, op)["attrs"].pop(attr)


# name: (corruption, error class, rule ID)
CASES: dict[str, tuple[Callable[[dict[str, Any]], None], type[PlanError], str]] = {
    "kernel below 1": (
        _set_attr("subm_conv3d", "kernel_size", [0, 3, 3]),
        PlanError,
        "attr.minimum",
    ),
    "kernel of two axes": (
        _set_attr("subm_conv3d", "kernel_size", [3, 3]),
        PlanError,
        "attr.triple",
    ),
    "kernel past int32": (
        _set_attr("subm_conv3d", "kernel_size", [3, 3, 1 << 40]),
        PlanError,
        "geometry.int32",
    ),
    "accumulation missing": (_drop_attr("subm_conv3d", "accumulation"), PlanError, "attr.required"),
    "unknown attribute": (_set_attr("subm_conv3d", "groups", 2), PlanError, "attr.declared"),
    "unknown mode": (_set_attr("global_pool", "mode", "median"), PlanError, "attr.allowed"),
    "wrong layout": (_set_attr("weight", "layout", "bias_c"), PlanTypeError, "weight.layout"),
    "pool rows": (_set_attr("global_pool", "batch_size", 3), PlanTypeError, "global_pool.rows"),
}


def _failure(make: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises(PlanError) as info:
        make()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_refusal_names_the_rule_alike_on_both_runtimes(name: str) -> None:
    corrupt, kind, rule_id = CASES[name]
    payload = _payload()
    corrupt(payload)
    weight = np.zeros((6, 3, 3, 3, 4), dtype=np.float32)

    def on_mlx() -> Any:
        return mart.LatticeProgram(mart.RuntimePlan.from_native(payload), {"w": mx.array(weight)})

    def on_torch() -> Any:
        plan = tart.RuntimePlan.from_native(payload)
        return tart.LatticeProgram(plan, {"w": torch.from_numpy(weight)})

    mlx_error, torch_error = _failure(on_mlx), _failure(on_torch)
    assert mlx_error == torch_error
    assert mlx_error[0] is kind
    found = rule(rule_id)
    assert mlx_error[1].endswith(f"; {found.fix}{found.tag}"), mlx_error[1]
    if kind is PlanError:  # the freezer alone, as the contract's entry point runs it
        with pytest.raises(PlanError) as info:
            RuntimePlan.from_native(payload)
        assert str(info.value) == mlx_error[1]


def test_the_uncorrupted_payload_compiles_on_both() -> None:
    payload = _payload()
    weight = np.zeros((6, 3, 3, 3, 4), dtype=np.float32)
    mart.LatticeProgram(mart.RuntimePlan.from_native(payload), {"w": mx.array(weight)})
    tart.LatticeProgram(tart.RuntimePlan.from_native(payload), {"w": torch.from_numpy(weight)})
