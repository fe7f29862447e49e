"""The rejection policy with real bundles on disk: each case fails before execution.

Bundle-level cases fail in ``load_lattice_artifact``; graph-level cases in the
native verifier (and, for the digest, again in ``RuntimePlan.from_native``);
weight and type cases when the plan is compiled for MLX.  Graph corruptions
start from a valid builder module and change its text, as a stale or foreign
producer would.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from artifact_support import weight
from lattice_contract import SCHEMA
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.runtime import LoweringRegistry, WeightContractError, compile_plan
from mlx_lattice.artifact import (
    BundleError,
    PlanError,
    PlanTypeError,
    RuntimePlan,
    lattice_artifact_status,
    load_lattice_artifact,
    load_lattice_program,
    save_lattice_artifact,
)
from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.artifact.validation import native_module
from mlx_lattice.ops.quant import quantize_weight

PACK = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}


def _conv_module(
    packing: dict[str, Any] | None = None, **builder: Any
) -> tuple[MLIRModuleBuilder, dict[str, Any]]:
    rng = np.random.default_rng(0)
    b = MLIRModuleBuilder(**builder)
    sx = b.add_sparse_input("x", channels=32, dtype="f16")
    extra: dict[str, Any] = {"packing": packing} if packing else {"dtype": "f16"}
    wv = b.weight(storage_key="stem", layout="conv3d_o_xyz_i", shape=(8, 3, 3, 3, 32), **extra)
    bv = b.weight(storage_key="stem.bias", layout="bias_c", dtype="f16", shape=(8,))
    b.add_output("y", b.conv3d(input=sx, weight=wv, bias=bv, kernel_size=3, stride=2, padding=1))
    dense = weight(rng, 8, 3, 3, 3, 32, dtype="f16")
    stem: Any = quantize_weight(dense, bits=4, group_size=32) if packing else dense
    return b, {"stem": stem, "stem.bias": weight(rng, 8, dtype="f16")}


def _bundle(tmp_path: Path, graph: str, weights: dict[str, Any]) -> Path:
    path = tmp_path / "model.lattice"
    save_lattice_artifact(path, graph, weights)
    return path


def _valid(tmp_path: Path) -> tuple[Path, str]:
    b, weights = _conv_module()
    graph = b.build()
    path = _bundle(tmp_path, graph, weights)
    load_lattice_program(path)  # the uncorrupted bundle compiles
    return path, graph


def _rejects(path: Path, pattern: str, kind: type[Exception] = ValueError) -> str:
    with pytest.raises(kind) as info:
        load_lattice_program(path)
    message = str(info.value)
    assert re.search(pattern, message, re.IGNORECASE | re.DOTALL), message
    return message


def _rewrite(path: Path, old: str, new: str, count: int = 1) -> None:
    graph = (path / "graph.mlir").read_text()
    assert old in graph, old
    (path / "graph.mlir").write_text(graph.replace(old, new, count))


# ---------------------------------------------------------------------------
# Bundle level.


@pytest.mark.parametrize("name", ["manifest.json", "model.json"])
def test_legacy_json_manifest(tmp_path: Path, name: str) -> None:
    path, _ = _valid(tmp_path)
    (path / name).write_text('{"format": "lattice-json-v1", "graph": []}')
    _rejects(path, rf"legacy JSON manifest.*{name}", BundleError)
    with pytest.raises(BundleError):
        load_lattice_artifact(path)


@pytest.mark.parametrize("name", ["weights.npz", "extra.safetensors", "model.pt"])
def test_other_weight_files_in_the_bundle(tmp_path: Path, name: str) -> None:
    path, _ = _valid(tmp_path)
    (path / name).write_bytes(b"\0" * 16)
    _rejects(path, rf"weight file\(s\) {re.escape(name)}", BundleError)


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    (path / "weights.safetensors").write_bytes(b"not safetensors")
    _rejects(path, r"not a readable safetensors file", BundleError)
    (path / "weights.safetensors").unlink()
    _rejects(path, r"has no weights.safetensors", BundleError)


# ---------------------------------------------------------------------------
# Graph level (native verifier; the digest also in RuntimePlan.from_native).


def test_ir_version_other_than_2(tmp_path: Path) -> None:
    b, weights = _conv_module(ir_version=1)
    _rejects(_bundle(tmp_path, b.build(), weights), r"ir_version")


def test_ir_version_missing(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(path, "lattice.ir_version = 2 : i64, ", "")
    _rejects(path, r"ir_version")


def test_schema_digest_mismatch(tmp_path: Path) -> None:
    b, weights = _conv_module(schema_digest="0" * 64)
    _rejects(_bundle(tmp_path, b.build(), weights), r"schema_digest|digest")


def test_schema_digest_missing(tmp_path: Path) -> None:
    path, graph = _valid(tmp_path)
    digest = re.search(r'lattice\.schema_digest = "[0-9a-f]+", ', graph)
    assert digest is not None
    _rewrite(path, digest.group(0), "")
    _rejects(path, r"schema_digest|digest")


def test_digest_is_also_checked_by_the_plan(tmp_path: Path) -> None:
    native = native_module()
    assert native is not None
    b, _ = _conv_module()
    payload = native.import_plan(b.build())
    payload["schema_digest"] = "f" * 64
    with pytest.raises(PlanError, match=r"does not match this release's schema"):
        RuntimePlan.from_native(payload)


def test_undeclared_weight_file(tmp_path: Path) -> None:
    b, weights = _conv_module(weight_file="model.safetensors")
    _rejects(_bundle(tmp_path, b.build(), weights), r"weight_file|weights\.safetensors")


def test_legacy_zyx_layout(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(path, "conv3d_o_xyz_i", "conv3d_o_zyx_i")
    _rejects(path, r"conv3d_o_zyx_i|layout")


def test_quantized_op_variant(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(path, "lattice.conv3d ", "lattice.quantized_conv3d ")
    _rejects(path, r"quantized_conv3d")


def test_unknown_op(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(path, "lattice.conv3d ", "lattice.conv4d ")
    _rejects(path, r"conv4d")


def test_unknown_attribute(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(path, "{accumulation = ", "{groups = 2 : i64, accumulation = ")
    _rejects(path, r"groups")


def test_arity_mismatch(tmp_path: Path) -> None:
    path, graph = _valid(tmp_path)
    call = re.search(
        r"(lattice\.conv3d %\d+, %\d+), (%\d+)( \{.*?\} : \()(.*?), (!lattice\.weight"
        r"<bias, f16>)\)",
        graph,
    )
    assert call is not None
    _rewrite(
        path,
        call.group(0),
        f"{call.group(1)}, {call.group(2)}, {call.group(2)}{call.group(3)}{call.group(4)}, "
        f"{call.group(5)}, {call.group(5)})",
    )
    _rejects(path, r"operand")


def test_role_mismatch(tmp_path: Path) -> None:
    path, _ = _valid(tmp_path)
    _rewrite(
        path,
        '["sparse_coords", "sparse_features", "sparse_active"]',
        '["sparse_features", "sparse_coords", "sparse_active"]',
    )
    _rejects(path, r"role")


# ---------------------------------------------------------------------------
# Weights against the graph (compile time, naming the storage key).


def test_missing_weight_entry(tmp_path: Path) -> None:
    b, weights = _conv_module()
    del weights["stem.bias"]
    _rejects(_bundle(tmp_path, b.build(), weights), r"no entry 'stem.bias'", WeightContractError)


def test_incomplete_packed_triplet(tmp_path: Path) -> None:
    b, weights = _conv_module(PACK)
    graph = b.build()
    path = _bundle(tmp_path, graph, weights)
    load_lattice_program(path)
    packed = weights.pop("stem")
    weights.update({"stem.weight": packed.weight, "stem.biases": packed.biases})
    path = _bundle(tmp_path, graph, weights)
    _rejects(path, r"packed weight 'stem' is incomplete: missing stem.scales", WeightContractError)


def test_scale_dtype_drift(tmp_path: Path) -> None:
    b, weights = _conv_module(PACK)
    packed = weights.pop("stem")
    weights.update(
        {
            "stem.weight": packed.weight,
            "stem.scales": packed.scales.astype(mx.float32),
            "stem.biases": packed.biases.astype(mx.float32),
        }
    )
    path = _bundle(tmp_path, b.build(), weights)
    _rejects(
        path,
        r"stem.scales is stored as f32 .*scale_dtype = f16 \(scale dtype drift\)",
        WeightContractError,
    )


def test_weight_shape_mismatch(tmp_path: Path) -> None:
    b, weights = _conv_module()
    weights["stem"] = weights["stem"][:, :2]
    _rejects(
        _bundle(tmp_path, b.build(), weights),
        r"weight 'stem' has shape \(8, 2, 3, 3, 32\) but kernel_size is \(3, 3, 3\)",
        WeightContractError,
    )
    b, weights = _conv_module()
    weights["stem.bias"] = weights["stem.bias"][:4]
    _rejects(
        _bundle(tmp_path, b.build(), weights),
        r"bias 'stem.bias' has shape \(4,\) but weight 'stem' has 8 output channels",
        WeightContractError,
    )


def test_weight_dtype_drift(tmp_path: Path) -> None:
    b, weights = _conv_module()
    weights["stem"] = weights["stem"].astype(mx.float32)
    _rejects(
        _bundle(tmp_path, b.build(), weights),
        r"'stem' is stored as f32 but the graph declares !lattice.weight<conv3d, f16>",
        WeightContractError,
    )


def test_artifact_status_reports_weight_errors(tmp_path: Path) -> None:
    b, weights = _conv_module()
    good = load_lattice_artifact(_bundle(tmp_path, b.build(), weights))
    assert lattice_artifact_status(good).valid
    del weights["stem"]
    bad = load_lattice_artifact(_bundle(tmp_path, b.build(), weights))
    status = lattice_artifact_status(bad)
    assert not status.valid and "no entry 'stem'" in status.diagnostics


# ---------------------------------------------------------------------------
# Type errors at compile time, naming the value and the op.


def _features_graph(text_edit: tuple[str, str] | None = None) -> str:
    b = MLIRModuleBuilder()
    xv = b.add_input("x", "tensor<?x8xf32>")
    h = b.cast(input=xv, dtype="f16", rounding="nearest_even")
    b.add_output("y", b.softmax(input=h))
    graph = b.build()
    if text_edit is not None:
        assert text_edit[0] in graph
        graph = graph.replace(*text_edit)
    return graph


def test_mixed_element_types_without_cast(tmp_path: Path) -> None:
    graph = _features_graph()
    cast = re.search(
        r"(%\d+) = lattice\.cast (%arg0) \{.*?\} : \(tensor<\?x8xf32>\) -> "
        r"tensor<\?x8xf16>\n",
        graph,
    )
    assert cast is not None
    # drop the cast: softmax now reads the f32 argument but declares an f16 result
    graph = graph.replace(cast.group(0), "").replace(
        f"lattice.softmax {cast.group(1)} : (tensor<?x8xf16>)",
        "lattice.softmax %arg0 : (tensor<?x8xf32>)",
    )
    path = _bundle(tmp_path, graph, {})
    message = _rejects(path, r"softmax")
    assert re.search(r"f32|f16|element type", message)


@pytest.mark.parametrize(
    "spelling", ["", "{rounding = #lattice.rounding<nearest>} "], ids=["left out", "nearest"]
)
def test_cast_rounding_defaults_to_nearest_even(tmp_path: Path, spelling: str) -> None:
    """The typed-program text's default and spelling: no rounding, or ``nearest``."""
    x = mx.array(np.linspace(-3, 3, 80, dtype=np.float32).reshape(10, 8) / 7.0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    explicit = load_lattice_program(_bundle(tmp_path / "a", _features_graph(), {}))(x=x)
    graph = _features_graph(("{rounding = #lattice.rounding<nearest_even>} ", spelling))
    implied = load_lattice_program(_bundle(tmp_path / "b", graph, {}))(x=x)
    assert np.array_equal(np.asarray(explicit), np.asarray(implied))


def test_unregistered_primitive(tmp_path: Path) -> None:
    b = MLIRModuleBuilder()
    xv = b.add_input("x", "tensor<?x8xf32>")
    b.add_output("y", b.call(inputs=[xv], callee="argmax"))
    graph = b.build().replace('callee = "argmax"', 'callee = "topk"')
    _rejects(_bundle(tmp_path, graph, {}), r"topk")


def test_primitive_without_implementation() -> None:
    native = native_module()
    assert native is not None
    b = MLIRModuleBuilder()
    xv = b.add_input("x", "tensor<?x8xf32>")
    labels = b.call(inputs=[xv], callee="argmax")
    b.add_output("y", b.call(inputs=[xv, labels], callee="gather_rows"))
    plan = RuntimePlan.from_native(native.import_plan(b.build()))
    partial = LoweringRegistry("mlx-without-gather_rows")
    for definition in SCHEMA.ops.values():
        lowering = MLX_LOWERINGS.lowering(definition)
        partial.artifact_lowering(op=definition, weights=lowering.weights)(lowering.function)
    partial.primitive("argmax")(MLX_LOWERINGS.primitives["argmax"])
    with pytest.raises(
        PlanTypeError,
        match=r"value 'v1' of op #1 \(lattice.call -> v1\): "
        r"primitive 'gather_rows' has no implementation in this runtime",
    ):
        compile_plan(plan, partial, MLX_BACKEND, {})
    compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, {})


