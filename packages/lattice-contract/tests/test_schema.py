"""The dialect schema: the ops SPEC §5–§6 require, and the invariants its consumers rely on."""

from __future__ import annotations

import keyword
import re

import pytest
from lattice_contract.dialect import (
    ENUMS,
    FLOAT_DTYPES,
    INPUT_ROLES,
    INT_DTYPES,
    OUTPUT_ROLES,
    PACKED_DTYPE_OF_BITS,
    PACKED_DTYPES,
    SCHEMA,
    SPARSE_INPUT_ROLES,
    AttrKind,
    PackingBits,
    TypeKind,
    WeightFamily,
    WeightLayout,
)

REQUIRED_OPS = {
    "sparse.make",
    "sparse.decompose",
    "sparse.with_features",
    "sparse.reindex",
    "weight",
    "conv3d",
    "full_conv3d",
    "subm_conv3d",
    "target_conv3d",
    "conv_transpose3d",
    "target_conv_transpose3d",
    "generative_conv_transpose3d",
    "pool3d",
    "full_pool3d",
    "global_pool",
    "voxelize",
    "devoxelize",
    "linear",
    "activation",
    "batch_norm",
    "layer_norm",
    "rms_norm",
    "softmax",
    "sparse.binary",
    "sparse.cat",
    "cast",
    "call",
    "normalized_subm_conv3d",
    "normalized_conv_transpose3d",
    "target_normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    "pool_transpose3d",
    "trilinear_upsample3d",
    "embedding_lookup",
    "elementwise",
    "sparse.crop",
    "sparse.to_dense",
}
"""The op list of issues 2, 10, 12 and 26 (the requirement, not a registry)."""

OPS = sorted(SCHEMA.ops)


def test_schema_declares_exactly_the_required_ops():
    assert set(SCHEMA.ops) == REQUIRED_OPS


@pytest.mark.parametrize("name", OPS)
def test_op_definitions_are_well_formed(name):
    op = SCHEMA.ops[name]
    assert op.name == name and op.mlir_name == f"lattice.{name}"
    assert op.summary and "\n" not in op.summary and op.summary.endswith(".")
    names = [o.name for o in op.operands] + [r.name for r in op.results]
    names += [a.name for a in op.attributes]
    assert len(names) == len(set(names)), "operand, result and attribute names must differ"
    for item in names:  # builder keywords and lowering parameters
        assert item.isidentifier() and not keyword.iskeyword(item)
    assert op.results, "every op has a result"
    assert sum(o.optional for o in op.operands) <= 1
    assert all(not (o.optional and o.variadic) for o in op.operands)
    assert op.min_operands <= (op.max_operands or op.min_operands)
    assert op.operand(op.operands[0].name) is op.operands[0] if op.operands else True
    with pytest.raises(KeyError, match=op.mlir_name):
        op.attribute("no_such_attribute")


def test_python_names_are_unique_identifiers():
    names = [op.python_name for op in SCHEMA.ops.values()]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names)


def test_op_lookup_by_every_spelling():
    conv = SCHEMA.ops["conv3d"]
    assert SCHEMA.op("conv3d") is conv and SCHEMA.op("lattice.conv3d") is conv
    make = SCHEMA.ops["sparse.make"]
    assert SCHEMA.op("sparse_make") is make and SCHEMA.op("lattice.sparse.make") is make
    with pytest.raises(KeyError, match=r"quantized_conv3d.*conv3d"):
        SCHEMA.op("quantized_conv3d")


def test_conv_pool_and_linear_ops_declare_canonical_accumulation():
    for op in SCHEMA.ops.values():
        weights = [o for o in op.operands if o.type.kind is TypeKind.weight]
        is_conv = any(WeightFamily.conv3d in o.type.families for o in weights)
        is_linear = any(WeightFamily.linear in o.type.families for o in weights)
        if is_conv or is_linear or "pool" in op.name:
            spec = op.attribute("accumulation").spec
            assert spec.kind is AttrKind.string and spec.allowed == ("canonical_f32",)


