"""Both runtimes run one artifact glue: the same lowering table, adapters that satisfy it.

The standard lowerings are written once in ``lattice_contract.runtime.standard_lowerings``
over the ``RuntimeOps`` protocol; ``mlx_lattice`` and ``torch_lattice`` bind
that one table to their adapters.  Here: every op's lowering on MLX is the very
function torch runs, each adapter's ops module has every member a lowering
calls (the run-time half of the mypy-checked ``RuntimeOps`` assignments in
each runtime's ``artifact/backend.py``), both runtimes publish their artifact
API from one ``ArtifactRuntime``, and a bad primitive call fails with the same
error and words on both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import MethodType
from typing import Any

import mlx.core as mx
import mlx_lattice.artifact as mart
import mlx_lattice.ops
import numpy as np
import pytest
import torch
import torch_lattice.artifact as tart
import torch_lattice.ops
from lattice_contract import SCHEMA, MLIRModuleBuilder
from lattice_contract.artifact import BundleError
from lattice_contract.runtime import (
    RUNTIME_OP_NAMES,
    STANDARD_TABLE,
    ArtifactRuntime,
    StandardLowerings,
    artifact_runtime,
    lowering_needs,
    missing_runtime_ops,
    runtime_ops_problems,
)
from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.runtime import RUNTIME as MLX_RUNTIME
from safetensors.numpy import save_file
from torch_lattice.artifact.backend import TORCH_BACKEND
from torch_lattice.artifact.runtime import RUNTIME as TORCH_RUNTIME

REGISTRIES = {"mlx": mart.MLX_LOWERINGS, "torch": tart.LOWERINGS}


def _bound(function: Callable[..., Any]) -> MethodType:
    """A registered implementation, which is a method of its runtime's StandardLowerings."""
    assert isinstance(function, MethodType), function
    assert isinstance(function.__self__, StandardLowerings), function.__self__
    return function


def _adapter(function: Callable[..., Any]) -> object:
    """The runtime adapter whose StandardLowerings ``function`` is bound to."""
    owner = _bound(function).__self__
    assert isinstance(owner, StandardLowerings)
    return owner.adapter


def test_one_lowering_table_on_both_runtimes() -> None:
    by_op = {}
    for entry in STANDARD_TABLE:
        ops = () if entry.op is None else (entry.op,) if isinstance(entry.op, str) else entry.op
        for op in ops:
            by_op[SCHEMA.op(op).name] = getattr(StandardLowerings, entry.attribute)
    assert set(by_op) == set(SCHEMA.ops)
    for name, definition in SCHEMA.ops.items():
        mlx_lowering = REGISTRIES["mlx"].lowering(definition)
        torch_lowering = REGISTRIES["torch"].lowering(definition)
        mlx_function = _bound(mlx_lowering.function).__func__
        assert mlx_function is _bound(torch_lowering.function).__func__ is by_op[name]
        assert mlx_lowering.weights == torch_lowering.weights
        assert mlx_lowering.takes_context == torch_lowering.takes_context
    mlx_primitives, torch_primitives = (r.primitives for r in REGISTRIES.values())
    assert set(mlx_primitives) == set(torch_primitives) == set(SCHEMA.primitives)
    for name in SCHEMA.primitives:
        assert _bound(mlx_primitives[name]).__func__ is _bound(torch_primitives[name]).__func__
    assert _adapter(REGISTRIES["mlx"].lowering("conv3d").function) is MLX_BACKEND
    assert _adapter(REGISTRIES["torch"].lowering("conv3d").function) is TORCH_BACKEND


@pytest.mark.parametrize(
    ("ops", "module"), [(MLX_BACKEND.ops, mlx_lattice.ops), (TORCH_BACKEND.ops, torch_lattice.ops)]
)
def test_each_runtime_ops_module_has_every_needed_op(ops: object, module: object) -> None:
    assert ops is module
    assert missing_runtime_ops(ops) == ()
    assert runtime_ops_problems(ops) == ()
    for entry in STANDARD_TABLE:
        needs = lowering_needs(entry)
        assert needs <= set(RUNTIME_OP_NAMES), entry
        assert all(callable(getattr(module, name)) for name in needs), entry


def test_public_api_comes_from_one_artifact_runtime() -> None:
    for runtime, package, backend in (
        (MLX_RUNTIME, mart, MLX_BACKEND),
        (TORCH_RUNTIME, tart, TORCH_BACKEND),
    ):
        assert isinstance(runtime, ArtifactRuntime) and runtime.adapter is backend
        assert package.load_lattice_artifact == runtime.load_artifact
        assert package.save_lattice_artifact == runtime.save_artifact
        assert package.lattice_graph_status == runtime.graph_status
        assert package.lattice_artifact_status == runtime.artifact_status
        assert package.validate_lattice_artifact == runtime.validate_artifact
        # What no runtime changes is one contract function, re-exported by both.
        for name in (
            "import_lattice_plan",
            "lattice_graph_operation_names",
            "native_artifact_execution_available",
        ):
            assert getattr(package, name) is getattr(artifact_runtime, name), name
    assert MLX_BACKEND.lattice_opt_env == "MLX_LATTICE_LATTICE_OPT"
    assert TORCH_BACKEND.lattice_opt_env == "TORCH_LATTICE_LATTICE_OPT"


