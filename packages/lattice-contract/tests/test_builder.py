"""MLIRModuleBuilder: generated surface, exact textual output and spellings, native round trips."""

from __future__ import annotations

import inspect
import math
import random
import re
import struct
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST
from lattice_contract.builder import (
    BuilderError,
    MLIRModuleBuilder,
    Value,
    ValueType,
    mlir_f32,
    mlir_string,
    mlir_symbol,
    tensor_type,
)
from lattice_contract.dialect import AttrKind, SchemaEnum

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builder_recipes import (
    ALL_OPS,
    CONV_LAYOUT,
    RECIPES,
    S16,
    S32,
    build_recipe,
    channel_vector,
    conv_weight,
    features_of,
    line_of,
)

# ---------------------------------------------------------------------------
# Generated surface.


def test_recipes_cover_exactly_the_schema():
    assert set(RECIPES) == set(SCHEMA.ops)


@pytest.mark.parametrize("name", ALL_OPS)
def test_one_method_per_op_with_schema_keywords(name):
    op = SCHEMA.ops[name]
    method = getattr(MLIRModuleBuilder, op.python_name)
    params = list(inspect.signature(method).parameters.values())[1:]
    # Unexpected keywords are typed Never (mypy rejects them) and reach emit's diagnostic.
    assert params[-1].kind is inspect.Parameter.VAR_KEYWORD and params[-1].name == "unexpected"
    params = params[:-1]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    schema_names = [o.name for o in op.operands] + [a.name for a in op.attributes]
    assert [p.name for p in params][: len(schema_names)] == schema_names
    extras = [p.name for p in params][len(schema_names) :]
    assert set(extras) <= {"dtype", "shape", "family"}  # builder-side type metadata only
    assert op.summary in (method.__doc__ or "")
    for operand in op.operands:
        param = inspect.signature(method).parameters[operand.name]
        assert (param.default is None) == operand.optional


def test_builder_surface_has_no_ops_outside_the_schema():
    public = {
        n
        for n in dir(MLIRModuleBuilder)
        if not n.startswith("_") and callable(getattr(MLIRModuleBuilder, n))
    }
    abi = {"add_input", "add_sparse_input", "add_output", "build", "emit", "set_location"}
    assert public - abi == {o.python_name for o in SCHEMA.ops.values()}


def test_locations_print_as_mlir_name_locations_and_reach_the_plan():
    b = MLIRModuleBuilder()
    f = b.add_input("f", "tensor<?x4xf32>")
    b.set_location('head."odd" name')
    y = b.softmax(input=f)
    b.set_location(None)
    z = b.softmax(input=y)
    b.add_output("z", z)
    text = b.build()
    assert 'loc("head.\\22odd\\22 name")' in text
    assert [op.location for op in b.operations] == ['head."odd" name', None]
    import lattice_mlir as native  # the native reader is the check: missing fails

    status, payload = native.verify_and_import(text)
    assert status.valid, status.diagnostics
    assert payload is not None
    # native MLIR reads the name location; the payload carries it only where there is one
    assert [op.get("location") for op in payload["ops"]] == ['head."odd" name', None]
    assert "location" not in payload["ops"][1]
    from lattice_contract.plan import RuntimePlan

    plan = RuntimePlan.from_native(payload)
    assert plan.ops[0].describe() == 'lattice.softmax -> v0 at head."odd" name'
    assert plan.ops[1].location is None


def test_set_location_refuses_what_a_plan_would_not_take():
    from lattice_contract.plan import MAX_LOCATION_CHARS

    b = MLIRModuleBuilder()
    with pytest.raises(BuilderError, match="at most 4096"):
        b.set_location("m" * (MAX_LOCATION_CHARS + 1))
    with pytest.raises(BuilderError, match="expected a str or None"):
        b.set_location(3)  # type: ignore[arg-type]
    b.set_location("m" * MAX_LOCATION_CHARS)
    assert b.location == "m" * MAX_LOCATION_CHARS


def test_unknown_method_suggests_the_op():
    with pytest.raises(AttributeError, match="did you mean 'conv3d'"):
        MLIRModuleBuilder().conv3D  # type: ignore[attr-defined]  # noqa: B018  (deliberate typo)


