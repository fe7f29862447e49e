"""The torch LatticeProgram: call forms, input rejection, bundle and weight errors, devices."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.plan import native_module
from lattice_contract.runtime import WeightContractError
from safetensors.torch import save_file
from torch_lattice import SparseTensor, ops
from torch_lattice.artifact import (
    ArtifactCapabilityError,
    BundleError,
    LatticeArtifact,
    LatticeProgram,
    LatticeValidationError,
    ProgramCallError,
    compile_lattice_artifact,
    import_lattice_plan,
    lattice_artifact_status,
    load_lattice_artifact,
    load_lattice_program,
    native_artifact_execution_available,
    save_lattice_artifact,
    validate_lattice_artifact,
)
from torch_lattice.ops.quant import quantize_weight

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _sparse(rows: int = 20, channels: int = 4, stride: int = 1, seed: int = 0) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    logical = torch.randint(0, 5, (rows, 3), generator=gen)
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, logical * stride], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), channels, generator=gen), stride=stride)


def _conv_artifact(tmp_path: Path, *, two_inputs: bool = False) -> tuple[Path, torch.Tensor]:
    """x -> subm conv (3x3x3, 4->6); with two_inputs also sparse.cat with t, both returned."""
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = torch.randn(6, 3, 3, 3, 4, generator=torch.Generator().manual_seed(1)) * 0.2
    wv = b.weight(storage_key="conv.weight", layout="conv3d_o_xyz_i", dtype="f32", shape=w.shape)
    y = b.subm_conv3d(input=x, weight=wv, kernel_size=3)
    b.add_output("y", y)
    if two_inputs:
        t = b.add_sparse_input("t", channels=2, dtype="f32")
        b.add_output("z", b.sparse_cat(lhs=x, rhs=t, join="outer"))
    path = tmp_path / "conv.lattice"
    save_lattice_artifact(path, b.build(), {"conv.weight": w})
    return path, w


def test_native_module_present() -> None:
    # The native module is part of this project; every artifact test below needs it.
    assert native_artifact_execution_available()


@pytest.mark.parametrize("device", DEVICES)
def test_three_call_forms_agree(tmp_path: Path, device: str) -> None:
    path, w = _conv_artifact(tmp_path)
    program = load_lattice_program(path, device=device)
    x = _sparse().to(device)
    want = ops.subm_conv3d(x, w.to(device), kernel_size=3)
    for got in (
        program(x),
        program(x=x),
        program(x.coords, x.feats, x.active_rows),
        program(x_coords=x.coords, x_features=x.feats, x_active=x.active_rows),
        program(coords=x.coords, features=x.feats, active=x.active_rows),
        program.call_with_trusted_sparse_inputs(x),
    ):
        assert isinstance(got, SparseTensor)
        assert torch.equal(got.coords, want.coords)
        torch.testing.assert_close(got.feats, want.feats)
    assert program.input_names == ("x",)
    assert program.output_names == ("y",)
    assert repr(program) == f"LatticeProgram((x) -> (y), 3 ops, {program.device})"
    # Execution runs without autograd, even for inputs that require gradients.
    grad_input = x.with_feats(x.feats.detach().clone().requires_grad_(True))
    assert not program(grad_input).feats.requires_grad


def test_inputs_on_another_device_are_moved(tmp_path: Path) -> None:
    path, _ = _conv_artifact(tmp_path)
    program = load_lattice_program(path, device="cpu")
    got = program(_sparse())
    assert got.device.type == "cpu"


def test_several_outputs_and_logical_names(tmp_path: Path) -> None:
    path, _ = _conv_artifact(tmp_path, two_inputs=True)
    program = load_lattice_program(path)
    x, t = _sparse(seed=1), _sparse(channels=2, seed=2)
    y, z = program(x, t)
    y2, z2 = program(t=t, x=x)
    assert torch.equal(y.feats, y2.feats) and torch.equal(z.feats, z2.feats)
    want = ops.sparse_cat(x, t, join="outer")
    assert torch.equal(z.coords, want.coords) and torch.equal(z.feats, want.feats)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p, x: p(), "missing"),
        (lambda p, x: p(x, x), "positional"),
        (lambda p, x: p(x, x_coords=x.coords), "ABI array name"),
        (lambda p, x: p(x.coords, x.feats), "missing"),
        (lambda p, x: p(x.coords, x.feats, x.active_rows, extra=1), "unexpected"),
        (lambda p, x: p(x.coords.long(), x.feats, x.active_rows), "element type"),
        (lambda p, x: p(x.coords, x.feats.half(), x.active_rows), "element type"),
        (lambda p, x: p(x.coords, x.feats[:, :3], x.active_rows), "shape"),
        (lambda p, x: p(x.coords[:5], x.feats, x.active_rows), "rows"),
        (lambda p, x: p(x.feats, x.coords, x.active_rows), "element type"),
        (lambda p, x: p(y=x), "unexpected"),
    ],
)
def test_bad_calls_fail_before_running(tmp_path: Path, call: Any, message: str) -> None:
    path, _ = _conv_artifact(tmp_path)
    program = load_lattice_program(path)
    with pytest.raises(ProgramCallError, match=message):
        call(program, _sparse())


def test_sparse_abi_validated_unless_trusted(tmp_path: Path) -> None:
    path, _ = _conv_artifact(tmp_path)
    program = load_lattice_program(path)
    x = _sparse()
    coords = torch.cat([x.coords, x.coords[:1]])
    feats = torch.cat([x.feats, x.feats[:1]])
    with pytest.raises(ValueError, match="duplicate"):
        program(coords, feats, torch.tensor([len(coords)], dtype=torch.int32))
    # Rows past ``active`` are capacity padding and never read.
    got = program(coords, feats, x.active_rows)
    assert got.num_rows == x.num_rows
    bad = x.coords.clone()
    bad[0, 0] = -1
    with pytest.raises(ValueError, match="batch"):
        program(bad, x.feats, x.active_rows)


def test_bundle_rules(tmp_path: Path) -> None:
    path, w = _conv_artifact(tmp_path)
    artifact = load_lattice_artifact(path)
    assert set(artifact.weights) == {"conv.weight"}
    assert torch.equal(artifact.weights["conv.weight"], w)
    (path / "manifest.json").write_text("{}")
    with pytest.raises(BundleError, match="legacy JSON manifest"):
        load_lattice_program(path)
    (path / "manifest.json").unlink()
    save_file({"x": torch.zeros(1)}, str(path / "extra.safetensors"))
    with pytest.raises(BundleError, match=r"extra\.safetensors"):
        load_lattice_artifact(path)
    with pytest.raises(BundleError, match="does not exist"):
        load_lattice_artifact(tmp_path / "nope.lattice")


def test_save_is_atomic_on_error(tmp_path: Path) -> None:
    path, _ = _conv_artifact(tmp_path)
    before = sorted(p.name for p in path.iterdir())
    with pytest.raises(TypeError):
        # A str on purpose; the shared artifact code types weights as Any.
        save_lattice_artifact(path, "module {}", {"w": "not a tensor"})
    assert sorted(p.name for p in path.iterdir()) == before
    assert load_lattice_program(path) is not None


def test_weight_contract_errors_name_the_key(tmp_path: Path) -> None:
    path, w = _conv_artifact(tmp_path)
    graph = (path / "graph.mlir").read_text()
    assert lattice_artifact_status(load_lattice_artifact(path)).valid
    assert lattice_artifact_status(path).valid and lattice_artifact_status(str(path)).valid
    status = lattice_artifact_status(LatticeArtifact(graph, {"conv.weight": w.half()}))
    assert not status.valid and "conv.weight" in status.diagnostics
    with pytest.raises(LatticeValidationError, match=r"conv\.weight"):
        validate_lattice_artifact(LatticeArtifact(graph, {}))
    with pytest.raises(WeightContractError, match=r"conv\.weight"):
        compile_lattice_artifact(LatticeArtifact(graph, {}))
    with pytest.raises(WeightContractError, match=r"conv\.weight"):
        compile_lattice_artifact(LatticeArtifact(graph, {"conv.weight": w.half()}))
    with pytest.raises(WeightContractError, match=r"conv\.weight"):
        compile_lattice_artifact(LatticeArtifact(graph, {"conv.weight": w[:, :2]}))


def test_artifact_status_without_the_native_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like MLX: the graph is still verified through lattice-opt; only compiling needs native."""
    native = native_module()
    assert native is not None
    tool = str(native.lattice_opt_path())
    path, _ = _conv_artifact(tmp_path)
    artifact = load_lattice_artifact(path)
    broken = LatticeArtifact(
        artifact.graph.replace("kernel_size = array<i64: 3, 3, 3>", "kernel_size = array<i64: 3>"),
        artifact.weights,
    )
    assert broken.graph != artifact.graph
    monkeypatch.setitem(sys.modules, "lattice_mlir", None)  # as if it were not built
    assert native_module() is None
    assert lattice_artifact_status(artifact, lattice_opt=tool).valid
    validate_lattice_artifact(artifact, lattice_opt=tool)
    status = lattice_artifact_status(broken, lattice_opt=tool)
    assert not status.valid and "kernel_size" in status.diagnostics
    with pytest.raises(LatticeValidationError, match="kernel_size"):
        validate_lattice_artifact(broken, lattice_opt=tool)
    with pytest.raises(ArtifactCapabilityError, match="lattice_mlir"):
        compile_lattice_artifact(artifact)