def test_conv_geometry_attributes():
    for op in SCHEMA.ops.values():
        if not any(
            o.type.kind is TypeKind.weight and WeightFamily.conv3d in o.type.families
            for o in op.operands
        ):
            continue
        names = {a.name for a in op.attributes}
        generative = op.name.endswith("generative_conv_transpose3d")
        assert "kernel_size" in names
        assert ("dilation" in names) != generative  # upstream: o = c*s + k, no d or p
        assert ("padding" in names) == (not generative and "stride" in names)
        assert ("stride" in names) == (not op.name.endswith("subm_conv3d"))
        assert op.operand("bias").optional
        assert op.operand("bias").type.families == (WeightFamily.bias,)
    assert SCHEMA.ops["conv3d"].attribute("padding").spec.minimum == 0
    assert SCHEMA.ops["conv3d"].attribute("stride").spec.minimum == 1


def test_target_ops_take_a_target_operand():
    for name in ("target_conv3d", "target_conv_transpose3d", "sparse.reindex"):
        assert SCHEMA.ops[name].operand("target").type.kind is TypeKind.sparse


def test_only_call_is_variadic_and_only_weight_has_a_symbol():
    assert [op.name for op in SCHEMA.ops.values() if op.variadic] == ["call"]
    assert SCHEMA.ops["call"].max_operands is None
    symbols = [
        op.name
        for op in SCHEMA.ops.values()
        if any(a.spec.kind is AttrKind.symbol for a in op.attributes)
    ]
    assert symbols == ["weight"]


def test_enums():
    mnemonics = [e.__mnemonic__ for e in ENUMS]
    assert len(mnemonics) == len(set(mnemonics))
    assert set(SCHEMA.enums) == set(ENUMS)
    for enum_type in ENUMS:
        assert len(enum_type) >= 1
        for member in enum_type:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", member.value) and str(member) == member.value
    for op in SCHEMA.ops.values():
        for attr in op.attributes:
            if attr.spec.kind is AttrKind.enum:
                assert attr.spec.enum in ENUMS
    assert "conv3d_o_zyx_i" not in {m.value for m in WeightLayout}


def test_each_layout_belongs_to_one_family_by_name():
    """The builder derives a weight's family and axes from its layout name."""
    for layout in WeightLayout:
        owners = [f for f in WeightFamily if layout.value.startswith(f.value + "_")]
        assert len(owners) == 1, layout
    assert {f for f in WeightFamily} == {
        next(f for f in WeightFamily if lay.value.startswith(f.value + "_")) for lay in WeightLayout
    }


def test_types_and_dtypes():
    sparse, weight = SCHEMA.types
    assert sparse.mnemonic == "sparse_tensor" and weight.mnemonic == "weight"
    assert [p.name for p in sparse.params] == ["rank", "coord", "feature", "dtype"]
    assert all(p.keyword for p in sparse.params)
    assert [p.keyword for p in weight.params] == [False, False]
    assert sparse.params[3].allowed == FLOAT_DTYPES
    assert set(weight.params[1].allowed) == set(FLOAT_DTYPES) | set(PACKED_DTYPES)
    assert set(PACKED_DTYPE_OF_BITS) == {b.value for b in PackingBits} - {"dense"}
    assert set(PACKED_DTYPE_OF_BITS.values()) == set(PACKED_DTYPES)
    assert [n for n, _ in SCHEMA.packing_fields] == ["bits", "group_size", "scale_dtype", "mode"]


def test_primitives_have_consistent_signatures():
    assert SCHEMA.primitives
    for name, primitive in SCHEMA.primitives.items():
        assert primitive.name == name and primitive.summary
        assert len(primitive.inputs) == len(primitive.input_ranks)
        for dtype in (*primitive.inputs, primitive.output):
            assert dtype in FLOAT_DTYPES + INT_DTYPES
        assert all(r >= 0 for r in primitive.input_ranks) and primitive.output_rank >= 0


def test_attribute_spec_optional_keeps_everything_else():
    spec = SCHEMA.ops["conv3d"].attribute("stride").spec
    optional = spec.optional()
    assert not optional.required and spec.required
    assert (optional.kind, optional.minimum, optional.enum) == (spec.kind, spec.minimum, spec.enum)
    assert SCHEMA.ops["weight"].attribute("packing").spec.required is False


def test_roles():
    assert set(SPARSE_INPUT_ROLES) <= set(INPUT_ROLES)
    assert "tensor" in INPUT_ROLES and set(OUTPUT_ROLES) == {"tensor", "sparse_tensor"}
