"""The rule layer: every rule declared once, documented, and shown failing with its ID.

Rules live in :mod:`lattice_contract.dialect.rules`; ops declare theirs in the
schema.  These tests hold the declarations to their promises: each rule has
its line in ``docs/dialect.md``, each rule the native verifier evaluates has
an invalid lit file named after it whose expected diagnostic carries the
rule's tag, each builder-only rule is raised by the builder with its tag,
and the C++ sources reference every hand-written rule through the generated
table (never a message of their own).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST
from lattice_contract.builder import BuilderError, MLIRModuleBuilder, Value
from lattice_contract.codegen.tablegen import render_all
from lattice_contract.dialect import (
    DIALECT_RULES,
    INT32_MAX,
    RULES,
    ChannelRule,
    RuleCheck,
    RuleKind,
    WeightFamily,
    canonical_json,
    geometry_int32_problem,
    rule_tag,
)

REPO = Path(__file__).resolve().parents[3]
INVALID = REPO / "packages" / "lattice-mlir" / "test" / "invalid"
NATIVE_LIB = REPO / "packages" / "lattice-mlir" / "lib"
DOCS = REPO / "docs" / "dialect.md"

WHERE = {
    RuleKind.generic: "every op (schema tables)",
    RuleKind.generated: "generated C++",
    RuleKind.native: "hand-written C++",
    RuleKind.builder: "builder only",
}
RULE_FILE = re.compile(r"(?P<rule>[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)(--[a-z0-9_]+)?\.mlir\Z")


def test_every_rule_has_its_line_in_the_dialect_docs():
    lines = set(DOCS.read_text(encoding="utf-8").splitlines())
    missing = [
        r.id
        for r in RULES.values()
        if f"| `{r.id}` | {WHERE[r.kind]} | {r.statement} |" not in lines
    ]
    assert not missing, f"docs/dialect.md lacks the rule index line of {missing}"
    index = DOCS.read_text(encoding="utf-8").split("## Rule index", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z0-9_.]+)` \| ", index, re.M)
    assert sorted(documented) == sorted(RULES), "the rule index lists exactly the declared rules"


def _rule_files() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted(INVALID.glob("*.mlir")):
        match = RULE_FILE.match(path.name)
        if match:
            found.setdefault(match["rule"], []).append(path)
    return found


def test_every_verified_rule_has_an_invalid_lit_file_that_fails_with_its_id():
    files = _rule_files()
    verified = [r.id for r in RULES.values() if r.verified]
    assert not [i for i in verified if not (INVALID / f"{i}.mlir").exists()], (
        "verified rules without test/invalid/<rule-id>.mlir: "
        + ", ".join(i for i in verified if not (INVALID / f"{i}.mlir").exists())
    )
    unknown = sorted(set(files) - set(RULES))
    assert not unknown, f"invalid files named after no declared rule: {unknown}"
    for rule_id, paths in files.items():
        assert RULES[rule_id].verified, f"{rule_id} is builder-only but has a lit file"
        for path in paths:
            text = path.read_text(encoding="utf-8")
            # A file whose RUN line generates the module checks what its generator writes.
            for script in re.findall(r"%S/\.\./([A-Za-z0-9_]+\.py)", text):
                text += (INVALID.parent / script).read_text(encoding="utf-8")
            # The expected diagnostic (verify-diagnostics or FileCheck) names the rule.
            checks = [
                line
                for line in text.splitlines()
                if "expected-error" in line or "CHECK" in line.split("RUN:")[0]
            ]
            assert any(rule_tag(rule_id).strip() in line for line in checks), (
                f"{path.name}: no CHECK/expected-error line carries [rule {rule_id}]"
            )


def test_every_native_rule_is_emitted_through_the_generated_table():
    sources = "\n".join(p.read_text(encoding="utf-8") for p in NATIVE_LIB.glob("*.cpp"))
    sources += render_all()["LatticeSchema.cpp.inc"]  # the generated type verifiers
    for r in RULES.values():
        if r.kind in (RuleKind.native, RuleKind.generic):
            assert f"RuleId::{r.cpp_name}" in sources, f"no C++ diagnostic tags {r.id}"
    generated = render_all()["LatticeSchema.cpp.inc"]
    for r in RULES.values():
        assert f'{{"{r.id}", ' in generated, f"{r.id} missing from the generated rule table"
    for op in SCHEMA.ops.values():
        for use in op.rules:
            if use.rule.kind is RuleKind.generated:
                assert f"RuleId::{use.rule.cpp_name}, RuleCheck::" in generated


def test_op_rule_declarations_are_well_formed():
    used = {u.rule.id for op in SCHEMA.ops.values() for u in op.rules}
    orphans = sorted(set(RULES) - used - {r.id for r in DIALECT_RULES})
    assert not orphans, f"rules no op declares: {orphans}"
    assert not [u for op in SCHEMA.ops.values() for u in op.rules if u.rule in DIALECT_RULES]
    names_of = {
        op.name: {o.name for o in op.operands} | {r.name for r in op.results}
        for op in SCHEMA.ops.values()
    }
    for op in SCHEMA.ops.values():
        attrs = {a.name for a in op.attributes}
        for use in op.rules:
            check = use.rule.check
            if check is RuleCheck.absent_attrs:
                assert use.params and not set(use.params) & attrs, (op.name, use)
            elif check in (RuleCheck.stride_divides, RuleCheck.dense_weight):
                assert len(use.params) == 1 and use.params[0] in names_of[op.name], (op.name, use)
            elif check in (RuleCheck.stride_target, RuleCheck.stride_same, RuleCheck.shape_same):
                assert len(use.params) == 2 and set(use.params) <= names_of[op.name], (op.name, use)
            else:
                assert not use.params, (op.name, use)


def test_rule_declarations_stay_out_of_the_digest():
    text = canonical_json()
    for r in RULES.values():
        assert r.statement not in text and r.fix not in text
    canonical = json.loads(text)
    assert all(
        set(op) == {"summary", "operands", "results", "attributes", "traits", "stride"}
        for op in canonical["ops"].values()
    )
    assert SCHEMA_DIGEST == "a6fd14944438073e8b6d573957f046094a20e9bf002e61aacbf8aef56838da2e"


def test_weight_families_carry_layout_rank_and_packability():
    assert {f: (f.layout.value, f.rank, f.packable) for f in WeightFamily} == {
        WeightFamily.conv3d: ("conv3d_o_xyz_i", 5, True),
        WeightFamily.linear: ("linear_o_i", 2, True),
        WeightFamily.bias: ("bias_c", 1, False),
        WeightFamily.channel: ("channel_c", 1, False),
        WeightFamily.embedding: ("embedding_n_c", 2, False),
    }
    # The layout's name spells its family and axes; the generated C++ reads the same table.
    for f in WeightFamily:
        assert f.layout.value == f"{f.value}_" + "_".join(
            {"oxyzi": ["o", "xyz", "i"]}.get(f.axes, list(f.axes))
        )
    generated = render_all()["LatticeSchema.cpp.inc"]
    assert "family == WeightFamily::conv3d || family == WeightFamily::linear" in generated


def test_every_sparse_or_feature_result_declares_its_channel_inference():
    for op in SCHEMA.ops.values():
        kinds = {r.type.kind.value for r in op.results}
        if op.name in ("weight", "call"):
            assert op.channels is ChannelRule.none
        elif kinds & {"sparse", "features"}:
            assert op.channels is not ChannelRule.none, op.name


# ---------------------------------------------------------------------------
# Builder-only rules: the builder raises each with its tag.


def _sparse(b: MLIRModuleBuilder, channels: int = 4) -> Value:
    return b.add_sparse_input(f"x{len(b.arguments)}", channels=channels, dtype="f32")


def _conv_w(b: MLIRModuleBuilder, key: str, shape: tuple[int, ...]) -> Value:
    return b.weight(storage_key=key, layout="conv3d_o_xyz_i", dtype="f32", shape=shape)


def _kernel_extent(b: MLIRModuleBuilder) -> object:
    return b.conv3d(input=_sparse(b), weight=_conv_w(b, "w", (8, 3, 3, 3, 4)), kernel_size=2)


def _in_channels(b: MLIRModuleBuilder) -> object:
    return b.conv3d(input=_sparse(b, 5), weight=_conv_w(b, "w", (8, 3, 3, 3, 4)), kernel_size=3)


def _channel_shape(b: MLIRModuleBuilder) -> object:
    bias = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(7,))
    w = _conv_w(b, "w", (8, 3, 3, 3, 4))
    return b.conv3d(input=_sparse(b), weight=w, bias=bias, kernel_size=3)


def _weight_shape(b: MLIRModuleBuilder) -> object:
    return b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(8, 3, 3))


def _scale_dtype(b: MLIRModuleBuilder) -> object:
    packing = {"bits": "int4", "group_size": 32, "scale_dtype": "bf16"}
    return b.weight(
        storage_key="w", layout="linear_o_i", shape=(8, 32), packing=packing, dtype=None
    )


def _unique(b: MLIRModuleBuilder) -> object:
    _conv_w(b, "w", (8, 3, 3, 3, 4))
    return _conv_w(b, "w", (8, 3, 3, 3, 4))


def _binary_channels(b: MLIRModuleBuilder) -> object:
    return b.sparse_binary(lhs=_sparse(b, 4), rhs=_sparse(b, 5), op="add", join="inner")


BUILDER_CASES: dict[str, Callable[[MLIRModuleBuilder], object]] = {
    "weight.kernel_extent": _kernel_extent,
    "weight.in_channels": _in_channels,
    "weight.channel_shape": _channel_shape,
    "weight.shape": _weight_shape,
    "weight.scale_dtype": _scale_dtype,
    "weight.unique": _unique,
    "binary.channels": _binary_channels,
}


def test_every_builder_only_rule_has_a_case():
    assert sorted(BUILDER_CASES) == sorted(
        r.id for r in RULES.values() if r.kind is RuleKind.builder
    )


@pytest.mark.parametrize("rule_id", sorted(BUILDER_CASES))
def test_builder_rules_raise_with_their_id_and_fix(rule_id):
    b = MLIRModuleBuilder()
    with pytest.raises(BuilderError) as info:
        BUILDER_CASES[rule_id](b)
    message = str(info.value)
    assert message.endswith(RULES[rule_id].fix + rule_tag(rule_id)), message


# ---------------------------------------------------------------------------
# geometry.int32 (attributes whose coordinate products overflow int32).

BIG = 2**30


@pytest.mark.parametrize(
    ("op", "attrs", "stride", "what"),
    [
        # (K - 1) * d: a K3 conv dilated by 2^30 reaches 2^31.
        ("conv3d", {"kernel_size": 3, "dilation": (BIG, 1, 1)}, 1, "(kernel_size - 1) x dilation"),
        # padding on top of the reach
        ("pool3d", {"kernel_size": 2, "dilation": 1, "padding": (INT32_MAX, 0, 0)}, 1, "+ padding"),
        # s * K: a transposed cell larger than int32
        ("conv_transpose3d", {"kernel_size": 4, "stride": (BIG, 1, 1)}, BIG, "stride x kernel"),
        # the output stride t * s along the chain
        ("conv3d", {"kernel_size": 1, "stride": 4}, BIG, "output stride"),
        # the physical reach of a tap at the input stride
        ("subm_conv3d", {"kernel_size": 3, "dilation": 2}, BIG, "physical tap reach"),
    ],
)
def test_builder_refuses_geometry_that_leaves_int32(op, attrs, stride, what):
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=stride)
    kernel = attrs["kernel_size"]
    args = dict(attrs)
    if op != "pool3d":
        args["weight"] = _conv_w(b, "w", (4, kernel, kernel, kernel, 4))
    else:
        args["mode"] = "max"
    with pytest.raises(BuilderError) as info:
        b.emit(op, input=x, **args)
    message = str(info.value)
    assert what in message and "exceeds 2147483647" in message, message
    assert message.endswith(rule_tag("geometry.int32")), message


def test_geometry_bound_is_exact_at_the_int32_limit():
    """The largest reach that fits passes; one more is refused (exact integers)."""
    fits = dict(kernel_size=(2, 1, 1), stride=None, dilation=(1, 1, 1), input_stride=None)
    assert geometry_int32_problem(padding=(INT32_MAX - 1, 0, 0), step="input", **fits) is None
    problem = geometry_int32_problem(padding=(INT32_MAX, 0, 0), step="input", **fits)
    assert problem == (
        "(kernel_size - 1) x dilation + padding = 2147483648 on axis x exceeds 2147483647"
    )
    # A chain: a stride-2^30 input, conv stride 2 -> output stride 2^31.
    chain = geometry_int32_problem(
        kernel_size=(1, 1, 1),
        stride=(1, 1, 2),
        padding=(0, 0, 0),
        dilation=(1, 1, 1),
        input_stride=(BIG, BIG, BIG),
        step="multiply",
    )
    assert (
        chain == "output stride (input stride x stride) = 2147483648 on axis z exceeds 2147483647"
    )


def test_builder_accepts_geometry_just_inside_int32():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=BIG)
    y = b.conv3d(input=x, weight=_conv_w(b, "w", (4, 1, 1, 1, 4)), kernel_size=1, stride=1)
    assert y.type.stride == (BIG, BIG, BIG)


def test_each_op_section_of_the_docs_lists_its_rules():
    text = DOCS.read_text(encoding="utf-8")
    for op in SCHEMA.ops.values():
        section = text.split(f"### `{op.mlir_name}`\n", 1)[1].split("\n### ", 1)[0]
        ids = ", ".join(f"`{u.rule.id}`" for u in op.rules) or "none"
        assert f"see the rule index): {ids}.\n" in section, op.name


# The same bound in two languages: the builder (Python) and the native verifier
# (C++) must accept and refuse the same attributes, at the int32 edge.
EDGE = [
    # (op, input stride, kernel, stride, padding, dilation)
    ("conv3d", 1, 3, 1, 0, 2**30 - 1),  # (K-1)*d = 2^31 - 2: fits
    ("conv3d", 1, 3, 1, 1, 2**30 - 1),  # 2^31 - 1: fits exactly
    ("conv3d", 1, 3, 1, 2, 2**30 - 1),  # 2^31: refused
    ("conv3d", 2**15, 1, 2**16, 0, 1),  # output stride 2^31: refused
    ("conv3d", 2**15, 1, 2**16 - 1, 0, 1),  # fits
    ("conv_transpose3d", 2**20, 2**11, 2**20, 0, 1),  # s*K = 2^31: refused
    ("conv_transpose3d", 2**20, 2**11 - 1, 2**20, 0, 1),  # fits (fine stride 1)
    ("subm_conv3d", 2**29, 5, None, None, 1),  # physical reach 4 * 2^29 = 2^31: refused
    ("subm_conv3d", 2**29, 4, None, None, 1),  # 3 * 2^29: fits
    ("pool3d", 1, 1, 1, 2**31 - 1, 1),  # padding alone at the limit: fits
]


@pytest.mark.parametrize(("op", "t", "k", "s", "p", "d"), EDGE)
def test_builder_and_native_verifier_agree_on_the_int32_geometry_bound(op, t, k, s, p, d):
    import lattice_mlir

    attrs: dict[str, object] = {"kernel_size": k, "dilation": d}
    if s is not None:
        attrs.update(stride=s, padding=p)
    problem = geometry_int32_problem(
        kernel_size=(k, k, k),
        stride=None if s is None else (s, s, s),
        padding=None if p is None else (p, p, p),
        dilation=(d, d, d),
        input_stride=(t, t, t),
        step={"conv3d": "multiply", "pool3d": "multiply", "conv_transpose3d": "divide"}.get(
            op, "input"
        ),
    )
    # The native side: the module built with harmless attributes, then given these ones.
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=t)
    safe = {key: 1 for key in attrs} | ({"padding": 0} if "padding" in attrs else {})
    args: dict[str, object] = {"input": x, **safe}
    if op == "pool3d":
        args["mode"] = "max"
    else:
        args["weight"] = _conv_w(b, "w", (4, 1, 1, 1, 4))
    y = b.emit(op, **args)
    assert isinstance(y, Value)  # every op checked here has one result
    b.add_output("y", y)
    lines = b.build().splitlines()
    row = next(i for i, line in enumerate(lines) if f"lattice.{op} " in line)
    for key, value in attrs.items():  # only the op under test, not sparse.make's stride
        lines[row] = re.sub(
            rf"{key} = array<i64: [0-9, ]+>",
            f"{key} = array<i64: {value}, {value}, {value}>",
            lines[row],
        )
    text = "\n".join(lines) + "\n"
    status = lattice_mlir.verify(text)
    tagged = rule_tag("geometry.int32").strip() in status.diagnostics
    assert tagged == (problem is not None), (problem, status.diagnostics)
    # And the builder refuses exactly then (it checks weight shapes first: match them).
    b2 = MLIRModuleBuilder()
    x2 = b2.add_sparse_input("x", channels=4, dtype="f32", stride=t)
    args2: dict[str, object] = {"input": x2, **attrs}
    if op == "pool3d":
        args2["mode"] = "max"
    else:
        args2["weight"] = _conv_w(b2, "w", (4, k, k, k, 4))
    if problem is None:
        b2.emit(op, **args2)
    else:
        with pytest.raises(BuilderError, match=re.escape(rule_tag("geometry.int32"))):
            b2.emit(op, **args2)


def test_the_weight_family_table_of_the_docs_is_the_schemas():
    text = DOCS.read_text(encoding="utf-8")
    for f in WeightFamily:
        row = f"| {f.value} | `{f.layout.value}` | "
        assert row in text, row
        line = next(line for line in text.splitlines() if line.startswith(row))
        assert line.endswith(" yes |" if f.packable else " no |"), line
        axes = [a for a in line.split(" | ")[2].strip("()").split(",") if a.strip()]
        assert len(axes) == f.rank, line
