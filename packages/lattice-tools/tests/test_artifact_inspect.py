"""``lattice inspect``: ABI, ops with bound weight shapes, parameters, quantization, status."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from lattice_contract.builder import MLIRModuleBuilder
from lattice_tools.inspect import main
from mlx_lattice.artifact import save_lattice_artifact
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight


def weight(rng: np.random.Generator, *shape: int, dtype: str = "f32") -> mx.array:
    """A random weight of ``shape`` in ``dtype`` (scaled to keep sums moderate)."""
    out = mx.array(rng.standard_normal(shape).astype(np.float32) * 0.3)
    return out.astype(mx.float16 if dtype == "f16" else mx.float32)


PACK = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}


def _bundle(tmp_path: Path, *, drop: str | None = None) -> Path:
    rng = np.random.default_rng(0)
    b = MLIRModuleBuilder()
    sx = b.add_sparse_input("x", channels=32, dtype="f16")
    b.set_location("encoder.block0")  # the module path an exporter records
    wv = b.weight(
        storage_key="enc.conv", layout="conv3d_o_xyz_i", shape=(16, 3, 3, 3, 32), packing=PACK
    )
    bv = b.weight(storage_key="enc.bias", layout="bias_c", dtype="f16", shape=(16,))
    y = b.conv3d(input=sx, weight=wv, bias=bv, kernel_size=3, stride=2, padding=1)
    b.set_location(None)
    hv = b.weight(storage_key="head", layout="linear_o_i", dtype="f16", shape=(4, 16))
    _, f, _ = b.sparse_decompose(input=y)
    b.add_output("y", y)
    b.add_output("logits", b.linear(input=f, weight=hv))
    weights: dict[str, mx.array | QuantizedWeight] = {
        "enc.conv": quantize_weight(
            weight(rng, 16, 3, 3, 3, 32, dtype="f16"), bits=4, group_size=32
        ),
        "enc.bias": weight(rng, 16, dtype="f16"),
        "head": weight(rng, 4, 16, dtype="f16"),
        "stale": mx.zeros((2,)),
    }
    if drop:
        del weights[drop]
    path = tmp_path / "model.lattice"
    save_lattice_artifact(path, b.build(), weights)
    return path


def test_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _bundle(tmp_path)
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    for expected in [
        "verification: valid (lattice_mlir)",
        "  x (sparse)",
        "    x_coords             sparse_coords    tensor<?x4xi32>",
        "    x_features           sparse_features  tensor<?x32xf16>",
        "  y                      sparse_tensor",
        "  logits                 tensor           tensor<?x4xf16>",
        "ops: 7",
        "lattice.conv3d(v0, v1, v2) {kernel_size=3 stride=2 padding=1 dilation=1}",
        "<- enc.conv i4[16x27x32] packed int4 group 32 scales f16",  # (C_out, taps, padded C_in)
        "<- enc.bias f16[16]",
        "<- head f16[4x16]",
        f"parameters: {16 * 27 * 32 + 16 + 64:,} in 3 weight(s)",
        f"quantization: 1 packed weight(s), {16 * 27 * 32:,} parameters",
        "1 x int4 affine, group_size 32, scales f16",
        "unreferenced entries: stale",
        "compile (mlx): ok",
    ]:
        assert expected in out, (expected, out)


def test_report_through_the_lattice_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lattice_tools.cli import lattice_main

    assert lattice_main(["inspect", str(_bundle(tmp_path))]) == 0
    assert "compile (mlx): ok" in capsys.readouterr().out


def test_weight_problems_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(_bundle(tmp_path, drop="head"))]) == 1
    out = capsys.readouterr().out
    assert "compile (mlx): FAILED" in out and "no entry 'head'" in out
    assert "ops: 7" in out  # the ABI and op list are still shown


def test_invalid_graph_and_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _bundle(tmp_path)
    graph = (path / "graph.mlir").read_text()
    (path / "graph.mlir").write_text(graph.replace("lattice.linear", "lattice.linear2"))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "verification: INVALID (lattice_mlir)" in out and "linear2" in out
    (path / "manifest.json").write_text("{}")
    assert main([str(path)]) == 2  # not a readable bundle: an input error
    assert "legacy JSON manifest" in capsys.readouterr().out
    assert main([str(tmp_path / "absent")]) == 2
    assert "missing path" in capsys.readouterr().out


def test_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: lattice inspect" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_json_has_the_same_facts_as_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    path = _bundle(tmp_path)
    assert main([str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exit_status"] == 0 and report["verification"]["valid"] is True
    assert [i["name"] for i in report["inputs"]] == ["x"]
    assert [o["abi_name"] for o in report["outputs"]] == ["y", "logits"]
    assert len(report["ops"]) == 7
    conv = next(op for op in report["ops"] if op["name"] == "lattice.conv3d")
    assert conv["attrs"]["kernel_size"] == [3, 3, 3] and conv["attrs"]["stride"] == [2, 2, 2]
    packed = next(
        op["weight"] for op in report["ops"] if "weight" in op and op["weight"]["packing"]
    )
    # a packed conv weight is (C_out, taps, padded C_in) until an op reads it
    assert packed["storage_key"] == "enc.conv" and packed["shape"] == [16, 27, 32]
    assert packed["packing"]["bits"] == "int4"
    assert report["parameters"]["total"] == 16 * 27 * 32 + 16 + 64
    assert report["quantization"]["packed_weights"] == 1
    assert report["unreferenced"] == ["stale"]
    assert report["compile_mlx"] == {"ok": True, "error": None}
    assert report["quantization_report"] is None  # written by hand, not by the exporter
    assert main([str(tmp_path / "absent"), "--json"]) == 2
    assert "missing path" in json.loads(capsys.readouterr().out)["error"]


def test_module_paths_from_the_graph_reach_inspect_and_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Native MLIR reads each op's name location; inspect and view show it as its module."""
    import json

    from lattice_tools.graph_model import load_graph_model

    path = _bundle(tmp_path)
    assert 'loc("encoder.block0")' in (path / "graph.mlir").read_text()
    assert main([str(path), "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    located = {op["name"]: op.get("location") for op in ops}
    assert located["lattice.conv3d"] == "encoder.block0"
    assert located["lattice.linear"] is None and "location" not in ops[-1]
    model = load_graph_model(str(path))
    conv = next(n for n in model.nodes if n.op == "lattice.conv3d")
    assert conv.module == "encoder.block0"  # the location, not the storage keys' "enc"
    linear = next(n for n in model.nodes if n.op == "lattice.linear")
    assert linear.module == ""  # no location, and its weight key "head" names no module


def test_a_runtime_error_names_the_op_and_its_module_path(tmp_path: Path) -> None:
    """A weight that does not fit its op is reported at the module path the graph records."""
    from lattice_contract.runtime import WeightContractError
    from mlx_lattice.artifact import compile_lattice_artifact, load_lattice_artifact

    artifact = load_lattice_artifact(_bundle(tmp_path))
    weights = dict(artifact.weights)
    weights["enc.bias"] = mx.zeros((15,), dtype=mx.float16)
    save_lattice_artifact(tmp_path / "bad.lattice", artifact.graph, weights)
    with pytest.raises(
        WeightContractError, match=r"op #3 \(lattice\.conv3d -> v3 at encoder\.block0\): bias"
    ):
        compile_lattice_artifact(load_lattice_artifact(tmp_path / "bad.lattice"))
