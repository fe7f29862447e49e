"""The artifact API as the reference texts write it: plans, lowerings, ABI names, checks.

Each test runs a call form the texts name (a plan payload without ``types``,
the ``@artifact_lowering`` example, the lowering helpers by their names, the
typed-program checker's names, the bare sparse input names) against a real
native-verified artifact and compares with the plain Lattice result.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lattice_mlir
import mlx.core as mx
import numpy as np
import pytest
from artifact_support import np_of, random_sparse, save_and_load, weight
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import Triple
from lattice_contract.mlir import MLIRModuleBuilder as UpstreamBuilder
from lattice_contract.mlir import SparseTensorType
from lattice_contract.plan import PlanError, RuntimePlan
from lattice_contract.runtime import LoweringError, conv_weight
from mlx_lattice import SparseTensor, ops
from mlx_lattice.artifact import ProgramCallError
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS, artifact_lowering
from mlx_lattice.artifact.runtime import (
    sparse_decompose_from_artifact,
    sparse_make_from_artifact,
    weight_from_artifact,
)
from mlx_lattice.ops import QuantizedWeight, conv3d


def _conv_graph() -> MLIRModuleBuilder:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, 3, 3, 3, 4))
    b.add_output("y", b.conv3d(input=x, weight=w, kernel_size=3, stride=2, padding=1))
    return b


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Any]:
    rng = np.random.default_rng(27)
    w = weight(rng, 6, 3, 3, 3, 4)
    program = save_and_load(tmp_path, _conv_graph(), {"w": w})
    x = random_sparse(rng, 60, 4)
    want = ops.conv3d(x, w, kernel_size=3, stride=2, padding=1)
    return {"program": program, "x": x, "w": w, "want": want, "tmp": tmp_path}


@pytest.fixture
def restore_conv3d() -> Iterator[None]:
    yield
    MLX_LOWERINGS.restore_standard("conv3d")


def test_a_payload_without_types_freezes_to_the_same_plan() -> None:
    payload = lattice_mlir.import_plan(_conv_graph().build())
    with_types = RuntimePlan.from_native(payload)
    without = {k: v for k, v in payload.items() if k != "types"}
    assert RuntimePlan.from_native(without) == with_types
    broken = dict(without, args=[dict(without["args"][0], type="tensor<4x?!>")])
    with pytest.raises(PlanError, match=r"no 'types' table and type 'tensor<4x.*not a canonical"):
        RuntimePlan.from_native(broken)


def test_the_documented_lowering_example_runs_as_written(
    setup: dict[str, Any], restore_conv3d: None
) -> None:
    calls: list[Triple] = []

    @artifact_lowering(op=conv3d, weights={"weight": conv_weight(input="input")})
    def conv3d_from_artifact(
        input: SparseTensor,
        weight: mx.array | QuantizedWeight,
        bias: mx.array | None = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
    ) -> SparseTensor:
        calls.append(stride)
        return conv3d(
            input,
            weight,
            bias,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
        )

    program = save_and_load(setup["tmp"], _conv_graph(), {"w": setup["w"]})
    got = program(setup["x"])
    assert calls == [(2, 2, 2)]
    assert np.array_equal(np_of(got.feats), np_of(setup["want"].feats))
    # a second extension for the same op must say so: no silent shadowing
    with pytest.raises(LoweringError, match=r"already has a lowering.*replace=True"):
        artifact_lowering(op="conv3d")(conv3d_from_artifact)
    artifact_lowering(op="conv3d", replace=True)(conv3d_from_artifact)


def test_lowering_helpers_by_their_artifact_api_names(
    setup: dict[str, Any], restore_conv3d: None
) -> None:
    seen: list[int] = []

    @artifact_lowering(op="conv3d")
    def conv3d_via_helpers(
        context: Any,
        input: SparseTensor,
        weight: mx.array,
        bias: mx.array | None = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
    ) -> SparseTensor:
        coords, features, active = sparse_decompose_from_artifact(input)
        again = sparse_make_from_artifact(
            context, coords, features, active, stride=input.stride, coord_order="batch_x_y_z"
        )
        stored = weight_from_artifact(context, "w", "conv3d_o_xyz_i", None)
        assert isinstance(stored, mx.array) and bool(mx.array_equal(stored, weight))
        seen.append(again.num_rows)
        return conv3d(again, stored, bias, kernel_size=kernel_size, stride=stride,
                      padding=padding, dilation=dilation)  # fmt: skip

    program = save_and_load(setup["tmp"], _conv_graph(), {"w": setup["w"]})
    got = program(setup["x"])
    assert seen == [setup["x"].num_rows]
    assert np.array_equal(np_of(got.feats), np_of(setup["want"].feats))


def test_typed_program_checker_names(setup: dict[str, Any]) -> None:
    plan = setup["program"].plan
    typed = plan.check()
    assert typed.plan is plan
    features_label = plan.args[1].name
    assert plan.dtype(features_label) == "f32" == typed[features_label].dtype
    with pytest.raises(PlanError, match="no value is labelled 'v999'"):
        plan.dtype("v999")
    assert plan.primitive(plan.ops[-1].results[0]) is None  # a conv, not a primitive
    b = MLIRModuleBuilder()
    t = b.add_input("t", "tensor<?x3xf32>")
    b.add_output("best", b.call(inputs=[t], callee="argmax"))
    called = RuntimePlan.from_native(lattice_mlir.import_plan(b.build()))
    assert called.primitive(called.ops[-1].results[0]) == "argmax"
    with pytest.raises(PlanError, match="no value is labelled"):
        called.primitive("nope")


def test_keywords_bind_by_abi_name_only(setup: dict[str, Any]) -> None:
    x = setup["x"]
    with pytest.raises(ProgramCallError, match="did you mean 'x_features'"):
        setup["program"](x_coords=x.coords, x_feats=x.feats, x_active=x.active_rows)


def test_bare_sparse_input_names(setup: dict[str, Any]) -> None:
    b = UpstreamBuilder()
    x = b.argument(None, SparseTensorType(channels=4, dtype="f32"))
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, 3, 3, 3, 4))
    b.return_(b.conv3d(input=x, weight=w, kernel_size=3, stride=2, padding=1))
    text = b.to_mlir()
    assert 'lattice.input_names = ["coords", "features", "active"]' in text
    program = save_and_load(setup["tmp"], b, {"w": setup["w"]})
    v = setup["x"]
    want = np_of(setup["want"].feats)
    assert program.input_names == ("input",)
    for out in (
        program(v),
        program(input=v),
        program(coords=v.coords, features=v.feats, active=v.active_rows),
        program(v.coords, v.feats, v.active_rows),
    ):
        assert np.array_equal(np_of(out.feats), want)
    with pytest.raises(ProgramCallError, match="did you mean 'features'"):
        program(coords=v.coords, feats=v.feats, active=v.active_rows)


def test_bare_names_are_for_a_single_sparse_input() -> None:
    b = UpstreamBuilder()
    b.argument(None, SparseTensorType(channels=4))
    with pytest.raises(Exception, match="only sparse input"):
        b.argument("y", SparseTensorType(channels=4))
    text = _conv_graph().build().replace('"x_coords", "x_features", "x_active"',
                                         '"coords", "features", "active"')  # fmt: skip
    status = lattice_mlir.verify(text)
    assert status, status.diagnostics  # one sparse input: the bare names verify natively
    two = MLIRModuleBuilder()
    two.add_sparse_input("a", channels=1, dtype="f32")
    bv = two.add_sparse_input("b", channels=1, dtype="f32")
    two.add_output("y", bv)
    text = two.build().replace('"a_coords", "a_features", "a_active"',
                               '"coords", "features", "active"')  # fmt: skip
    status = lattice_mlir.verify(text)
    assert not status and "bare" in status.diagnostics and "2 sparse inputs" in status.diagnostics