def test_artifact_status_with_lattice_opt_still_checks_the_weights(tmp_path: Path) -> None:
    """A caller's lattice-opt verifies the graph; the native module still binds the weights."""
    native = native_module()
    assert native is not None
    tool = str(native.lattice_opt_path())
    path, _ = _conv_artifact(tmp_path)
    artifact = load_lattice_artifact(path)
    assert lattice_artifact_status(artifact, lattice_opt=tool).valid
    missing = LatticeArtifact(artifact.graph, {})
    for status in (
        lattice_artifact_status(missing),
        lattice_artifact_status(missing, lattice_opt=tool),
    ):
        assert not status.valid and "conv.weight" in status.diagnostics
    with pytest.raises(LatticeValidationError, match=r"conv\.weight"):
        validate_lattice_artifact(missing, lattice_opt=tool)


def test_packed_triplet_errors(tmp_path: Path) -> None:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=32, dtype="f32")
    wv = b.weight(
        storage_key="c",
        layout="conv3d_o_xyz_i",
        shape=(8, 1, 1, 1, 32),
        packing={"bits": "int4", "group_size": 32, "scale_dtype": "f32"},
    )
    b.add_output("y", b.subm_conv3d(input=x, weight=wv, kernel_size=1))
    graph = b.build()
    q = quantize_weight(torch.randn(8, 1, 1, 1, 32), bits=4, group_size=32)
    full = {"c.weight": q.weight, "c.scales": q.scales, "c.biases": q.biases}
    assert compile_lattice_artifact(LatticeArtifact(graph, full)) is not None
    partial = {"c.weight": q.weight, "c.scales": q.scales}
    with pytest.raises(WeightContractError, match=r"c\.biases"):
        compile_lattice_artifact(LatticeArtifact(graph, partial))
    drift = dict(full, **{"c.scales": q.scales.half(), "c.biases": q.biases.half()})
    with pytest.raises(WeightContractError, match="scale"):
        compile_lattice_artifact(LatticeArtifact(graph, drift))