def test_emit_by_any_spelling_and_rejects_unknown_ops():
    b = MLIRModuleBuilder()
    f = b.add_input("f", "tensor<?x4xf32>")
    y = b.emit("lattice.softmax", input=f)
    z = b.emit("softmax", input=y)
    assert isinstance(z, Value) and z.name == "%1"
    with pytest.raises(BuilderError, match="unknown lattice operation 'quantized_conv3d'"):
        b.emit("quantized_conv3d", input=f)


# ---------------------------------------------------------------------------
# Exact text.


@pytest.mark.parametrize("name", ALL_OPS)
def test_each_op_prints_exactly(name):
    text, value, expected = build_recipe(name)
    assert line_of(text, value) == expected


@pytest.mark.parametrize("name", ALL_OPS)
def test_every_required_attribute_is_spelled_and_sorted(name):
    text, value, _ = build_recipe(name)
    line = line_of(text, value)
    op = SCHEMA.ops[name]
    match = re.search(r" \{(.*)\} : ", line)
    body = match.group(1) if match else ""
    while "<" in body:  # drop nested attribute bodies such as #lattice.packing<...>
        body = re.sub(r"<[^<>]*>", "", body)
    keys = re.findall(r"(?:^|, )([a-z_]+) = ", body)
    assert keys == sorted(keys)
    for attr in op.attributes:
        if attr.spec.kind is AttrKind.symbol:
            assert re.search(r"lattice\.\w+ @", line)
        elif attr.spec.required:
            assert attr.name in keys, f"{attr.name} missing from {line}"


def test_whole_module_text():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=16, dtype="f16")
    w = conv_weight(b, "stem.weight", 32, (3, 3, 3), 16, "f16")
    y = b.conv3d(input=x, weight=w, kernel_size=3, stride=2, padding=1)
    b.add_output("y", y)
    header = (
        'module attributes {lattice.input_names = ["x_coords", "x_features", "x_active"], '
        'lattice.input_roles = ["sparse_coords", "sparse_features", "sparse_active"], '
        'lattice.ir_version = 2 : i64, lattice.output_names = ["y"], '
        'lattice.output_roles = ["sparse_tensor"], '
        f'lattice.schema_digest = "{SCHEMA_DIGEST}", '
        'lattice.weight_file = "weights.safetensors"} {'
    )
    expected = "\n".join(
        [
            header,
            "  func.func @forward(%arg0: tensor<?x4xi32>, %arg1: tensor<?x16xf16>, "
            f"%arg2: tensor<1xi32>) -> {S16} {{",
            "    %0 = lattice.sparse.make %arg0, %arg1, %arg2 {coord_order = "
            "#lattice.coord<batch_x_y_z>, stride = array<i64: 1, 1, 1>} : "
            f"(tensor<?x4xi32>, tensor<?x16xf16>, tensor<1xi32>) -> {S16}",
            f"    %1 = lattice.weight @stem.weight {{layout = {CONV_LAYOUT}, "
            'packing = #lattice.packing<dense>, storage_key = "stem.weight"} : '
            "!lattice.weight<conv3d, f16>",
            '    %2 = lattice.conv3d %0, %1 {accumulation = "canonical_f32", '
            "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 3, 3>, "
            "padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : "
            f"({S16}, !lattice.weight<conv3d, f16>) -> {S16}",
            f"    return %2 : {S16}",
            "  }",
            "}",
            "",
        ]
    )
    assert b.build() == expected
    assert b.build() == expected  # build is repeatable


def test_several_outputs_and_dense_inputs():
    b = MLIRModuleBuilder(weight_file="other.safetensors", ir_version=1, schema_digest="00")
    p = b.add_input("points", tensor_type((None, 3), "f32"))
    x = b.add_sparse_input("x", channels=2, dtype="f32", stride=(1, 2, 4))
    pooled = b.global_pool(input=x, mode="sum", batch_size=2)
    b.add_output("pooled", pooled)
    b.add_output("x", x)
    b.add_output("points", p)
    text = b.build()
    assert 'lattice.input_names = ["points", "x_coords", "x_features", "x_active"]' in text
    assert '"tensor", "sparse_coords", "sparse_features", "sparse_active"]' in text
    assert 'lattice.output_names = ["pooled", "x", "points"]' in text
    assert 'lattice.output_roles = ["tensor", "sparse_tensor", "tensor"]' in text
    assert "lattice.ir_version = 1 : i64" in text and 'schema_digest = "00"' in text
    assert 'lattice.weight_file = "other.safetensors"' in text
    assert f"-> (tensor<2x2xf32>, {S32}, tensor<?x3xf32>) {{" in text
    assert f"    return %1, %0, %arg0 : tensor<2x2xf32>, {S32}, tensor<?x3xf32>\n" in text
    assert "stride = array<i64: 1, 2, 4>" in text


