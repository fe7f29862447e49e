"""lattice_mlir.verify / import_plan: the in-process API and the plan payload."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

import lattice_mlir
import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST

PLAN_KEYS = {
    "ir_version",
    "schema_digest",
    "weight_file",
    "name",
    "args",
    "ops",
    "returns",
    "outputs",
    "types",
}


def test_multi_op_plan_payload_shape(valid_modules: dict[str, str]) -> None:
    plan = lattice_mlir.import_plan(valid_modules["unet_block"])
    assert set(plan) == PLAN_KEYS
    assert plan["ir_version"] == 2 and plan["schema_digest"] == SCHEMA_DIGEST
    assert plan["weight_file"] == "weights.safetensors" and plan["name"] == "forward"

    assert plan["args"] == [
        {
            "name": "arg0",
            "abi_name": "x_coords",
            "type": "tensor<?x4xi32>",
            "role": "sparse_coords",
        },
        {
            "name": "arg1",
            "abi_name": "x_features",
            "type": "tensor<?x4xf32>",
            "role": "sparse_features",
        },
        {"name": "arg2", "abi_name": "x_active", "type": "tensor<1xi32>", "role": "sparse_active"},
    ]

    defined = {a["name"] for a in plan["args"]}
    counter = 0
    for op in plan["ops"]:
        assert set(op) == {"name", "operands", "results", "attrs", "operand_types", "result_types"}
        definition = SCHEMA.op(op["name"])
        assert all(label in defined for label in op["operands"]), op
        assert op["results"] == [f"v{counter + i}" for i in range(len(op["results"]))]
        counter += len(op["results"])
        defined.update(op["results"])
        assert len(op["operand_types"]) == len(op["operands"])
        assert len(op["result_types"]) == len(op["results"]) == len(definition.results)
        assert set(op["attrs"]) <= {a.name for a in definition.attributes}
        for t in op["operand_types"] + op["result_types"]:
            assert t in plan["types"]

    by_name: dict[str, dict[str, Any]] = {}
    for op in plan["ops"]:
        by_name.setdefault(op["name"], op)  # the first op of each kind
    conv = by_name["lattice.conv3d"]["attrs"]
    assert conv == {
        "accumulation": "canonical_f32",
        "dilation": [1, 1, 1],
        "kernel_size": [2, 2, 2],
        "padding": [0, 0, 0],
        "stride": [2, 2, 2],
    }
    assert by_name["lattice.sparse.cat"]["attrs"] == {"join": "inner"}
    assert by_name["lattice.activation"]["attrs"]["kind"] == "relu"
    assert isinstance(by_name["lattice.activation"]["attrs"]["alpha"], float)
    weight = by_name["lattice.weight"]["attrs"]
    assert weight == {
        "layout": "conv3d_o_xyz_i",
        "storage_key": "enc0.weight",
        "sym_name": "enc0.weight",
    }

    assert plan["returns"] == [plan["outputs"][0]["name"], plan["outputs"][1]["name"]]
    assert [(o["abi_name"], o["role"]) for o in plan["outputs"]] == [
        ("y", "sparse_tensor"),
        ("logits", "tensor"),
    ]
    sparse = (
        "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>"
    )
    assert plan["types"][sparse] == {
        "kind": "sparse",
        "dtype": "f32",
        "shape": None,
        "family": None,
    }
    assert plan["types"]["!lattice.weight<conv3d, f32>"] == {
        "kind": "weight",
        "dtype": "f32",
        "shape": None,
        "family": "conv3d",
    }
    assert plan["types"]["tensor<?x4xi32>"] == {
        "kind": "tensor",
        "dtype": "i32",
        "shape": [-1, 4],
        "family": None,
    }


def test_every_schema_op_in_the_valid_corpus_imports(valid_modules: dict[str, str]) -> None:
    seen: set[str] = set()
    for name, text in valid_modules.items():
        status = lattice_mlir.verify(text)
        assert status.valid, (name, status.diagnostics)
        plan = lattice_mlir.import_plan(text)
        seen.update(op["name"] for op in plan["ops"])
    assert seen == {op.mlir_name for op in SCHEMA.ops.values()}


def test_builder_programs_import(valid_modules: dict[str, str]) -> None:
    """The corpus programs, rebuilt by the builder now, still verify and import."""
    path = Path(__file__).resolve().parent.parent / "test" / "regenerate_valid.py"
    spec = importlib.util.spec_from_file_location("lattice_regenerate_valid", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from lattice_contract.builder import MLIRModuleBuilder

    for name, (build, _) in module.PROGRAMS.items():
        b = MLIRModuleBuilder()
        for out_name, value in build(b):
            b.add_output(out_name, value)
        text = b.build()
        plan = lattice_mlir.import_plan(text)
        assert [op["name"] for op in plan["ops"]] == [op.op.mlir_name for op in b.operations]
        assert lattice_mlir.import_plan(valid_modules[name]) == plan, name


def test_invalid_module_raises_with_diagnostics(valid_modules: dict[str, str]) -> None:
    text = valid_modules["conv3d"].replace('"canonical_f32"', '"fast"')
    with pytest.raises(lattice_mlir.LatticeMLIRError) as info:
        lattice_mlir.import_plan(text)
    assert isinstance(info.value, ValueError)
    assert "graph.mlir:" in info.value.diagnostics
    assert "'accumulation' = \"fast\" is not allowed" in str(info.value)
    status = lattice_mlir.verify(text)
    assert not status and not status.valid and status.diagnostics == info.value.diagnostics


def test_verify_and_import_gives_both_from_one_call(valid_modules: dict[str, str]) -> None:
    text = valid_modules["unet_block"]
    status, plan = lattice_mlir.verify_and_import(text)
    assert status.valid and plan == lattice_mlir.import_plan(text)
    assert status == lattice_mlir.verify(text)
    bad = text.replace('"canonical_f32"', '"fast"')
    status, plan = lattice_mlir.verify_and_import(bad)
    assert plan is None and not status.valid
    assert status == lattice_mlir.verify(bad)
    with pytest.raises(TypeError, match="must be given as str"):
        lattice_mlir.verify_and_import(b"module {}")  # type: ignore[arg-type]


def test_a_payload_shares_one_str_per_distinct_string(valid_modules: dict[str, str]) -> None:
    """Repeated strings (type texts, labels, field names) arrive as one object each."""
    plan = lattice_mlir.import_plan(valid_modules["unet_block"])
    by_text = {text: text for text in plan["types"]}
    seen = 0
    for op in plan["ops"]:
        for text in op["operand_types"] + op["result_types"]:
            assert text is by_text[text]
            seen += 1
    assert seen > len(by_text)  # the texts do repeat
    names = [key for op in plan["ops"] for key in op if key == "name"]
    assert all(key is names[0] for key in names)


# How a graph may write an op's location, and the name the payload carries (None: no key).
LOCATIONS = [
    ('loc("conv_input.0")', "conv_input.0"),
    ('loc("head.\\22odd\\22 name")', 'head."odd" name'),
    ('loc("outer"("inner"))', "outer"),
    ('loc(fused["fused.name", "graph.py":3:4])', "fused.name"),
    ('loc(fused["graph.py":3:4, "second"("third")])', "second"),
    ('loc(callsite("callee" at "caller"))', "callee"),
    ('loc(callsite("graph.py":1:2 at "caller"))', "caller"),
    ('loc("graph.py":3:4)', None),
    ("loc(unknown)", None),
    ('loc("")', None),
    ("", None),
]


def test_op_locations_reach_the_payload() -> None:
    """Native MLIR reads each op's name location (directly, fused or in a call site)."""
    from lattice_contract.builder import MLIRModuleBuilder

    b = MLIRModuleBuilder()
    value = b.add_input("f", "tensor<?x4xf32>")
    for i in range(len(LOCATIONS)):
        b.set_location(f"L{i}")
        value = b.softmax(input=value)
    b.add_output("z", value)
    text = b.build()
    for i, (written, _) in enumerate(LOCATIONS):
        assert f'loc("L{i}")' in text
        text = text.replace(f' loc("L{i}")', f" {written}".rstrip())
    plan = lattice_mlir.import_plan(text)
    assert [op.get("location") for op in plan["ops"]] == [name for _, name in LOCATIONS]
    for op in plan["ops"]:  # the other fields keep their order; the location comes last
        fields = ["name", "operands", "results", "attrs", "operand_types", "result_types"]
        assert list(op) == fields + (["location"] if "location" in op else [])
    # locations change nothing else: the same program written without them imports the same
    bare = MLIRModuleBuilder()
    value = bare.add_input("f", "tensor<?x4xf32>")
    for _ in LOCATIONS:
        value = bare.softmax(input=value)
    bare.add_output("z", value)
    for op in plan["ops"]:
        op.pop("location", None)
    assert plan == lattice_mlir.import_plan(bare.build())