def test_program_needs_a_plan() -> None:
    with pytest.raises(TypeError, match="RuntimePlan"):
        LatticeProgram({"ops": []}, {})  # type: ignore[arg-type]


def test_rejects_unverifiable_graph() -> None:
    b = MLIRModuleBuilder(schema_digest="0" * 64)
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    b.add_output("y", x)
    with pytest.raises(LatticeValidationError, match="digest"):
        import_lattice_plan(b.build())


def test_unknown_device_is_rejected(tmp_path: Path) -> None:
    path, _ = _conv_artifact(tmp_path)
    with pytest.raises(ValueError, match="device"):
        load_lattice_program(path, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            load_lattice_program(path, device="cuda")


def test_graph_operation_names_come_from_the_verified_plan() -> None:
    from lattice_contract.builder import MLIRModuleBuilder
    from torch_lattice.artifact import LatticeValidationError, lattice_graph_operation_names

    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=2, dtype="f32")
    b.add_output("y", b.pool3d(input=x, mode="max", kernel_size=2, stride=2))
    assert lattice_graph_operation_names(b.build()) == ("lattice.sparse.make", "lattice.pool3d")
    with pytest.raises(LatticeValidationError):
        lattice_graph_operation_names(b.build().replace("lattice.pool3d", "lattice.pool4d"))
