"""MLIRModuleBuilder: generated surface, exact textual output, type inference, validation."""

from __future__ import annotations

import inspect
import math
import random
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping
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
from lattice_contract.schema import AttrKind, Join, PoolMode, Rounding, SchemaEnum

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


def build_recipe(op: str) -> tuple[str, Value, str]:
    """Build the module of one recipe; returns (text, op result, expected op line)."""
    b = MLIRModuleBuilder()
    value, line, outputs = RECIPES[op](b)
    for index, out in enumerate(outputs):
        b.add_output(f"out{index}", out)
    return b.build(), value, line


ALL_OPS = sorted(SCHEMA.ops)


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
    abi = {"add_input", "add_sparse_input", "add_output", "build", "emit"}
    assert public - abi == {o.python_name for o in SCHEMA.ops.values()}


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
    b.add_output("y", b.layer_norm(input=f, scale=_channel(b, 4), bias=w0, eps=0.1))
    text = b.build()
    assert '%0 = lattice.weight @"0.weight" {layout = #lattice.weight_layout<bias_c>, ' in text
    assert "%1 = lattice.weight @w1 {" in text and 'storage_key = "odd \\22key\\22"' in text
    assert w1.type.family == "bias"


def _channel(b: MLIRModuleBuilder, c: int) -> Value:
    return vector(b, f"scale{c}", "channel_c", c)


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
    scale = _channel(b, 4)
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
            input=f, scale=_channel(b, 5), bias=vector(b, "b4", "bias_c", 4), eps=0.1
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
    _err(lambda: b.cast(input=f, dtype="f16", rounding="nearest"), "'rounding'", "nearest_even")
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

    from lattice_contract.plan import RuntimePlan
    from lattice_contract.plan_records import NO_FACTS
    from lattice_contract.plan_records import ValueType as PlanValueType
    from lattice_contract.verify import require_native

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