def test_defaults_are_filled_but_always_spelled():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    f = features_of(b, x)
    plain = b.activation(input=f, kind="gelu")
    tuned = b.activation(input=f, kind="gelu", approximate="tanh", beta=2, threshold=10.0)
    b.add_output("plain", plain)
    b.add_output("tuned", tuned)
    text = b.build()
    line = line_of(text, plain)
    assert "alpha = 0.00999999977 : f32" in line
    assert "beta = 1.000000e+00 : f32" in line and "threshold = 2.000000e+01 : f32" in line
    assert "approximate = #lattice.gelu_approx<none>" in line
    line = line_of(text, tuned)
    assert "approximate = #lattice.gelu_approx<tanh>" in line
    assert "beta = 2.000000e+00 : f32" in line and "threshold = 1.000000e+01 : f32" in line


def test_weight_symbols_quote_non_identifiers_and_default_to_the_storage_key():
    b = MLIRModuleBuilder()
    w0 = b.weight(storage_key="0.weight", layout="bias_c", dtype="f32", shape=4)
    w1 = b.weight(sym_name="w1", storage_key='odd "key"', layout="bias_c", dtype="f32", shape=4)
    f = b.add_input("f", "tensor<?x4xf32>")
    b.add_output("y", b.layer_norm(input=f, scale=channel_vector(b, 4), bias=w0, eps=0.1))
    text = b.build()
    assert '%0 = lattice.weight @"0.weight" {layout = #lattice.weight_layout<bias_c>, ' in text
    assert "%1 = lattice.weight @w1 {" in text and 'storage_key = "odd \\22key\\22"' in text
    assert w1.type.family == "bias"


# ---------------------------------------------------------------------------
# Spellings.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.000000e+00"),
        (20.0, "2.000000e+01"),
        (0.5, "5.000000e-01"),
        (0.1, "1.000000e-01"),
        (0.01, "0.00999999977"),
        (1e-5, "9.99999974E-6"),
        (-2.5, "-2.500000e+00"),
        (0.0, "0.000000e+00"),
        (-0.0, "-0.000000e+00"),
        (1 / 3, "0.333333343"),
        (123456789.0, "0x4CEB79A3"),
        (float.fromhex("0x1p-149"), "1.401300e-45"),
    ],
)
def test_f32_spelling_matches_mlir(value, text):
    assert mlir_f32(value) == text


def _parse_f32(text: str) -> int:
    if text.startswith("0x"):
        return int(text, 16)
    return struct.unpack("<I", struct.pack("<f", float(text)))[0]


def test_f32_spelling_reads_back_exactly():
    rng = random.Random(7)
    samples = [rng.getrandbits(32) for _ in range(3000)]
    samples += [0x3F800000 + i for i in range(-50, 50)] + [1, 0x7F7FFFFF, 0x00800000]
    for bits in samples:
        value = struct.unpack("<f", struct.pack("<I", bits))[0]
        if not math.isfinite(value):
            continue
        text = mlir_f32(value)
        assert re.fullmatch(r"-?(\d+\.\d+(e[+-]\d\d|E[+-]\d+)?|0x[0-9A-F]+)", text), text
        assert _parse_f32(text) == bits, (bits, text)


def test_f32_spelling_rejects_non_finite():
    for bad in (math.inf, -math.inf, math.nan, 1e39):
        with pytest.raises(ValueError):
            mlir_f32(bad)


def test_string_and_symbol_spelling():
    assert mlir_string('a"b\\c\nd') == '"a\\22b\\\\c\\0Ad"'
    assert mlir_string("é") == '"\\C3\\A9"'
    assert mlir_symbol("stem.weight") == "@stem.weight"
    assert mlir_symbol("_a$b.c9") == "@_a$b.c9"
    assert mlir_symbol("0.weight") == '@"0.weight"'
    assert mlir_symbol("a-b") == '@"a-b"'


# ---------------------------------------------------------------------------
# Native MLIR: every builder module verifies, imports as a plan that matches
# what the builder recorded, and is a fixed point of MLIR's printer.  The
# native module is a hard dependency of these tests (never skipped).


@pytest.fixture(scope="module")
def native():
    import lattice_mlir

    return lattice_mlir


