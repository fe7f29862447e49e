"""RuntimePlan from the real native importer, and the shared verification helpers."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pytest
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.plan import RuntimePlan, typecheck_plan, verify


def _module() -> MLIRModuleBuilder:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=32, dtype="f16", stride=2)
    t = b.add_sparse_input("t", channels=8, dtype="f16", stride=1)
    w = b.weight(
        storage_key="up",
        layout="conv3d_o_xyz_i",
        shape=(8, 2, 2, 2, 32),
        packing={"bits": "int8", "group_size": 32, "scale_dtype": "f16", "mode": "affine"},
    )
    y = b.target_conv_transpose3d(input=x, target=t, weight=w, kernel_size=2, stride=2)
    z = b.sparse_cat(lhs=y, rhs=t, join="outer")
    _, f, _ = b.sparse_decompose(input=z)
    g = b.activation(input=f, kind="leaky_relu", alpha=0.2)
    h = b.cast(input=g, dtype="f32", rounding="upward")
    b.add_output("z", z)
    b.add_output("h", h)
    b.add_output("labels", b.call(inputs=[h], callee="argmax"))
    return b


def _python(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "items"):
        return {k: _python(v) for k, v in value.items()}
    return value


def test_native_plan_matches_the_builder() -> None:
    b = _module()
    plan = verify.import_native_plan(b.build())
    assert isinstance(plan, RuntimePlan)
    assert [op.definition for op in plan.ops] == [op.op for op in b.operations]
    for got, want in zip(plan.ops, b.operations, strict=True):
        assert {k: _python(v) for k, v in got.attrs.items()} == {
            k: _python(v) for k, v in want.attrs.items()
        }
    assert [(a.abi_name, a.role) for a in plan.args] == [(n, r) for n, r, _ in b.arguments]
    assert [o.abi_name for o in plan.outputs] == [n for n, _ in b.outputs]
    typed = typecheck_plan(plan, {"argmax"})
    assert typed[plan.returns[1]].dtype == "f32"
    assert typed[plan.returns[2]].dtype == "i32" and typed[plan.returns[2]].rank == 1


def test_capability_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    graph = _module().build()
    monkeypatch.setattr(verify, "native_module", lambda: None)
    with pytest.raises(
        verify.ArtifactCapabilityError,
        match=r"importing a lattice plan needs "
        r"the native lattice_mlir module",
    ):
        verify.import_native_plan(graph)
    monkeypatch.setattr(verify.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        verify.ArtifactCapabilityError,
        match=r"no lattice MLIR verifier is "
        r"available.*set \$SOME_ENV",
    ):
        verify.lattice_graph_status(graph, env="SOME_ENV")
    monkeypatch.setenv("SOME_ENV", str(tmp_path / "missing"))
    with pytest.raises(verify.ArtifactCapabilityError, match=r"\$SOME_ENV=.* is not an executable"):
        verify.lattice_graph_status(graph, env="SOME_ENV")


def test_lattice_opt_status_and_crash_report(tmp_path: Path) -> None:
    native = verify.native_module()
    assert native is not None
    tool = native.lattice_opt_path()
    graph = _module().build()
    assert verify.lattice_graph_status(graph, lattice_opt=tool).valid
    bad = verify.lattice_graph_status(graph.replace("@forward", "@main"), lattice_opt=tool)
    assert not bad.valid and bad.diagnostics
    with pytest.raises(verify.LatticeValidationError) as info:
        verify.validate_lattice_graph(graph.replace("@forward", "@main"), lattice_opt=tool)
    assert info.value.diagnostics == bad.diagnostics
    crasher = tmp_path / "lattice-opt"
    crasher.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crasher.chmod(0o755)
    status = verify.lattice_graph_status(graph, lattice_opt=crasher)
    assert not status.valid and "crashed (signal 11)" in status.diagnostics


def test_status_and_plan_come_from_one_native_check(tmp_path: Path) -> None:
    graph = _module().build()
    status, plan = verify.graph_status_and_plan(graph)
    assert status.valid and plan == verify.import_native_plan(graph)
    bad = graph.replace("@forward", "@main")
    status, plan = verify.graph_status_and_plan(bad)
    assert plan is None and not status.valid
    assert status == verify.lattice_graph_status(bad)  # the same verdict in the same words
    native = verify.native_module()
    assert native is not None
    tool = native.lattice_opt_path()
    status, plan = verify.graph_status_and_plan(graph, lattice_opt=tool)
    assert status.valid and plan is None  # an executable verifies; only the module imports
    with pytest.raises(TypeError, match="must be MLIR text"):
        verify.graph_status_and_plan(graph.encode())  # type: ignore[arg-type]
