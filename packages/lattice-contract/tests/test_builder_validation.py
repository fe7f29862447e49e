"""MLIRModuleBuilder's validation, one rule at a time: keywords, operands, attributes, types,
weights, strides and the ABI; a refused call leaves the builder unchanged."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from lattice_contract.builder import (
    BuilderError,
    MLIRModuleBuilder,
    Value,
    tensor_type,
)
from lattice_contract.dialect import Join, PoolMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builder_recipes import (
    S32,
    channel_vector,
    conv_weight,
    features_of,
    vector,
)

# ---------------------------------------------------------------------------
# Validation, one rule at a time.


def _ctx() -> tuple[MLIRModuleBuilder, Value, Value]:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = conv_weight(b, "w", 8, (3, 3, 3), 4)
    return b, x, w


def _err(fn: Callable[[], object], *fragments: str) -> str:
    with pytest.raises(BuilderError) as info:
        fn()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def test_unknown_keyword_names_the_op_and_suggests():
    b, x, w = _ctx()
    # deliberate: a misspelt and a foreign keyword (mypy says so too)
    _err(
        lambda: b.conv3d(input=x, weight=w, kernel_size=3, strid=2),  # type: ignore[arg-type]
        "lattice.conv3d",
        "'strid'",
        "did you mean 'stride'",
    )
    _err(
        lambda: b.subm_conv3d(input=x, weight=w, kernel_size=3, stride=2),  # type: ignore[arg-type]
        "lattice.subm_conv3d",
        "unexpected keyword 'stride'",
        "kernel_size, dilation",
    )


def test_missing_operand_and_attribute():
    b, x, w = _ctx()
    # emit() (generic over the schema) names the op, the argument and the rule ...
    _err(lambda: b.emit("conv3d", weight=w, kernel_size=3), "missing operand 'input'")
    _err(lambda: b.emit("conv3d", input=x, weight=w), "missing attribute 'kernel_size'")
    _err(lambda: b.emit("pool3d", input=x, kernel_size=2), "missing attribute 'mode'", "'max'")
    f = features_of(b, x)
    _err(lambda: b.emit("cast", input=f, rounding="upward"), "missing keyword 'dtype'")
    # ... and the typed methods make the same keywords required in their signatures
    # (a TypeError at the call, an error for mypy before it).
    with pytest.raises(TypeError, match="'input'"):
        b.conv3d(weight=w, kernel_size=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'dtype'"):
        b.cast(input=f, rounding="upward")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"kernel_size": "3"}, ("'kernel_size'", "int or a sequence of three ints")),
        ({"kernel_size": (3, 3)}, ("'kernel_size'", "(3, 3)")),
        ({"kernel_size": (3, 3, 3, 3)}, ("'kernel_size'",)),
        ({"kernel_size": 3.0}, ("'kernel_size'",)),
        ({"kernel_size": True}, ("'kernel_size'",)),
        ({"kernel_size": 3, "stride": 0}, ("'stride'", ">= 1")),
        ({"kernel_size": 3, "stride": (1, 0, 1)}, ("'stride'", ">= 1")),
        ({"kernel_size": 3, "padding": -1}, ("'padding'", ">= 0")),
        ({"kernel_size": 3, "dilation": (1, 1, 0)}, ("'dilation'", ">= 1")),
        ({"kernel_size": 3, "accumulation": "fast"}, ("'accumulation'", "'canonical_f32'")),
        ({"kernel_size": 3, "accumulation": 1}, ("'accumulation'", "string")),
    ],
)
def test_attribute_values(kwargs, fragments):
    b, x, w = _ctx()
    _err(lambda: b.conv3d(input=x, weight=w, **kwargs), "lattice.conv3d", *fragments)


def test_int_float_and_enum_attributes():
    b, x, _ = _ctx()
    f = features_of(b, x)
    scale = channel_vector(b, 4)
    _err(lambda: b.global_pool(input=x, mode="max", batch_size=-2), "'batch_size'", ">= -1")
    _err(lambda: b.softmax(input=f, axis=0), "'axis'", "one of -1, 1")
    _err(lambda: b.sparse_binary(lhs=x, rhs=x, op="add", join="inner", lhs_fill=math.inf), "finite")
    _err(
        lambda: b.voxelize(
            points=b.add_input("p", "tensor<?x3xf32>"),
            features=f,
            batch_indices=b.add_input("i", "tensor<?xi32>"),
            active_rows=b.add_input("n", "tensor<1xi32>"),
            voxel_size=(0.1, 0.0, 0.1),
            reduction="mean",
        ),
        "'voxel_size'",
        "> 0.0",
    )
    _err(lambda: b.global_pool(input=x, mode="max", batch_size=True), "'batch_size'", "an int")
    # deliberate: wrong-typed batch_size / mode (mypy says so too)
    _err(lambda: b.global_pool(input=x, mode="max", batch_size=2.0), "'batch_size'")  # type: ignore[arg-type]
    _err(lambda: b.pool3d(input=x, mode="median", kernel_size=2), "'mode'", "'max', 'avg', 'sum'")
    _err(lambda: b.pool3d(input=x, mode=Join.inner, kernel_size=2), "'mode'", "wrong enum")  # type: ignore[arg-type]
    _err(lambda: b.pool3d(input=x, mode=3, kernel_size=2), "'mode'")  # type: ignore[arg-type]
    _err(lambda: b.rms_norm(input=f, scale=scale, eps=0.0), "lattice.rms_norm", "> 0")
    _err(lambda: b.rms_norm(input=f, scale=scale, eps=-1), "'eps'")
    _err(lambda: b.rms_norm(input=f, scale=scale, eps=math.nan), "'eps'", "finite")
    _err(lambda: b.rms_norm(input=f, scale=scale, eps=1e39), "'eps'", "f32 range")
    # deliberate: eps as a string (mypy says so too)
    _err(lambda: b.rms_norm(input=f, scale=scale, eps="1"), "'eps'", "a float")  # type: ignore[arg-type]
    _err(lambda: b.rms_norm(input=f, scale=scale, eps=1e-50), "'eps'", "> 0")
    _err(lambda: b.call(inputs=[f], callee=""), "'callee'", "non-empty")
    assert b.pool3d(input=x, mode=PoolMode.sum, kernel_size=2, stride=2).type.stride == (2, 2, 2)


def test_operands_must_be_values_of_this_builder_with_the_right_type():
    b, x, w = _ctx()
    other = MLIRModuleBuilder()
    y = other.add_sparse_input("y", channels=4, dtype="f32")
    # deliberate: a name where the Value belongs (mypy says so too)
    _err(lambda: b.conv3d(input="x", weight=w, kernel_size=3), "'input'", "must be a Value")  # type: ignore[arg-type]
    _err(lambda: b.conv3d(input=y, weight=w, kernel_size=3), "another MLIRModuleBuilder")
    lin = b.weight(storage_key="lin", layout="linear_o_i", dtype="f32", shape=(8, 4))
    _err(
        lambda: b.conv3d(input=x, weight=lin, kernel_size=3),
        "lattice.conv3d",
        "'weight' must be !lattice.weight<conv3d, dtype>",
        "got !lattice.weight<linear, f32>",
        "layout conv3d_o_xyz_i",
    )
    _err(lambda: b.conv3d(input=x, weight=w, bias=w, kernel_size=3), "'bias'", "bias_c")
    _err(lambda: b.activation(input=x, kind="relu"), "lattice.activation", "rank-2 float tensor")
    _err(lambda: b.sparse_decompose(input=w), "'input'", "sparse value")
    # deliberate: inputs given as a string and as one Value (mypy says so too)
    _err(lambda: b.call(inputs=f"{x}", callee="argmax"), "'inputs'")  # type: ignore[arg-type]
    _err(lambda: b.call(inputs=x, callee="argmax"), "'inputs'", "sequence of Values")  # type: ignore[arg-type]
    c = b.add_input("coords", "tensor<?x3xi32>")
    f = b.add_input("feats", "tensor<?x?xf32>")
    a = b.add_input("act", "tensor<1xi32>")
    good = b.add_input("feats4", "tensor<?x4xf32>")
    _err(lambda: b.sparse_make(coords=c, features=good, active=a), "'coords'", "tensor<?x4xi32>")
    coords = b.add_input("coords4", "tensor<?x4xi32>")
    _err(lambda: b.sparse_make(coords=coords, features=f, active=a), "'features'", "static")
    _err(lambda: b.sparse_make(coords=coords, features=good, active=good), "'active'")


def test_dtype_homogeneity():
    b, x, w = _ctx()
    w16 = conv_weight(b, "w16", 8, (3, 3, 3), 4, "f16")
    _err(lambda: b.conv3d(input=x, weight=w16, kernel_size=3), "'weight'", "f16", "lattice.cast")
    h = b.add_sparse_input("h", channels=4, dtype="f16")
    _err(lambda: b.sparse_binary(lhs=x, rhs=h, op="add", join="inner"), "'rhs'", "element type")
    _err(lambda: b.sparse_cat(lhs=x, rhs=h, join="inner"), "'rhs'")
    _err(lambda: b.sparse_reindex(input=x, target=h), "'target'")
    _err(
        lambda: b.sparse_with_features(input=h, features=features_of(b, x)),
        "lattice.sparse.with_features",
        "'features'",
    )
    bias16 = vector(b, "b16", "bias_c", 8, "f16")
    _err(lambda: b.conv3d(input=x, weight=w, bias=bias16, kernel_size=3), "'bias'")
    f = features_of(b, x)
    _err(lambda: b.rms_norm(input=f, scale=vector(b, "s16", "channel_c", 4, "f16"), eps=1.0))
    # a packed weight dequantizes to the input's type whatever its storage
    q = b.weight(
        storage_key="q",
        layout="conv3d_o_xyz_i",
        packing={"bits": "int4", "group_size": 32, "scale_dtype": "f16"},
        shape=(8, 3, 3, 3, 4),
    )
    assert b.conv3d(input=x, weight=q, kernel_size=3).dtype == "f32"


def test_weight_shapes_against_the_op():
    b, x, w = _ctx()
    _err(lambda: b.conv3d(input=x, weight=w, kernel_size=(3, 3, 1)), "'weight'", "kernel extent")
    y = b.add_sparse_input("y", channels=5, dtype="f32")
    _err(lambda: b.conv3d(input=y, weight=w, kernel_size=3), "'weight'", "5", "C_in")
    bias = vector(b, "bias7", "bias_c", 7)
    _err(lambda: b.conv3d(input=x, weight=w, bias=bias, kernel_size=3), "'bias'", "(8,)")
    f = features_of(b, x)
    lin = b.weight(storage_key="lin", layout="linear_o_i", dtype="f32", shape=(3, 5))
    _err(
        lambda: b.linear(input=f, weight=lin),
        "lattice.linear",
        "'weight'",
        "input has 4 channels",
        "[rule weight.in_channels]",
    )
    _err(
        lambda: b.layer_norm(
            input=f, scale=channel_vector(b, 5), bias=vector(b, "b4", "bias_c", 4), eps=0.1
        ),
        "'scale'",
        "(4,)",
    )


def test_stride_propagation():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    t1 = b.add_sparse_input("t1", channels=4, dtype="f32", stride=1)
    t4 = b.add_sparse_input("t4", channels=4, dtype="f32", stride=4)
    w = conv_weight(b, "w", 4, (2, 2, 2), 4)
    _err(
        lambda: b.conv_transpose3d(input=x, weight=w, kernel_size=2, stride=(2, 2, 4)),
        "lattice.conv_transpose3d",
        "'stride'",
        "does not divide",
    )
    _err(
        lambda: b.target_conv3d(input=x, target=t1, weight=w, kernel_size=2, stride=2),
        "lattice.target_conv3d",
        "'target'",
        "(1, 1, 1)",
        "(4, 4, 4)",
    )
    assert b.target_conv3d(input=x, target=t4, weight=w, kernel_size=2, stride=2)
    _err(
        lambda: b.target_conv_transpose3d(input=x, target=t4, weight=w, kernel_size=2, stride=2),
        "lattice.target_conv_transpose3d",
        "'target'",
    )
    assert b.target_conv_transpose3d(input=x, target=t1, weight=w, kernel_size=2, stride=2)
    _err(lambda: b.sparse_binary(lhs=x, rhs=t1, op="add", join="inner"), "'rhs'", "stride")
    _err(
        lambda: b.sparse_cat(lhs=x, rhs=t4, join="outer"),
        "has stride (4, 4, 4)",
        "[rule stride.same]",
    )
    _err(lambda: b.sparse_reindex(input=x, target=t1), "lattice.sparse.reindex", "'target'")
    up = b.generative_conv_transpose3d(input=x, weight=w, kernel_size=2, stride=2)
    assert up.type.stride == (1, 1, 1)
    down = b.pool3d(input=up, mode="max", kernel_size=2, stride=(2, 1, 1))
    assert down.type.stride == (2, 1, 1)
    same = b.subm_conv3d(input=down, weight=w, kernel_size=2)
    assert same.type.stride == (2, 1, 1)


def test_generative_transpose_requires_plain_geometry():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    w = conv_weight(b, "w", 4, (2, 2, 2), 4)
    _err(
        # deliberate: padding/dilation are not keywords of this op (mypy says so too)
        lambda: b.generative_conv_transpose3d(input=x, weight=w, kernel_size=2, padding=1),  # type: ignore[arg-type]
        "'padding'",
        "conv_transpose3d",
    )
    _err(
        lambda: b.generative_conv_transpose3d(input=x, weight=w, kernel_size=2, dilation=2),  # type: ignore[arg-type]
        "'dilation'",
    )


def test_feature_op_rules():
    b, x, _ = _ctx()
    z = b.add_sparse_input("z", channels=5, dtype="f32")
    _err(lambda: b.sparse_binary(lhs=x, rhs=z, op="add", join="inner"), "'rhs'", "channels")
    assert b.sparse_cat(lhs=x, rhs=z, join="inner").type.channels == 9
    f = features_of(b, x)
    _err(
        lambda: b.activation(input=f, kind="relu", approximate="tanh"),
        "'approximate'",
        "only gelu",
    )
    _err(lambda: b.cast(input=f, dtype="f32", rounding="upward"), "'dtype'", "no-op")
    _err(lambda: b.cast(input=f, dtype="i32", rounding="upward"), "'dtype'", "float")
    _err(lambda: b.cast(input=f, dtype="f16", rounding="nearest_odd"), "'rounding'", "nearest_even")
    # "nearest" is the typed-program text's name of nearest_even; MLIR prints the precise name
    b.cast(input=f, dtype="f16", rounding="nearest")
    assert str(b.operations[-1].attrs["rounding"]) == "nearest_even"
    idx = b.add_input("idx", "tensor<?xi32>")
    _err(
        lambda: b.cast(input=idx, dtype="f32", rounding="upward"),
        "'input'",
        "not a float type",
        "[rule cast.float]",
    )
    _err(lambda: b.call(inputs=[f], callee="topk"), "'callee'", "not a registered", "argmax")
    _err(lambda: b.call(inputs=[f, f], callee="argmax"), "'inputs'", "takes 1")
    _err(lambda: b.call(inputs=[f, f], callee="gather_rows"), "'inputs'", "item 1", "i32 of rank 1")
    f16 = b.cast(input=f, dtype="f16", rounding="nearest_even")
    _err(lambda: b.call(inputs=[f16], callee="argmax"), "lattice.call", "lattice.cast")


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"layout": "conv3d_o_zyx_i"}, ("'layout'", "conv3d_o_xyz_i")),
        ({"family": "linear"}, ("'family'", "conv3d")),
        ({"family": "bogus"}, ("'family'",)),
        ({"dtype": None}, ("'dtype'", "missing")),
        ({"dtype": "f64"}, ("'dtype'",)),
        ({"dtype": "i4"}, ("'dtype'", "packing")),
        (
            {"packing": {"bits": "int4", "group_size": 32, "scale_dtype": "f16"}, "dtype": "i8"},
            ("'dtype'", "i4", "the float type"),
        ),
        (
            {"packing": {"bits": "int4", "group_size": 48, "scale_dtype": "f16"}},
            ("'packing'", "one of 32, 64, 128"),
        ),
        (
            {"packing": {"bits": "int4", "group_size": 32, "scale_dtype": "bf16"}},
            ("'packing'", "scale_dtype bf16", "f16 or f32"),
        ),
        (
            {"packing": {"bits": "int2", "group_size": 32, "scale_dtype": "f16"}},
            ("'packing'", "'bits'", "'dense', 'int4', 'int8'"),
        ),
        (
            {"packing": {"bits": "dense", "group_size": 32}},
            ("'packing'", "dense packing has no other field"),
        ),
        ({"packing": {"bits": "int4", "group_size": 32}}, ("'packing'", "'scale_dtype'")),
        (
            {"packing": {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "zero": 1}},
            ("'packing'", "unknown keys"),
        ),
        ({"packing": "int4"}, ("'packing'", "mapping")),
        ({"shape": (8, 3, 3, 4)}, ("'shape'", "5 positive ints", "o, x, y, z, i")),
        ({"shape": (8, 3, 3, 3, 0)}, ("'shape'",)),
        ({"shape": None}, ("'shape'",)),
        ({"storage_key": ""}, ("'storage_key'",)),
        ({"sym_name": 5}, ("'sym_name'",)),
    ],
)
def test_weight_arguments(kwargs, fragments):
    b = MLIRModuleBuilder()
    args = {
        "storage_key": "w",
        "layout": "conv3d_o_xyz_i",
        "dtype": "f32",
        "shape": (8, 3, 3, 3, 4),
        **kwargs,
    }
    if "packing" in kwargs and "dtype" not in kwargs:
        args["dtype"] = None
    _err(lambda: b.weight(**args), "lattice.weight", *fragments)


def test_weight_packing_only_for_conv_and_linear_and_unique_bindings():
    b = MLIRModuleBuilder()
    packing = {"bits": "int8", "group_size": 32, "scale_dtype": "f32", "mode": "affine"}
    _err(
        lambda: b.weight(storage_key="b", layout="bias_c", packing=packing, shape=(8,)),
        "'packing'",
        "bias weight",
    )
    _err(
        lambda: b.weight(
            storage_key="e", layout="embedding_n_c", dtype="f32", packing=packing, shape=(9, 8)
        ),
        "'packing'",
        "embedding weight",
    )
    # C_in need not be a multiple of the group size: the packed layout pads it.
    lin = b.weight(storage_key="lin", layout="linear_o_i", packing=packing, shape=(2, 8))
    assert lin.type_text == "!lattice.weight<linear, i8>"
    # Upstream's producer declares a packed weight with its dequantized float type.
    upstream = b.weight(
        storage_key="up", layout="linear_o_i", dtype="f16", packing=packing, shape=(2, 8)
    )
    assert upstream.type_text == "!lattice.weight<linear, f16>"
    dense = b.weight(
        storage_key="d", layout="linear_o_i", dtype="f32", packing={"bits": "dense"}, shape=(2, 8)
    )
    assert dense.type.packing is None
    _err(
        lambda: b.weight(storage_key="lin", layout="linear_o_i", dtype="f32", shape=(2, 8)),
        "'sym_name'",
        "already bound",
    )
    _err(
        lambda: b.weight(
            sym_name="x", storage_key="lin", layout="linear_o_i", dtype="f32", shape=(2, 8)
        ),
        "'storage_key'",
        "reuse the Value",
    )


def test_abi_validation():
    b = MLIRModuleBuilder()
    _err(lambda: b.build(), "no outputs")
    _err(lambda: b.add_input("1x", "tensor<?xf32>"), "add_input", "ASCII identifier")
    _err(lambda: b.add_input("x", "tensor<?xf64>"), "add_input", "tensor<?x3xf32>")
    _err(lambda: b.add_input("x", "memref<?xf32>"), "add_input")
    _err(lambda: b.add_input("x", tensor_type((None,), "f32").__class__("sparse", "f32")))
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    _err(lambda: b.add_input("x_features", "tensor<?xf32>"), "already used")
    _err(lambda: b.add_sparse_input("x", channels=4, dtype="f32"), "already used")
    _err(lambda: b.add_sparse_input("y", channels=0, dtype="f32"), "channels")
    _err(lambda: b.add_sparse_input("y", channels=4, dtype="i32"), "dtype")
    _err(lambda: b.add_sparse_input("y", channels=4, dtype="f32", stride=0), "'stride'", ">= 1")
    _err(lambda: tensor_type((-2,), "f32"), "dimension")
    w = conv_weight(b, "w", 4, (1, 1, 1), 4)
    _err(lambda: b.add_output("w", w), "add_output", "weight")
    # deliberate: a name where the Value belongs
    _err(lambda: b.add_output("x", "x"), "add_output", "must be a Value")  # type: ignore[arg-type]
    other = MLIRModuleBuilder()
    _err(
        lambda: b.add_output("o", other.add_input("f", "tensor<?xf32>")),
        "another MLIRModuleBuilder",
    )
    b.add_output("x", x)
    _err(lambda: b.add_output("x", x), "already used")
    assert "%arg3" not in b.build()  # the failed sparse input left no arguments behind


def test_failed_calls_leave_the_builder_unchanged():
    b, x, w = _ctx()
    b.add_output("x", x)
    before = b.build()
    for bad in (
        lambda: b.conv3d(input=x, weight=w, kernel_size=2),
        lambda: b.weight(storage_key="w", layout="bias_c", dtype="f32", shape=(4,)),
        lambda: b.cast(input=x, dtype="f16", rounding="upward"),
    ):
        with pytest.raises(BuilderError):
            bad()
        assert b.build() == before
    y = b.conv3d(input=x, weight=w, kernel_size=3)
    assert y.name == "%2"  # numbering continues without gaps


def test_values_are_typed_handles():
    b, x, w = _ctx()
    assert x.name == "%0" and x.kind == "sparse" and x.dtype == "f32"
    assert x.type_text == S32 and x.type.stride == (1, 1, 1) and x.type.channels == 4
    assert w.type.weight_shape == (8, 3, 3, 3, 4) and w.type.family == "conv3d"
    coords, feats, active = b.sparse_decompose(input=x)
    assert coords.type.shape == (-1, 4) and feats.type_text == "tensor<?x4xf32>"
    assert active.type_text == "tensor<1xi32>"
    assert "stride (1, 1, 1)" in x.type.describe()