def _lattice_opt(text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lattice-opt")
    return subprocess.run(
        [str(exe), *flags, "-"], input=text, capture_output=True, text=True, timeout=120
    )


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, SchemaEnum):
        return value.value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _structured(vt: ValueType) -> dict[str, object]:
    shape = None if vt.shape is None else list(vt.shape)
    return {"kind": vt.kind, "dtype": vt.dtype, "shape": shape, "family": vt.family}


def _check_plan(b: MLIRModuleBuilder, plan: dict) -> None:
    """The native payload shows exactly the builder's ABI, ops, attributes and types."""
    assert plan["ir_version"] == 2 and plan["schema_digest"] == SCHEMA_DIGEST
    assert plan["weight_file"] == "weights.safetensors" and plan["name"] == "forward"
    labels: dict[str, str] = {}
    assert len(plan["args"]) == len(b.arguments)
    for index, ((abi, role, value), arg) in enumerate(zip(b.arguments, plan["args"], strict=True)):
        labels[value.name] = f"arg{index}"
        assert arg == {
            "name": f"arg{index}",
            "abi_name": abi,
            "type": value.type_text,
            "role": role,
        }
    counter = 0
    assert [o["name"] for o in plan["ops"]] == [built.op.mlir_name for built in b.operations]
    for built, op in zip(b.operations, plan["ops"], strict=True):
        for result in built.results:
            labels[result.name] = f"v{counter}"
            counter += 1
        assert op["operands"] == [labels[v.name] for v in built.operands]
        assert op["results"] == [labels[v.name] for v in built.results]
        assert op["operand_types"] == [v.type_text for v in built.operands]
        assert op["result_types"] == [v.type_text for v in built.results]
        assert op["attrs"] == {k: _plain(v) for k, v in built.attrs.items()}
        for value in (*built.operands, *built.results):
            assert plan["types"][value.type_text] == _structured(value.type)
    assert plan["returns"] == [labels[v.name] for _, v in b.outputs]
    roles = ["sparse_tensor" if v.kind == "sparse" else "tensor" for _, v in b.outputs]
    assert plan["outputs"] == [
        {"name": labels[v.name], "abi_name": name, "type": v.type_text, "role": role}
        for (name, v), role in zip(b.outputs, roles, strict=True)
    ]


def _recipe_builder(op: str) -> MLIRModuleBuilder:
    b = MLIRModuleBuilder()
    _, _, outputs = RECIPES[op](b)
    for index, out in enumerate(outputs):
        b.add_output(f"out{index}", out)
    return b


@pytest.mark.parametrize("name", ALL_OPS)
def test_every_op_verifies_natively_and_imports_as_a_plan(native, name):
    b = _recipe_builder(name)
    text = b.build()
    status = native.verify(text)
    assert status.valid, status.diagnostics
    plan = native.import_plan(text)
    assert SCHEMA.ops[name].mlir_name in [o["name"] for o in plan["ops"]]
    _check_plan(b, plan)


@pytest.mark.parametrize("name", ALL_OPS)
def test_builder_text_is_a_fixed_point_of_native_printing(name):
    text = _recipe_builder(name).build()
    done = _lattice_opt(text, "--lattice-verify-artifact")
    assert done.returncode == 0, done.stderr
    assert done.stdout == text + "\n"  # lattice-opt ends the module with one more newline


def test_f32_spelling_is_a_fixed_point_of_native_printing(native):
    rng = random.Random(11)
    b = MLIRModuleBuilder()
    f = b.add_input("f", "tensor<?x4xf32>")
    specials = [0.01, 1e-5, 1 / 3, 123456789.0, 1e-40, -0.0, 3.4e38, 2.0**-149, 65504.0]
    values = specials + [
        struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0] for _ in range(400)
    ]
    values = [v for v in values if math.isfinite(v)]
    for value in values:
        f = b.activation(input=f, kind="leaky_relu", alpha=value)
    b.add_output("y", f)
    text = b.build()
    done = _lattice_opt(text)
    assert done.returncode == 0, done.stderr
    assert done.stdout == text + "\n"  # lattice-opt ends the module with one more newline
    plan = native.import_plan(text)
    alphas = [op["attrs"]["alpha"] for op in plan["ops"]]
    assert [struct.pack("<f", a) for a in alphas] == [struct.pack("<f", v) for v in values]


