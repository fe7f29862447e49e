"""Every schema op through a real bundle: builder -> save -> load_lattice_program -> run.

Each case builds a one-op (or minimal) artifact with ``MLIRModuleBuilder``,
writes it to disk, loads it through the native importer and compares the
program's output with the direct ``mlx_lattice.ops`` call on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from artifact_support import assert_same, random_sparse, save_and_load, weight
from lattice_contract import SCHEMA
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice import SparseTensor, ops
from mlx_lattice.ops.cast import cast as cast_op


@dataclass
class Case:
    builder: MLIRModuleBuilder
    weights: dict[str, Any]
    args: tuple[Any, ...]
    expected: Any
    ops: tuple[str, ...]  # schema ops the artifact exercises


CASES: dict[str, Callable[[np.random.Generator], Case]] = {}


def case(fn: Callable[[np.random.Generator], Case]) -> Callable[[np.random.Generator], Case]:
    """Register a case under its function name."""
    CASES[fn.__name__] = fn
    return fn


def _conv_case(
    rng: np.random.Generator,
    op: str,
    *,
    in_stride: int,
    target_stride: int | None,
    k: int,
    s: int | None,
    p: int | None,
    dtype: str = "f32",
) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 4, dtype, stride=in_stride)
    sx = b.add_sparse_input("x", channels=4, dtype=dtype, stride=in_stride)
    w = weight(rng, 6, k, k, k, 4, dtype=dtype)
    bias = weight(rng, 6, dtype=dtype)
    wv = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype=dtype, shape=w.shape)
    bv = b.weight(storage_key="b", layout="bias_c", dtype=dtype, shape=(6,))
    geometry: dict[str, Any] = {"kernel_size": k}
    if s is not None:
        geometry["stride"] = s
    if p is not None:
        geometry["padding"] = p
    kwargs: dict[str, Any] = {"input": sx, "weight": wv, "bias": bv, **geometry}
    args: tuple[Any, ...] = (x,)
    reference_kwargs: dict[str, Any] = dict(geometry)
    if target_stride is not None:
        t = random_sparse(rng, 30, 2, dtype, stride=target_stride)
        kwargs["target"] = b.add_sparse_input("t", channels=2, dtype=dtype, stride=target_stride)
        args = (x, t)
        reference_kwargs["coordinates"] = t
    b.add_output("y", b.emit(op, **kwargs))  # type: ignore[arg-type]
    direct = {
        "conv3d": ops.conv3d,
        "target_conv3d": ops.conv3d,
        "subm_conv3d": ops.subm_conv3d,
        "conv_transpose3d": ops.conv_transpose3d,
        "target_conv_transpose3d": ops.conv_transpose3d,
        "generative_conv_transpose3d": ops.generative_conv_transpose3d,
    }[op]
    expected = direct(x, w, bias, **reference_kwargs)
    return Case(b, {"w": w, "b": bias}, args, expected, ("sparse.make", "weight", op))


@case
def conv3d(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "conv3d", in_stride=1, target_stride=None, k=3, s=2, p=1)


@case
def conv3d_f16(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "conv3d", in_stride=2, target_stride=None, k=2, s=2, p=0, dtype="f16")


@case
def subm_conv3d(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "subm_conv3d", in_stride=1, target_stride=None, k=3, s=None, p=None)


@case
def target_conv3d(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "target_conv3d", in_stride=1, target_stride=2, k=3, s=2, p=1)


@case
def conv_transpose3d(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "conv_transpose3d", in_stride=2, target_stride=None, k=3, s=2, p=1)


@case
def target_conv_transpose3d(rng: np.random.Generator) -> Case:
    return _conv_case(rng, "target_conv_transpose3d", in_stride=2, target_stride=1, k=2, s=2, p=0)


@case
def generative_conv_transpose3d(rng: np.random.Generator) -> Case:
    return _conv_case(
        rng, "generative_conv_transpose3d", in_stride=2, target_stride=None, k=2, s=2, p=0
    )


@case
def sparse_make(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 30, 3, "f16", stride=2)
    b.add_output("y", b.add_sparse_input("x", channels=3, dtype="f16", stride=2))
    return Case(b, {}, (x,), x, ("sparse.make",))


@case
def sparse_decompose(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 30, 3, "f32")
    c, f, a = b.sparse_decompose(input=b.add_sparse_input("x", channels=3, dtype="f32"))
    for name, value in (("c", c), ("f", f), ("a", a)):
        b.add_output(name, value)
    return Case(
        b, {}, (x,), (x.coords, x.feats, x.active_rows), ("sparse.make", "sparse.decompose")
    )


@case
def sparse_with_features(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 30, 3, "f32")
    sx = b.add_sparse_input("x", channels=3, dtype="f32")
    _, f, _ = b.sparse_decompose(input=sx)
    g = b.activation(input=f, kind="relu")
    b.add_output("y", b.sparse_with_features(input=sx, features=g))
    expected = x.with_feats(ops.activation(x.feats, kind="relu"))
    used = ("sparse.make", "sparse.decompose", "activation", "sparse.with_features")
    return Case(b, {}, (x,), expected, used)


@case
def sparse_reindex(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x, t = random_sparse(rng, 40, 3), random_sparse(rng, 40, 2)
    sx = b.add_sparse_input("x", channels=3, dtype="f32")
    st = b.add_sparse_input("t", channels=2, dtype="f32")
    b.add_output("y", b.sparse_reindex(input=sx, target=st))
    return Case(b, {}, (x, t), ops.sparse_reindex(x, t), ("sparse.make", "sparse.reindex"))


def _pair(
    rng: np.random.Generator,
    emit: Callable[..., Any],
    direct: Callable[..., Any],
    schema_op: str,
    **attrs: Any,
) -> Case:
    b = MLIRModuleBuilder()
    x, y = random_sparse(rng, 40, 3), random_sparse(rng, 40, 3)
    sx = b.add_sparse_input("x", channels=3, dtype="f32")
    sy = b.add_sparse_input("y", channels=3, dtype="f32")
    b.add_output("z", emit(b)(lhs=sx, rhs=sy, **attrs))
    return Case(b, {}, (x, y), direct(x, y, **attrs), ("sparse.make", schema_op))


@case
def sparse_binary(rng: np.random.Generator) -> Case:
    return _pair(
        rng, lambda b: b.sparse_binary, ops.sparse_binary, "sparse.binary", op="sub", join="outer"
    )


@case
def sparse_cat(rng: np.random.Generator) -> Case:
    return _pair(rng, lambda b: b.sparse_cat, ops.sparse_cat, "sparse.cat", join="left")


@case
def pool3d(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 3)
    sx = b.add_sparse_input("x", channels=3, dtype="f32")
    b.add_output("y", b.pool3d(input=sx, mode="max", kernel_size=2, stride=2))
    expected = ops.pool3d(x, mode="max", kernel_size=2, stride=2)
    return Case(b, {}, (x,), expected, ("sparse.make", "pool3d"))


@case
def global_pool(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 3, "f16")
    sx = b.add_sparse_input("x", channels=3, dtype="f16")
    b.add_output("y", b.global_pool(input=sx, mode="avg", batch_size=3))
    expected = ops.global_pool(x, mode="avg", batch_size=3)
    return Case(b, {}, (x,), expected, ("sparse.make", "global_pool"))


def _points(rng: np.random.Generator, count: int = 60) -> tuple[mx.array, mx.array]:
    points = mx.array(rng.uniform(0.0, 3.0, size=(count, 3)).astype(np.float32))
    batch = mx.array(rng.integers(0, 2, size=count).astype(np.int32))
    return points, batch


@case
def voxelize(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    points, batch = _points(rng)
    feats = mx.array(rng.standard_normal((60, 5)).astype(np.float32))
    pv = b.add_input("points", "tensor<?x3xf32>")
    fv = b.add_input("features", "tensor<?x5xf32>")
    bv = b.add_input("batch", "tensor<?xi32>")
    b.add_output(
        "y", b.voxelize(points=pv, features=fv, batch=bv, voxel_size=0.5, reduction="mean")
    )
    expected = ops.voxelize(points, feats, batch, voxel_size=0.5, reduction="mean")
    return Case(b, {}, (points, feats, batch), expected, ("voxelize",))


@case
def devoxelize(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 80, 4, extent=4)
    points, batch = _points(rng)
    sx = b.add_sparse_input("x", channels=4, dtype="f32")
    pv = b.add_input("points", "tensor<?x3xf32>")
    bv = b.add_input("batch", "tensor<?xi32>")
    b.add_output(
        "y", b.devoxelize(input=sx, points=pv, batch=bv, voxel_size=0.75, interpolation="trilinear")
    )
    expected = ops.devoxelize(x, points, batch, voxel_size=0.75, interpolation="trilinear")
    return Case(b, {}, (x, points, batch), expected, ("sparse.make", "devoxelize"))


def _features(rng: np.random.Generator, dtype: str = "f32") -> mx.array:
    return weight(rng, 20, 8, dtype=dtype)


@case
def linear(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x, w, bias = _features(rng, "f16"), weight(rng, 5, 8, dtype="f16"), weight(rng, 5, dtype="f16")
    xv = b.add_input("x", "tensor<?x8xf16>")
    wv = b.weight(storage_key="fc.weight", layout="linear_o_i", dtype="f16", shape=(5, 8))
    bv = b.weight(storage_key="fc.bias", layout="bias_c", dtype="f16", shape=(5,))
    b.add_output("y", b.linear(input=xv, weight=wv, bias=bv))
    weights = {"fc.weight": w, "fc.bias": bias}
    return Case(b, weights, (x,), ops.linear(x, w, bias), ("weight", "linear"))


def _feature_op(
    rng: np.random.Generator,
    op: str,
    direct: Callable[..., Any],
    weights: tuple[str, ...] = (),
    **attrs: Any,
) -> Case:
    b = MLIRModuleBuilder()
    x = _features(rng)
    xv = b.add_input("x", "tensor<?x8xf32>")
    bound: dict[str, Any] = {}
    store: dict[str, mx.array] = {}
    for name in weights:
        layout = "bias_c" if name == "bias" else "channel_c"
        value = weight(rng, 8)
        if name == "var":
            value = mx.abs(value) + 0.5
        store[name] = value
        bound[name] = b.weight(storage_key=name, layout=layout, dtype="f32", shape=(8,))
    b.add_output("y", b.emit(op, input=xv, **bound, **attrs))  # type: ignore[arg-type]
    expected = direct(x, *(store[n] for n in weights), **attrs)
    return Case(b, store, (x,), expected, ("weight", op) if weights else (op,))


@case
def activation(rng: np.random.Generator) -> Case:
    return _feature_op(rng, "activation", ops.activation, kind="gelu", approximate="tanh")


@case
def activation_softplus(rng: np.random.Generator) -> Case:
    return _feature_op(rng, "activation", ops.activation, kind="softplus", beta=2.0, threshold=1.0)


@case
def batch_norm(rng: np.random.Generator) -> Case:
    return _feature_op(
        rng, "batch_norm", ops.batch_norm, ("scale", "bias", "mean", "var"), eps=1e-3
    )


@case
def layer_norm(rng: np.random.Generator) -> Case:
    return _feature_op(rng, "layer_norm", ops.layer_norm, ("scale", "bias"), eps=1e-5)


@case
def rms_norm(rng: np.random.Generator) -> Case:
    return _feature_op(rng, "rms_norm", ops.rms_norm, ("scale",), eps=1e-6)


@case
def softmax(rng: np.random.Generator) -> Case:
    return _feature_op(rng, "softmax", ops.softmax)


@case
def cast(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = _features(rng) * 1000.0
    xv = b.add_input("x", "tensor<?x8xf32>")
    b.add_output("y", b.cast(input=xv, dtype="f16", rounding="toward_zero"))
    expected = cast_op(x, mx.float16, rounding="toward_zero")
    return Case(b, {}, (x,), expected, ("cast",))


@case
def call_argmax_gather(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = _features(rng)
    table = weight(rng, 8, 3)
    xv = b.add_input("x", "tensor<?x8xf32>")
    tv = b.add_input("table", "tensor<8x3xf32>")
    labels = b.call(inputs=[xv], callee="argmax")
    b.add_output("labels", labels)
    b.add_output("rows", b.call(inputs=[tv, labels], callee="gather_rows"))
    idx = mx.argmax(x, axis=1).astype(mx.int32)
    return Case(b, {}, (x, table), (idx, table[idx]), ("call",))


# The weight-normalised, upsampling and lookup ops (issue 12).


def _normalized_case(
    rng: np.random.Generator, op: str, *, in_stride: int, target: bool, k: int, s: int, p: int
) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 4, stride=in_stride)
    sx = b.add_sparse_input("x", channels=4, dtype="f32", stride=in_stride)
    w = weight(rng, 6, k, k, k, 4)
    bias = weight(rng, 6)
    wv = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=w.shape)
    bv = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(6,))
    geometry: dict[str, Any] = {"kernel_size": k, "eps": 1e-6}
    if op != "normalized_subm_conv3d":
        geometry["stride"] = s
    if op in ("normalized_conv_transpose3d", "target_normalized_conv_transpose3d"):
        geometry["padding"] = p
    kwargs: dict[str, Any] = {"input": sx, "weight": wv, "bias": bv, **geometry}
    args: tuple[Any, ...] = (x,)
    reference = dict(geometry)
    if target:
        t = random_sparse(rng, 30, 2, stride=in_stride // s)
        kwargs["target"] = b.add_sparse_input("t", channels=2, dtype="f32", stride=in_stride // s)
        args = (x, t)
        reference["coordinates"] = t
    b.add_output("y", b.emit(op, **kwargs))  # type: ignore[arg-type]
    direct = {
        "normalized_subm_conv3d": ops.normalized_subm_conv3d,
        "normalized_conv_transpose3d": ops.normalized_conv_transpose3d,
        "target_normalized_conv_transpose3d": ops.normalized_conv_transpose3d,
        "normalized_generative_conv_transpose3d": ops.normalized_generative_conv_transpose3d,
    }[op]
    expected = direct(x, w, bias, **reference)
    return Case(b, {"w": w, "b": bias}, args, expected, ("sparse.make", "weight", op))


@case
def normalized_subm_conv3d(rng: np.random.Generator) -> Case:
    return _normalized_case(rng, "normalized_subm_conv3d", in_stride=1, target=False, k=3, s=1, p=0)


@case
def normalized_conv_transpose3d(rng: np.random.Generator) -> Case:
    op = "normalized_conv_transpose3d"
    return _normalized_case(rng, op, in_stride=2, target=False, k=3, s=2, p=1)


@case
def target_normalized_conv_transpose3d(rng: np.random.Generator) -> Case:
    op = "target_normalized_conv_transpose3d"
    return _normalized_case(rng, op, in_stride=2, target=True, k=2, s=2, p=0)


@case
def normalized_generative_conv_transpose3d(rng: np.random.Generator) -> Case:
    op = "normalized_generative_conv_transpose3d"
    return _normalized_case(rng, op, in_stride=2, target=False, k=3, s=2, p=0)


@case
def pool_transpose_and_trilinear(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 40, 4, stride=2)
    t = random_sparse(rng, 60, 1, stride=1, extent=12)
    sx = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    st = b.add_sparse_input("t", channels=1, dtype="f32")
    b.add_output(
        "pool", b.pool_transpose3d(input=sx, target=st, kernel_size=3, stride=2, padding=1)
    )
    b.add_output("pool_derived", b.pool_transpose3d(input=sx, kernel_size=2, stride=2))
    b.add_output("tri", b.trilinear_upsample3d(input=sx, target=st, stride=2))
    b.add_output("tri_derived", b.trilinear_upsample3d(input=sx, stride=(2, 1, 2)))
    expected = (
        ops.pool_transpose3d(x, kernel_size=3, stride=2, padding=1, coordinates=t),
        ops.pool_transpose3d(x, kernel_size=2, stride=2),
        ops.trilinear_upsample3d(x, stride=2, coordinates=t),
        ops.trilinear_upsample3d(x, stride=(2, 1, 2)),
    )
    return Case(b, {}, (x, t), expected, ("pool_transpose3d", "trilinear_upsample3d"))


@case
def embedding_and_elementwise(rng: np.random.Generator) -> Case:
    b = MLIRModuleBuilder()
    table = weight(rng, 9, 5)
    idx = mx.array(rng.integers(0, 9, 20).astype(np.int32))
    iv = b.add_input("idx", "tensor<?xi32>")
    tv = b.weight(storage_key="table", layout="embedding_n_c", dtype="f32", shape=(9, 5))
    rows = b.embedding_lookup(indices=iv, weight=tv)
    b.add_output("rows", rows)
    b.add_output("round", b.elementwise(input=b.elementwise(input=rows, kind="exp"), kind="round"))
    looked = ops.embedding_lookup(idx, table)
    expected = (looked, ops.elementwise(ops.elementwise(looked, kind="exp"), kind="round"))
    return Case(b, {"table": table}, (idx,), expected, ("embedding_lookup", "elementwise"))


def test_every_schema_op_has_a_case() -> None:
    rng = np.random.default_rng(0)
    covered = {op for make in CASES.values() for op in make(rng).ops}
    assert covered == set(SCHEMA.ops), set(SCHEMA.ops) - covered


@pytest.mark.parametrize("name", sorted(CASES))
def test_artifact_matches_direct_op(tmp_path: Path, name: str) -> None:
    c = CASES[name](np.random.default_rng(7))
    program = save_and_load(tmp_path, c.builder, c.weights)
    got = program(*c.args)
    if isinstance(c.expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(c.expected)
        for g, e in zip(got, c.expected, strict=True):
            assert_same(g, e)
    else:
        assert_same(got, c.expected)


def test_sparse_make_validates_inputs(tmp_path: Path) -> None:
    program = save_and_load(tmp_path, CASES["sparse_make"](np.random.default_rng(1)).builder)
    coords = mx.array([[0, 2, 2, 2], [0, 2, 3, 2]], dtype=mx.int32)  # 3 not divisible by 2
    feats = mx.zeros((2, 3), dtype=mx.float16)
    active = mx.array([2], dtype=mx.int32)
    with pytest.raises(ValueError, match="not divisible by the stride"):
        program(coords, feats, active)
    out = program.call_with_trusted_sparse_inputs(coords, feats, active)
    assert isinstance(out, SparseTensor) and out.num_rows == 2


def test_primitives_ties_and_bounds(tmp_path: Path) -> None:
    program = save_and_load(tmp_path, CASES["call_argmax_gather"](np.random.default_rng(2)).builder)
    x = mx.array([[1.0, 3.0, 3.0, 0, 0, 0, 0, 0], [5.0, 5.0, 0, 0, 0, 0, 0, 0]])
    table = mx.arange(24, dtype=mx.float32).reshape(8, 3)
    labels, rows = program(x, table)
    assert labels.tolist() == [1, 0]  # ties pick the first channel
    assert rows.tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    b = MLIRModuleBuilder()
    tv = b.add_input("table", "tensor<?x3xf32>")
    iv = b.add_input("index", "tensor<?xi32>")
    b.add_output("rows", b.call(inputs=[tv, iv], callee="gather_rows"))
    gather = save_and_load(tmp_path, b)
    assert gather(table, mx.array([7, 0], dtype=mx.int32)).tolist()[0] == [21.0, 22.0, 23.0]
    with pytest.raises(
        IndexError,
        match=r"gather_rows: index values span \[-1, 8\] but the "
        r"matrix has 8 rows",
    ):
        gather(table, mx.array([8, -1], dtype=mx.int32))
