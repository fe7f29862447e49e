"""The per-op recipes of the builder tests: one small module per schema op, with the
exact text of its op line (shared by test_builder.py and test_builder_validation.py)."""

from __future__ import annotations

from collections.abc import Callable

from lattice_contract import SCHEMA
from lattice_contract.builder import (
    MLIRModuleBuilder,
    Value,
)
from lattice_contract.dialect import Join, PoolMode, Rounding

S32 = "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>"
S16 = "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>"
CONV_LAYOUT = "#lattice.weight_layout<conv3d_o_xyz_i>"

# ---------------------------------------------------------------------------
# Helpers shared by the per-op recipes.


def conv_weight(
    b: MLIRModuleBuilder, key: str, c_out: int, kernel: tuple[int, int, int], c_in: int, dtype="f32"
) -> Value:
    return b.weight(
        storage_key=key, layout="conv3d_o_xyz_i", dtype=dtype, shape=(c_out, *kernel, c_in)
    )


def vector(b: MLIRModuleBuilder, key: str, layout: str, channels: int, dtype="f32") -> Value:
    return b.weight(storage_key=key, layout=layout, dtype=dtype, shape=(channels,))


def features_of(b: MLIRModuleBuilder, x: Value) -> Value:
    _, features, _ = b.sparse_decompose(input=x)
    return features


def channel_vector(b: MLIRModuleBuilder, c: int) -> Value:
    """A per-channel scale weight of ``c`` entries (layout ``channel_c``)."""
    return vector(b, f"scale{c}", "channel_c", c)


def line_of(text: str, value: Value) -> str:
    """The op line that defines ``value`` (without indentation)."""
    for line in text.splitlines():
        stripped = line.strip()
        if value.name in stripped.split(" = ")[0].split(", "):
            return stripped
    raise AssertionError(f"{value.name} is not defined in:\n{text}")


# Each recipe builds a small module around one op and returns
# (the op's result, the expected text of its line, outputs to return).
Recipe = Callable[[MLIRModuleBuilder], tuple[Value, str, list[Value]]]
RECIPES: dict[str, Recipe] = {}


def recipe(op: str) -> Callable[[Recipe], Recipe]:
    def register(fn: Recipe) -> Recipe:
        RECIPES[op] = fn
        return fn

    return register


@recipe("sparse.make")
def _r_make(b):
    c = b.add_input("c", "tensor<?x4xi32>")
    f = b.add_input("f", "tensor<?x8xf32>")
    a = b.add_input("a", "tensor<1xi32>")
    y = b.sparse_make(coords=c, features=f, active=a, stride=(2, 4, 2))
    line = (
        "%0 = lattice.sparse.make %arg0, %arg1, %arg2 {coord_order = #lattice.coord<batch_x_y_z>, "
        "stride = array<i64: 2, 4, 2>} : "
        f"(tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> {S32}"
    )
    return y, line, [y]


@recipe("sparse.decompose")
def _r_decompose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f16")
    coords, features, active = b.sparse_decompose(input=x)
    assert (coords.name, features.name, active.name) == ("%coords", "%features", "%active")
    line = (
        f"%coords, %features, %active = lattice.sparse.decompose %0 : {S16} -> "
        "(tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>)"
    )
    return features, line, [coords, features, active]