def test_symbols_and_strings_round_trip_natively(native):
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    keys = ["0.weight", "stem.weight", 'we"ird\\key', "naïve", "a-b c"]
    for key in keys:
        w = conv_weight(b, key, 4, (1, 1, 1), 4)
        x = b.subm_conv3d(input=x, weight=w, kernel_size=1)
    b.add_output("y", x)
    text = b.build()
    done = _lattice_opt(text, "--lattice-verify-artifact")
    assert done.returncode == 0, done.stderr
    assert done.stdout == text + "\n"  # lattice-opt ends the module with one more newline
    plan = native.import_plan(text)
    weights = [op for op in plan["ops"] if op["name"] == "lattice.weight"]
    assert [w["attrs"]["storage_key"] for w in weights] == keys
    assert [w["attrs"]["sym_name"] for w in weights] == keys


def test_a_network_imports_as_one_plan(native):
    """A small encoder-decoder exercising strides end to end, checked op by op."""
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f16")
    stem = b.subm_conv3d(
        input=x, weight=conv_weight(b, "stem", 8, (3, 3, 3), 4, "f16"), kernel_size=3
    )
    down = b.conv3d(
        input=stem, weight=conv_weight(b, "down", 16, (2, 2, 2), 8, "f16"), kernel_size=2, stride=2
    )
    _, feats, _ = b.sparse_decompose(input=down)
    feats = b.activation(input=feats, kind="relu")
    down = b.sparse_with_features(input=down, features=feats)
    up = b.target_conv_transpose3d(
        input=down,
        target=stem,
        weight=conv_weight(b, "up", 8, (2, 2, 2), 16, "f16"),
        kernel_size=2,
        stride=2,
    )
    merged = b.sparse_cat(lhs=stem, rhs=up, join="left")
    pooled = b.global_pool(input=merged, mode="max", batch_size=2)
    b.add_output("features", merged)
    b.add_output("pooled", pooled)
    text = b.build()
    _check_plan(b, native.import_plan(text))
    assert _lattice_opt(text, "--lattice-verify-artifact").stdout == text + "\n"


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"schema_digest": "0" * 64}, "digest"),
        ({"ir_version": 1}, "ir_version"),
        ({"weight_file": "model.bin"}, "weight_file"),
    ],
)
def test_overridden_module_attributes_are_rejected_natively(native, override, fragment):
    b = MLIRModuleBuilder(**override)
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    b.add_output("y", x)
    text = b.build()
    status = native.verify(text)
    assert not status.valid and fragment in status.diagnostics
    with pytest.raises(ValueError, match=fragment):
        native.import_plan(text)
    assert _lattice_opt(text, "--lattice-verify-artifact").returncode != 0


def test_repeated_result_names_are_uniqued_like_mlir(native):
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    names = []
    for _ in range(3):
        coords, features, active = b.sparse_decompose(input=x)
        names.append((coords.name, features.name, active.name))
        x = b.sparse_with_features(input=x, features=b.softmax(input=features))
    assert names == [
        ("%coords", "%features", "%active"),
        ("%coords_0", "%features_1", "%active_2"),
        ("%coords_3", "%features_4", "%active_5"),
    ]
    b.add_output("y", x)
    text = b.build()
    assert _lattice_opt(text, "--lattice-verify-artifact").stdout == text + "\n"
    _check_plan(b, native.import_plan(text))


def test_builder_values_carry_the_plans_one_type_model() -> None:
    """A builder value's type is the plan's ValueType; without its facts it is the import's."""
    from dataclasses import replace

    from lattice_contract.plan import NO_FACTS, RuntimePlan, require_native
    from lattice_contract.plan import ValueType as PlanValueType

    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(8, 3, 3, 3, 4))
    y = b.emit("subm_conv3d", input=x, weight=w, kernel_size=3)
    assert isinstance(y, Value)  # one result
    coords, feats, _ = b.sparse_decompose(input=y)
    b.add_output("f", feats)
    plan = RuntimePlan.from_native(require_native().import_plan(b.build()))
    for value in (x, w, y, coords, feats):
        assert type(value.type) is PlanValueType
        assert replace(value.type, facts=NO_FACTS) == plan.types[value.type_text]
    assert y.type.stride == (2, 2, 2) and y.type.channels == 8 and feats.type.shape == (-1, 8)
    assert w.type.layout is not None and w.type.layout.value == "conv3d_o_xyz_i"
    assert w.type.weight_shape == (8, 3, 3, 3, 4) and w.type.packing is None