def test_a_location_that_is_not_utf8_arrives_escaped() -> None:
    """An escape can make any byte; the location is a diagnostic, so it arrives escaped."""
    from lattice_contract.builder import MLIRModuleBuilder

    b = MLIRModuleBuilder()
    b.set_location("here")
    b.add_output("z", b.softmax(input=b.add_input("f", "tensor<?x4xf32>")))
    text = b.build().replace('loc("here")', 'loc("bad\\FFbyte")')
    plan = lattice_mlir.import_plan(text)
    assert plan["ops"][0]["location"] == "bad\\xffbyte"


def test_diagnostics_are_captured_not_printed(capfd: pytest.CaptureFixture[str]) -> None:
    status = lattice_mlir.verify("module { func.func @forward( }")
    out, err = capfd.readouterr()
    assert not status.valid and "error:" in status.diagnostics
    assert out == "" and err == ""


@pytest.mark.parametrize("bad", [b"module {}", None, 3])
def test_non_text_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="must be given as str"):
        lattice_mlir.verify(bad)
    with pytest.raises(TypeError, match="must be given as str"):
        lattice_mlir.import_plan(bad)


def test_empty_and_garbage_text_get_diagnostics() -> None:
    for text in ["", "\x00", "module", "}}}}", "lattice.conv3d", "\ud7ff" * 3]:
        status = lattice_mlir.verify(text)
        assert not status.valid and status.diagnostics.strip(), repr(text)


def test_concurrent_calls_release_the_gil(valid_modules: dict[str, str]) -> None:
    texts = list(valid_modules.values())
    expected = [lattice_mlir.import_plan(t) for t in texts]
    errors: list[str] = []

    def work() -> None:
        for _ in range(3):
            for text, want in zip(texts, expected, strict=True):
                if lattice_mlir.import_plan(text) != want:
                    errors.append("plan differs under concurrency")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_lattice_opt_is_bundled_and_exposed(lattice_opt: Path) -> None:
    exe = lattice_mlir.lattice_opt_path()
    assert exe.name == "lattice-opt" and exe.is_file()
    import subprocess

    run = subprocess.run([str(lattice_opt), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "--lattice-verify-artifact" in run.stdout