def _registry_with(op: str, function: Any) -> LoweringRegistry:
    """The MLX lowerings with ``op`` replaced by ``function``."""
    registry = LoweringRegistry("mlx-modified")
    for definition in SCHEMA.ops.values():
        lowering = MLX_LOWERINGS.lowering(definition)
        chosen = function if definition.name == op else lowering.function
        registry.artifact_lowering(op=definition, weights=lowering.weights)(chosen)
    for name, implementation in MLX_LOWERINGS.primitives.items():
        registry.primitive(name)(implementation)
    return registry


def test_lowering_output_types_are_checked() -> None:
    from lattice_contract.runtime import LoweringError, run_program

    native = native_module()
    assert native is not None
    b = MLIRModuleBuilder()
    xv = b.add_input("x", "tensor<?x8xf16>")
    b.add_output("y", b.softmax(input=xv))
    plan = RuntimePlan.from_native(native.import_plan(b.build()))

    def wrong_dtype(input: mx.array, *, axis: int | None = None) -> mx.array:
        return mx.softmax(input.astype(mx.float32), axis=-1)

    def wrong_kind(input: mx.array, *, axis: int | None = None) -> Any:
        return input.tolist()

    x = mx.ones((3, 8), dtype=mx.float16)
    for function, message in [
        (
            wrong_dtype,
            r"output 'y' is declared tensor<\?x8xf16> but the mlx lowering produced "
            r"element type f32",
        ),
        (
            wrong_kind,
            r"output 'y' must be a mlx.core.array, but the mlx lowering produced "
            r"builtins.list",
        ),
    ]:
        compiled = compile_plan(plan, _registry_with("softmax", function), MLX_BACKEND, {})
        with pytest.raises(LoweringError, match=message):
            run_program(compiled, {"arg0": x})