def test_primitive_errors_read_the_same() -> None:
    b = MLIRModuleBuilder()
    tv = b.add_input("table", "tensor<?x3xf32>")
    iv = b.add_input("index", "tensor<?xi32>")
    b.add_output("rows", b.call(inputs=[tv, iv], callee="gather_rows"))
    graph = b.build()
    table = np.arange(24, dtype=np.float32).reshape(8, 3)
    index = np.array([8, -1], dtype=np.int32)
    mlx_program = mart.compile_lattice_artifact(mart.LatticeArtifact(graph, {}))
    torch_program = tart.compile_lattice_artifact(tart.LatticeArtifact(graph, {}))
    errors = []
    for call in (
        lambda: mlx_program(mx.array(table), mx.array(index)),
        lambda: torch_program(torch.from_numpy(table), torch.from_numpy(index)),
    ):
        with pytest.raises(IndexError) as caught:
            call()
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert errors[0].startswith("gather_rows: index values span [-1, 8] but the matrix has 8 rows")
    good = np.array([7, 0], dtype=np.int32)
    np.testing.assert_array_equal(
        np.asarray(mlx_program(mx.array(table), mx.array(good))), table[good]
    )
    np.testing.assert_array_equal(
        torch_program(torch.from_numpy(table), torch.from_numpy(good)).numpy(), table[good]
    )


@pytest.mark.parametrize("package", [mart, tart], ids=["mlx", "torch"])
def test_artifact_status_parses_the_graph_once(
    package: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lattice_mlir

    calls: list[str] = []
    for name in ("verify", "import_plan", "verify_and_import"):
        real = getattr(lattice_mlir, name)

        def counted(graph: str, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(graph)

        monkeypatch.setattr(lattice_mlir, name, counted)
    b = MLIRModuleBuilder()
    xv = b.add_input("x", "tensor<?x8xf32>")
    b.add_output("y", b.softmax(input=xv))
    graph = b.build()
    artifact = package.LatticeArtifact(graph, {})
    assert package.lattice_artifact_status(artifact).valid
    assert calls == ["verify_and_import"]
    bad = graph.replace("lattice.ir_version = 2", "lattice.ir_version = 3")
    calls.clear()
    status = package.lattice_artifact_status(package.LatticeArtifact(bad, {}))
    assert calls == ["verify_and_import"] and not status.valid
    graph_status = package.lattice_graph_status(bad)
    assert status.diagnostics == graph_status.diagnostics and "ir_version" in status.diagnostics


def _bundle(path: Path, weights: dict[str, np.ndarray], graph: bytes = b"module {}\n") -> Path:
    path.mkdir()
    (path / "graph.mlir").write_bytes(graph)
    save_file(weights, str(path / "weights.safetensors"))
    return path


def _truncate(bundle: Path) -> None:
    data = (bundle / "weights.safetensors").read_bytes()
    (bundle / "weights.safetensors").write_bytes(data[: len(data) - 16])


BAD_BUNDLES = {
    "nan weight": lambda p: _bundle(p, {"w": np.array([1.0, np.nan, np.inf], np.float32)}),
    "f16 infinity": lambda p: _bundle(p, {"w": np.array([np.inf], np.float16)}),
    "legacy manifest": lambda p: (_bundle(p, {}) / "manifest.json").write_text("{}"),
    "other weight file": lambda p: (_bundle(p, {}) / "extra.npz").write_bytes(b"x"),
    "not utf-8 graph": lambda p: _bundle(p, {}, graph=b"\xff\xfe module"),
    "missing weights": lambda p: (_bundle(p, {}) / "weights.safetensors").unlink(),
    "truncated weights": lambda p: _truncate(_bundle(p, {"w": np.ones(64, np.float32)})),
}


@pytest.mark.parametrize("name", sorted(BAD_BUNDLES))
def test_bad_bundles_fail_the_same_way(tmp_path: Path, name: str) -> None:
    BAD_BUNDLES[name](tmp_path / "m.lattice")
    errors = []
    for package in (mart, tart):
        with pytest.raises(Exception) as caught:
            package.load_lattice_artifact(tmp_path / "m.lattice")
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]
    assert issubclass(errors[0][0], BundleError) and "m.lattice" in errors[0][1]


def test_saved_bundles_round_trip_on_both(tmp_path: Path) -> None:
    weights = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([3], np.int32)}
    mart.save_lattice_artifact(
        tmp_path / "a", "module {}\n", {k: mx.array(v) for k, v in weights.items()}
    )
    tart.save_lattice_artifact(
        tmp_path / "b", "module {}\n", {k: torch.from_numpy(v) for k, v in weights.items()}
    )
    for path in (tmp_path / "a", tmp_path / "b"):
        for package, to_numpy in ((mart, np.asarray), (tart, lambda t: t.numpy())):
            loaded = package.load_lattice_artifact(path)
            assert loaded.graph == "module {}\n" and sorted(loaded.weights) == ["i", "w"]
            for key, value in weights.items():
                np.testing.assert_array_equal(to_numpy(loaded.weights[key]), value)