@recipe("sparse.with_features")
def _r_with_features(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    f = features_of(b, x)
    y = b.sparse_with_features(input=x, features=f)
    line = f"%1 = lattice.sparse.with_features %0, %features : ({S32}, tensor<?x8xf32>) -> {S32}"
    return y, line, [y]


@recipe("sparse.reindex")
def _r_reindex(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    t = b.add_sparse_input("t", channels=3, dtype="f32", stride=2)
    y = b.sparse_reindex(input=x, target=t)
    assert y.type.channels == 8 and y.type.stride == (2, 2, 2)
    fill = "{fill = 0.000000e+00 : f32}"
    line = f"%2 = lattice.sparse.reindex %0, %1 {fill} : ({S32}, {S32}) -> {S32}"
    return y, line, [y]


@recipe("weight")
def _r_weight(b):
    x = b.add_sparse_input("x", channels=64, dtype="f32")
    w = b.weight(
        storage_key="enc.qweight",
        layout="conv3d_o_xyz_i",
        packing={"bits": "int8", "group_size": 64, "scale_dtype": "f32"},
        shape=(16, 3, 3, 3, 64),
    )
    y = b.subm_conv3d(input=x, weight=w, kernel_size=3)
    line = (
        f"%1 = lattice.weight @enc.qweight {{layout = {CONV_LAYOUT}, "
        "packing = #lattice.packing<int8, group_size = 64, scale_dtype = f32, mode = affine>, "
        'storage_key = "enc.qweight"} : !lattice.weight<conv3d, i8>'
    )
    return w, line, [y]


@recipe("conv3d")
def _r_conv3d(b):
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = conv_weight(b, "conv.weight", 6, (3, 1, 3), 4)
    bias = vector(b, "conv.bias", "bias_c", 6)
    y = b.conv3d(
        input=x, weight=w, bias=bias, kernel_size=(3, 1, 3), stride=(2, 1, 2), padding=(1, 0, 1)
    )
    assert y.type.stride == (2, 1, 2) and y.type.channels == 6
    line = (
        '%3 = lattice.conv3d %0, %1, %2 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 1, 3>, "
        "padding = array<i64: 1, 0, 1>, stride = array<i64: 2, 1, 2>} : "
        f"({S32}, !lattice.weight<conv3d, f32>, !lattice.weight<bias, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("full_conv3d")
def _r_full_conv3d(b):
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = conv_weight(b, "conv.weight", 6, (3, 2, 3), 4)
    y = b.full_conv3d(input=x, weight=w, kernel_size=(3, 2, 3), stride=2, dilation=(1, 2, 1))
    assert y.type.stride == (2, 2, 2) and y.type.channels == 6
    line = (
        '%2 = lattice.full_conv3d %0, %1 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 2, 1>, kernel_size = array<i64: 3, 2, 3>, "
        "padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("subm_conv3d")
def _r_subm(b):
    x = b.add_sparse_input("x", channels=4, dtype="f16", stride=2)
    w = conv_weight(b, "subm.weight", 8, (3, 3, 3), 4, "f16")
    y = b.subm_conv3d(input=x, weight=w, kernel_size=3, dilation=2)
    assert y.type.stride == (2, 2, 2) and y.type.channels == 8
    line = (
        '%2 = lattice.subm_conv3d %0, %1 {accumulation = "canonical_f32", '
        "dilation = array<i64: 2, 2, 2>, kernel_size = array<i64: 3, 3, 3>} : "
        f"({S16}, !lattice.weight<conv3d, f16>) -> {S16}"
    )
    return y, line, [y]


@recipe("target_conv3d")
def _r_target_conv(b):
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    t = b.add_sparse_input("t", channels=1, dtype="f32", stride=2)
    w = conv_weight(b, "down.weight", 8, (2, 2, 2), 4)
    y = b.target_conv3d(input=x, target=t, weight=w, kernel_size=2, stride=2)
    assert y.type.stride == (2, 2, 2)
    line = (
        '%3 = lattice.target_conv3d %0, %1, %2 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, "
        "padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, {S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("conv_transpose3d")
def _r_transpose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=(4, 2, 2))
    w = conv_weight(b, "up.weight", 4, (2, 2, 2), 8)
    y = b.conv_transpose3d(input=x, weight=w, kernel_size=2, stride=2)
    assert y.type.stride == (2, 1, 1) and y.type.channels == 4
    line = (
        '%2 = lattice.conv_transpose3d %0, %1 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, "
        "padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("target_conv_transpose3d")
def _r_target_transpose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=4)
    t = b.add_sparse_input("t", channels=2, dtype="f32", stride=2)
    w = conv_weight(b, "inv.weight", 4, (3, 3, 3), 8)
    bias = vector(b, "inv.bias", "bias_c", 4)
    y = b.target_conv_transpose3d(
        input=x, target=t, weight=w, bias=bias, kernel_size=3, stride=2, padding=1
    )
    assert y.type.stride == (2, 2, 2)
    line = (
        '%4 = lattice.target_conv_transpose3d %0, %1, %2, %3 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 3, 3>, "
        "padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, {S32}, !lattice.weight<conv3d, f32>, !lattice.weight<bias, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("generative_conv_transpose3d")
def _r_generative(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    w = conv_weight(b, "gen.weight", 8, (2, 2, 2), 8)
    y = b.generative_conv_transpose3d(input=x, weight=w, kernel_size=2, stride=2)
    assert y.type.stride == (1, 1, 1)
    line = (
        '%2 = lattice.generative_conv_transpose3d %0, %1 {accumulation = "canonical_f32", '
        "kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("pool3d")
def _r_pool(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    y = b.pool3d(input=x, mode=PoolMode.max, kernel_size=2, stride=2)
    assert y.type.stride == (4, 4, 4) and y.type.channels == 8
    line = (
        "%1 = lattice.pool3d %0 {dilation = array<i64: 1, 1, 1>, "
        "kernel_size = array<i64: 2, 2, 2>, mode = #lattice.pool_mode<max>, "
        f"padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>}} : ({S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("full_pool3d")
def _r_full_pool(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    y = b.full_pool3d(
        input=x, mode=PoolMode.avg, kernel_size=3, stride=2, padding=1, accumulation="canonical_f32"
    )
    assert y.type.stride == (4, 4, 4) and y.type.channels == 8
    line = (
        '%1 = lattice.full_pool3d %0 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 3, 3>, "
        "mode = #lattice.pool_mode<avg>, padding = array<i64: 1, 1, 1>, "
        f"stride = array<i64: 2, 2, 2>}} : ({S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("global_pool")
def _r_global_pool(b):
    x = b.add_sparse_input("x", channels=8, dtype="f16")
    y = b.global_pool(input=x, mode="avg", batch_size=-1)
    line = (
        "%1 = lattice.global_pool %0 {batch_size = -1 : i64, "
        f"mode = #lattice.pool_mode<avg>}} : ({S16}) -> tensor<?x8xf16>"
    )
    return y, line, [y]


@recipe("voxelize")
def _r_voxelize(b):
    p = b.add_input("points", "tensor<?x3xf32>")
    f = b.add_input("feats", "tensor<?x5xf32>")
    i = b.add_input("batch", "tensor<?xi32>")
    a = b.add_input("active_rows", "tensor<1xi32>")
    y = b.voxelize(
        points=p,
        features=f,
        batch_indices=i,
        active_rows=a,
        voxel_size=(0.05, 0.1, 0.05),
        reduction="mean",
        stride=2,
    )
    assert y.type.stride == (2, 2, 2) and y.type.channels == 5
    line = (
        "%0 = lattice.voxelize %arg0, %arg1, %arg2, %arg3 {origin = array<f64: 0.000000e+00, "
        "0.000000e+00, 0.000000e+00>, reduction = #lattice.voxel_reduction<mean>, "
        "stride = array<i64: 2, 2, 2>, voxel_size = array<f64: 5.000000e-02, 1.000000e-01, "
        "5.000000e-02>} : "
        f"(tensor<?x3xf32>, tensor<?x5xf32>, tensor<?xi32>, tensor<1xi32>) -> {S32}"
    )
    return y, line, [y]


@recipe("devoxelize")
def _r_devoxelize(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    p = b.add_input("points", "tensor<?x3xf32>")
    i = b.add_input("batch", "tensor<?xi32>")
    a = b.add_input("point_active_rows", "tensor<1xi32>")
    y = b.devoxelize(
        points=p,
        voxels=x,
        batch_indices=i,
        point_active_rows=a,
        voxel_size=0.1,
        origin=(0.5, 0.0, -0.5),
        interpolation="linear",
    )
    line = (
        "%1 = lattice.devoxelize %arg3, %0, %arg4, %arg5 {interpolation = "
        "#lattice.point_interpolation<linear>, origin = array<f64: 5.000000e-01, "
        "0.000000e+00, -5.000000e-01>, voxel_size = array<f64: 1.000000e-01, 1.000000e-01, "
        "1.000000e-01>} : "
        f"(tensor<?x3xf32>, {S32}, tensor<?xi32>, tensor<1xi32>) -> tensor<?x8xf32>"
    )
    return y, line, [y]


@recipe("linear")
def _r_linear(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    f = features_of(b, x)
    w = b.weight(storage_key="head.weight", layout="linear_o_i", dtype="f32", shape=(5, 8))
    bias = vector(b, "head.bias", "bias_c", 5)
    y = b.linear(input=f, weight=w, bias=bias)
    line = (
        "%3 = lattice.linear %features, %1, %2 : "
        "(tensor<?x8xf32>, !lattice.weight<linear, f32>, !lattice.weight<bias, f32>) "
        "-> tensor<?x5xf32>"
    )
    return y, line, [y]


@recipe("activation")
def _r_activation(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    f = features_of(b, x)
    y = b.activation(input=f, kind="leaky_relu", alpha=0.2)
    line = (
        "%1 = lattice.activation %features {alpha = 2.000000e-01 : f32, approximate = "
        "#lattice.gelu_approx<none>, beta = 1.000000e+00 : f32, kind = "
        "#lattice.activation<leaky_relu>, threshold = 2.000000e+01 : f32} : "
        "(tensor<?x8xf32>) -> tensor<?x8xf32>"
    )
    return y, line, [y]


@recipe("batch_norm")
def _r_batch_norm(b):
    x = b.add_sparse_input("x", channels=8, dtype="f16")
    f = features_of(b, x)
    scale, bias, mean, var = (
        vector(b, f"bn.{n}", layout, 8, "f16")
        for n, layout in (
            ("weight", "channel_c"),
            ("bias", "bias_c"),
            ("running_mean", "channel_c"),
            ("running_var", "channel_c"),
        )
    )
    y = b.batch_norm(input=f, scale=scale, bias=bias, mean=mean, var=var, eps=1e-5)
    line = (
        "%5 = lattice.batch_norm %features, %1, %2, %3, %4 {eps = 9.99999974E-6 : f32} : "
        "(tensor<?x8xf16>, !lattice.weight<channel, f16>, !lattice.weight<bias, f16>, "
        "!lattice.weight<channel, f16>, !lattice.weight<channel, f16>) -> tensor<?x8xf16>"
    )
    return y, line, [y]


@recipe("layer_norm")
def _r_layer_norm(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    f = features_of(b, x)
    scale = vector(b, "ln.weight", "channel_c", 8)
    bias = vector(b, "ln.bias", "bias_c", 8)
    y = b.layer_norm(input=f, scale=scale, bias=bias, eps=0.5)
    line = (
        "%3 = lattice.layer_norm %features, %1, %2 {eps = 5.000000e-01 : f32} : "
        "(tensor<?x8xf32>, !lattice.weight<channel, f32>, !lattice.weight<bias, f32>) "
        "-> tensor<?x8xf32>"
    )
    return y, line, [y]


@recipe("rms_norm")
def _r_rms_norm(b):
    x = b.add_sparse_input("x", channels=8, dtype="bf16")
    f = features_of(b, x)
    scale = vector(b, "rms.weight", "channel_c", 8, "bf16")
    y = b.rms_norm(input=f, scale=scale, eps=2)
    line = (
        "%2 = lattice.rms_norm %features, %1 {eps = 2.000000e+00 : f32} : "
        "(tensor<?x8xbf16>, !lattice.weight<channel, bf16>) -> tensor<?x8xbf16>"
    )
    return y, line, [y]


@recipe("softmax")
def _r_softmax(b):
    f = b.add_input("logits", "tensor<?x10xf32>")
    y = b.softmax(input=f)
    line = "%0 = lattice.softmax %arg0 {axis = -1 : i64} : (tensor<?x10xf32>) -> tensor<?x10xf32>"
    return y, line, [y]


@recipe("sparse.binary")
def _r_binary(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    z = b.add_sparse_input("z", channels=8, dtype="f32")
    y = b.sparse_binary(lhs=x, rhs=z, op="max", join=Join.right, rhs_fill=-2.0)
    line = (
        "%2 = lattice.sparse.binary %0, %1 {join = #lattice.join<right>, "
        "lhs_fill = 0.000000e+00 : f32, op = #lattice.binary_op<maximum>, "
        f"rhs_fill = -2.000000e+00 : f32}} : ({S32}, {S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("sparse.cat")
def _r_cat(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    z = b.add_sparse_input("z", channels=3, dtype="f32")
    y = b.sparse_cat(lhs=x, rhs=z, join="left")
    assert y.type.channels == 11
    line = (
        f"%2 = lattice.sparse.cat %0, %1 {{join = #lattice.join<left>}} : ({S32}, {S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("cast")
def _r_cast(b):
    f = b.add_input("f", "tensor<?x8xf32>")
    y = b.cast(input=f, dtype="f16", rounding=Rounding.toward_zero)
    line = (
        "%0 = lattice.cast %arg0 {rounding = #lattice.rounding<toward_zero>} : "
        "(tensor<?x8xf32>) -> tensor<?x8xf16>"
    )
    return y, line, [y]


@recipe("call")
def _r_call(b):
    f = b.add_input("scores", "tensor<?x8xf32>")
    i = b.add_input("index", "tensor<?xi32>")
    g = b.call(inputs=[f, i], callee="gather_rows")
    y = b.call(inputs=[g], callee="argmax")
    assert g.type_text == "tensor<?x?xf32>"
    line = '%1 = lattice.call %0 {callee = "argmax"} : (tensor<?x?xf32>) -> tensor<?xi32>'
    return y, line, [y]


# Recipes of the weight-normalised, upsampling and lookup ops (issue 12).


@recipe("normalized_subm_conv3d")
def _r_normalized_subm(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32")
    w = conv_weight(b, "enc.weight", 4, (3, 1, 1), 8)
    y = b.normalized_subm_conv3d(input=x, weight=w, kernel_size=(3, 1, 1), eps=0.5)
    assert y.type.stride == (1, 1, 1) and y.type.channels == 4
    line = (
        '%2 = lattice.normalized_subm_conv3d %0, %1 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, eps = 5.000000e-01 : f32, "
        "kernel_size = array<i64: 3, 1, 1>} : "
        f"({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("normalized_conv_transpose3d")
def _r_normalized_transpose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    w = conv_weight(b, "up.weight", 4, (3, 3, 3), 8)
    y = b.normalized_conv_transpose3d(
        input=x, weight=w, kernel_size=3, stride=2, padding=1, eps=0.25
    )
    assert y.type.stride == (1, 1, 1)
    line = (
        '%2 = lattice.normalized_conv_transpose3d %0, %1 {accumulation = "canonical_f32", '
        "dilation = array<i64: 1, 1, 1>, eps = 2.500000e-01 : f32, "
        "kernel_size = array<i64: 3, 3, 3>, padding = array<i64: 1, 1, 1>, "
        f"stride = array<i64: 2, 2, 2>}} : ({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("target_normalized_conv_transpose3d")
def _r_target_normalized_transpose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    t = b.add_sparse_input("t", channels=1, dtype="f32")
    w = conv_weight(b, "up.weight", 4, (2, 2, 2), 8)
    bias = vector(b, "up.bias", "bias_c", 4)
    y = b.target_normalized_conv_transpose3d(
        input=x, target=t, weight=w, bias=bias, kernel_size=2, stride=2, eps=0.5
    )
    assert y.type.stride == (1, 1, 1) and y.type.channels == 4
    line = (
        "%4 = lattice.target_normalized_conv_transpose3d %0, %1, %2, %3 "
        '{accumulation = "canonical_f32", dilation = array<i64: 1, 1, 1>, '
        "eps = 5.000000e-01 : f32, kernel_size = array<i64: 2, 2, 2>, "
        "padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : "
        f"({S32}, {S32}, !lattice.weight<conv3d, f32>, !lattice.weight<bias, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("normalized_generative_conv_transpose3d")
def _r_normalized_generative(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    w = conv_weight(b, "gen.weight", 8, (2, 2, 2), 8)
    y = b.normalized_generative_conv_transpose3d(
        input=x, weight=w, kernel_size=2, stride=2, eps=2.0
    )
    line = (
        "%2 = lattice.normalized_generative_conv_transpose3d %0, %1 "
        '{accumulation = "canonical_f32", eps = 2.000000e+00 : f32, '
        "kernel_size = array<i64: 2, 2, 2>, "
        f"stride = array<i64: 2, 2, 2>}} : ({S32}, !lattice.weight<conv3d, f32>) -> {S32}"
    )
    return y, line, [y]


@recipe("pool_transpose3d")
def _r_pool_transpose(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=(2, 1, 1))
    t = b.add_sparse_input("t", channels=1, dtype="f32")
    y = b.pool_transpose3d(
        input=x, target=t, kernel_size=(3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)
    )
    assert y.type.stride == (1, 1, 1) and y.type.channels == 8
    line = (
        "%2 = lattice.pool_transpose3d %0, %1 {dilation = array<i64: 1, 1, 1>, "
        "kernel_size = array<i64: 3, 1, 1>, padding = array<i64: 1, 0, 0>, "
        f"stride = array<i64: 2, 1, 1>}} : ({S32}, {S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("trilinear_upsample3d")
def _r_trilinear(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    y = b.trilinear_upsample3d(input=x, stride=2)
    assert y.type.stride == (1, 1, 1) and y.type.channels == 8
    line = (
        f"%1 = lattice.trilinear_upsample3d %0 {{stride = array<i64: 2, 2, 2>}} : ({S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("embedding_lookup")
def _r_embedding(b):
    idx = b.add_input("idx", "tensor<?xi32>")
    table = b.weight(storage_key="embed.weight", layout="embedding_n_c", dtype="f32", shape=(10, 6))
    y = b.embedding_lookup(indices=idx, weight=table)
    line = (
        "%1 = lattice.embedding_lookup %arg0, %0 : "
        "(tensor<?xi32>, !lattice.weight<embedding, f32>) -> tensor<?x6xf32>"
    )
    return y, line, [y]


@recipe("elementwise")
def _r_elementwise(b):
    x = b.add_input("x", "tensor<?x8xf32>")
    y = b.elementwise(input=x, kind="round")
    line = '%0 = lattice.elementwise %arg0 {kind = "round"} : (tensor<?x8xf32>) -> tensor<?x8xf32>'
    return y, line, [y]


@recipe("sparse.crop")
def _r_crop(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=(2, 2, 4))
    y = b.sparse_crop(input=x, lower=0, upper=(88, 100, 20))
    assert y.type.stride == (2, 2, 4) and y.type.channels == 8
    line = (
        "%1 = lattice.sparse.crop %0 {lower = array<i64: 0, 0, 0>, "
        f"upper = array<i64: 88, 100, 20>}} : ({S32}) -> {S32}"
    )
    return y, line, [y]


@recipe("sparse.to_dense")
def _r_to_dense(b):
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=(8, 8, 16))
    y = b.sparse_to_dense(input=x, spatial_shape=(22, 25, 3), batch_size=2, layout="b_cz_y_x")
    line = (
        '%1 = lattice.sparse.to_dense %0 {batch_size = 2 : i64, layout = "b_cz_y_x", '
        f"spatial_shape = array<i64: 22, 25, 3>}} : ({S32}) -> tensor<2x24x25x22xf32>"
    )
    return y, line, [y]


def build_recipe(op: str) -> tuple[str, Value, str]:
    """Build the module of one recipe; returns (text, op result, expected op line)."""
    b = MLIRModuleBuilder()
    value, line, outputs = RECIPES[op](b)
    for index, out in enumerate(outputs):
        b.add_output(f"out{index}", out)
    return b.build(), value, line


ALL_OPS = sorted(SCHEMA.ops)
