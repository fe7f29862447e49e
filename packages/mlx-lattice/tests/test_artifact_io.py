"""Bundle IO, MLIR validation (in process and through lattice-opt) and the no-native path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from artifact_support import MX, np_of
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice.artifact import (
    ArtifactCapabilityError,
    LatticeArtifact,
    LatticeValidationError,
    lattice_graph_operation_names,
    lattice_graph_status,
    load_lattice_artifact,
    native_artifact_execution_available,
    save_lattice_artifact,
    validate_lattice_artifact,
    validate_lattice_graph,
)
from mlx_lattice.artifact.validation import LATTICE_OPT_ENV, native_module
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight


def _graph() -> str:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 1, 1, 1, 4))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
    return b.build()


def test_round_trip_keeps_every_entry(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    dense = {
        name: mx.array(rng.standard_normal((3, 5)).astype(np.float32)).astype(MX[name])
        for name in ("f16", "bf16", "f32")
    }
    packed = quantize_weight(
        mx.array(rng.standard_normal((8, 64)).astype(np.float32)), bits=4, group_size=32
    )
    weights: dict[str, mx.array | QuantizedWeight] = {
        **dense,
        "head": packed,
        "index": mx.arange(6, dtype=mx.uint32),
    }
    path = tmp_path / "m.lattice"
    save_lattice_artifact(path, _graph(), weights)
    assert sorted(p.name for p in path.iterdir()) == ["graph.mlir", "weights.safetensors"]
    loaded = load_lattice_artifact(path)
    assert isinstance(loaded, LatticeArtifact)
    assert loaded.graph == _graph()
    assert sorted(loaded.weights) == sorted(
        ["f16", "bf16", "f32", "index", "head.weight", "head.scales", "head.biases"]
    )
    for name, array in dense.items():
        assert loaded.weights[name].dtype == array.dtype
        np.testing.assert_array_equal(np_of(loaded.weights[name]), np_of(array))
    assert loaded.weights["head.weight"].dtype == mx.uint32
    np.testing.assert_array_equal(np_of(loaded.weights["head.weight"]), np_of(packed.weight))
    np.testing.assert_array_equal(np_of(loaded.weights["index"]), np.arange(6))


def test_save_without_weights(tmp_path: Path) -> None:
    save_lattice_artifact(tmp_path / "m.lattice", _graph())
    assert load_lattice_artifact(tmp_path / "m.lattice").weights == {}


def test_save_rejects_bad_arguments_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    with pytest.raises(TypeError, match=r"weight 'w' is a ndarray; pass mlx.core.array"):
        # A NumPy array on purpose; the shared artifact code types weights as Any.
        save_lattice_artifact(target, _graph(), {"w": np.zeros(3)})
    with pytest.raises(TypeError, match=r"graph must be the non-empty MLIR text"):
        save_lattice_artifact(target, b"module {}")  # type: ignore[arg-type]
    packed = quantize_weight(mx.zeros((2, 32)), bits=8, group_size=32)
    with pytest.raises(ValueError, match=r"entry 'w.scales' is given twice"):
        save_lattice_artifact(target, _graph(), {"w": packed, "w.scales": mx.zeros(2)})
    assert list(tmp_path.iterdir()) == []


def test_failed_save_leaves_nothing_and_keeps_the_old_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "m.lattice"
    save_lattice_artifact(target, _graph(), {"w": mx.ones((2, 1, 1, 1, 4))})

    def broken(path: str, arrays: object) -> None:
        Path(path).write_bytes(b"partial")
        raise OSError("No space left on device")

    monkeypatch.setattr(mx, "save_safetensors", broken)
    with pytest.raises(OSError, match="No space left"):
        save_lattice_artifact(target, _graph() + "// changed\n", {})
    with pytest.raises(OSError, match="No space left"):
        save_lattice_artifact(tmp_path / "new.lattice", _graph(), {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lattice"]
    monkeypatch.undo()
    kept = load_lattice_artifact(target)
    assert kept.graph == _graph() and sorted(kept.weights) == ["w"]


def test_in_process_validation(tmp_path: Path) -> None:
    assert native_module() is not None and native_artifact_execution_available()
    status = lattice_graph_status(_graph())
    assert status.valid and status.diagnostics == ""
    validate_lattice_graph(_graph())
    broken = _graph().replace("lattice.subm_conv3d", "lattice.subm_conv4d")
    status = lattice_graph_status(broken)
    assert not status.valid and "subm_conv4d" in status.diagnostics
    with pytest.raises(LatticeValidationError, match="subm_conv4d") as info:
        validate_lattice_graph(broken)
    assert "subm_conv4d" in info.value.diagnostics
    assert lattice_graph_operation_names(_graph()) == (
        "lattice.sparse.make",
        "lattice.weight",
        "lattice.subm_conv3d",
    )
    artifact = LatticeArtifact(_graph(), {"w": mx.ones((2, 1, 1, 1, 4))})
    validate_lattice_artifact(artifact)
    with pytest.raises(LatticeValidationError, match=r"no entry 'w'"):
        validate_lattice_artifact(LatticeArtifact(_graph(), {}))
    # A bundle path is loaded first, so the bundle rules and the weights both apply.
    bundle = tmp_path / "status.lattice"
    save_lattice_artifact(bundle, artifact.graph, artifact.weights)
    validate_lattice_artifact(bundle)
    save_lattice_artifact(bundle, artifact.graph, {})
    with pytest.raises(LatticeValidationError, match=r"no entry 'w'"):
        validate_lattice_artifact(str(bundle))
    with pytest.raises(TypeError, match="graph must be MLIR text"):
        lattice_graph_status(None)  # type: ignore[arg-type]


def _lattice_opt() -> str:
    native = native_module()
    assert native is not None
    return str(native.lattice_opt_path())


def test_validation_through_lattice_opt(monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _lattice_opt()
    assert lattice_graph_status(_graph(), lattice_opt=tool).valid
    broken = _graph().replace("kernel_size = array<i64: 1, 1, 1>", "kernel_size = array<i64: 1, 1>")
    status = lattice_graph_status(broken, lattice_opt=tool)
    assert not status.valid and "kernel_size" in status.diagnostics
    stale = _graph().replace("lattice.ir_version = 2 : i64", "lattice.ir_version = 1 : i64")
    status = lattice_graph_status(stale, lattice_opt=tool)  # artifact rules, not only the dialect
    assert not status.valid and "ir_version" in status.diagnostics
    with pytest.raises(
        ArtifactCapabilityError,
        match=r"lattice_opt='/nonexistent' is not an "
        r"executable file",
    ):
        lattice_graph_status(_graph(), lattice_opt="/nonexistent")
    monkeypatch.setenv(LATTICE_OPT_ENV, "/nonexistent/lattice-opt")
    monkeypatch.setattr("lattice_contract.plan.verify.native_module", lambda: None)
    with pytest.raises(ArtifactCapabilityError, match=LATTICE_OPT_ENV):
        lattice_graph_status(_graph())
    monkeypatch.setenv(LATTICE_OPT_ENV, tool)
    assert lattice_graph_status(_graph()).valid
    assert not lattice_graph_status(broken).valid


NO_NATIVE = textwrap.dedent(
    """
    import sys
    sys.modules["lattice_mlir"] = None  # as if the native module were not built
    import mlx.core as mx
    from mlx_lattice.artifact import (ArtifactCapabilityError, compile_lattice_artifact,
        lattice_graph_operation_names, lattice_graph_status, load_lattice_artifact,
        load_lattice_program, native_artifact_execution_available, save_lattice_artifact)
    graph, tool, path = sys.argv[1], sys.argv[2], sys.argv[3]
    assert native_artifact_execution_available() is False
    save_lattice_artifact(path, graph, {"w": mx.ones((2, 1, 1, 1, 4))})
    artifact = load_lattice_artifact(path)
    assert sorted(artifact.weights) == ["w"]
    assert lattice_graph_status(graph, lattice_opt=tool).valid
    for call in (lambda: compile_lattice_artifact(artifact), lambda: load_lattice_program(path),
                 lambda: lattice_graph_operation_names(graph)):
        try:
            call()
        except ArtifactCapabilityError as exc:
            assert "lattice_mlir" in str(exc), exc
        else:
            raise SystemExit("no capability error")
    print("ok")
    """
)


def test_without_the_native_module(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_NATIVE, _graph(), _lattice_opt(), str(tmp_path / "m.lattice")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
