"""Every schema op through a real bundle on the torch runtime.

Each case builds a small artifact with ``MLIRModuleBuilder`` (no exporter
involved), writes it with ``save_lattice_artifact``, loads it with
``load_lattice_program`` (native verification, frozen plan, type check, torch
lowerings) and compares the program's output with the direct
``torch_lattice.ops`` call on the same inputs.  Together the cases cover every
op of the schema; a final test checks that.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from lattice_contract import SCHEMA
from lattice_contract.builder import MLIRModuleBuilder, tensor_type
from torch_lattice import SparseTensor, canonical_order, ops
from torch_lattice.artifact import load_lattice_program, save_lattice_artifact
from torch_lattice.ops.quant import quantize_weight

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TD = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def random_sparse(
    gen: torch.Generator,
    rows: int,
    channels: int,
    dtype: str = "f32",
    *,
    stride: int = 1,
    batches: int = 2,
    extent: int = 6,
) -> SparseTensor:
    logical = torch.randint(0, extent, (rows, 3), generator=gen)
    batch = torch.randint(0, batches, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, logical * stride], 1), dim=0).to(torch.int32)
    feats = torch.randn(len(coords), channels, generator=gen).to(TD[dtype])
    return SparseTensor(coords, feats, stride=stride)


def weight(gen: torch.Generator, *shape: int, dtype: str = "f32") -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * 0.3).to(TD[dtype])


def to_device(value: Any, device: str) -> Any:
    if isinstance(value, (SparseTensor, torch.Tensor)):
        return value.to(device)
    return value


def assert_same(actual: Any, expected: Any, atol: float = 1e-5) -> None:
    if isinstance(expected, SparseTensor):
        assert isinstance(actual, SparseTensor)
        assert actual.stride == expected.stride
        pa, pe = canonical_order(actual.coords), canonical_order(expected.coords)
        assert torch.equal(actual.coords[pa].cpu(), expected.coords[pe].cpu())
        actual, expected = actual.feats[pa], expected.feats[pe]
    assert isinstance(actual, torch.Tensor)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected.cpu(), atol=atol, rtol=1e-4)


@dataclass
class Case:
    builder: MLIRModuleBuilder
    weights: dict[str, Any]
    args: tuple[Any, ...]
    expected: Callable[..., Any]  # called with the device-resident args and weights
    ops: tuple[str, ...]


CASES: dict[str, Callable[[torch.Generator], Case]] = {}


def case(fn: Callable[[torch.Generator], Case]) -> Callable[[torch.Generator], Case]:
    CASES[fn.__name__] = fn
    return fn


def _conv_case(
    gen: torch.Generator,
    op: str,
    *,
    in_stride: int = 1,
    target_stride: int | None = None,
    k: int = 3,
    s: int | None = None,
    p: int | None = None,
) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 50, 4, stride=in_stride)
    sx = b.add_sparse_input("x", channels=4, dtype="f32", stride=in_stride)
    weights = {"w": weight(gen, 6, k, k, k, 4), "b": weight(gen, 6)}
    wv = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, k, k, k, 4))
    bv = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(6,))
    geometry: dict[str, Any] = {"kernel_size": k}
    if s is not None:
        geometry["stride"] = s
    if p is not None:
        geometry["padding"] = p
    kwargs: dict[str, Any] = {"input": sx, "weight": wv, "bias": bv, **geometry}
    args: tuple[Any, ...] = (x,)
    if target_stride is not None:
        t = random_sparse(gen, 30, 2, stride=target_stride)
        kwargs["target"] = b.add_sparse_input("t", channels=2, dtype="f32", stride=target_stride)
        args = (x, t)
    b.add_output("y", b.emit(op, **kwargs))
    fn = {
        "conv3d": ops.conv3d,
        "target_conv3d": ops.conv3d,
        "subm_conv3d": ops.subm_conv3d,
        "conv_transpose3d": ops.conv_transpose3d,
        "target_conv_transpose3d": ops.conv_transpose3d,
        "generative_conv_transpose3d": ops.generative_conv_transpose3d,
    }[op]

    def expected(*a: Any, w: torch.Tensor, b: torch.Tensor) -> Any:
        extra = {"coordinates": a[1]} if len(a) > 1 else {}
        return fn(a[0], w, b, **geometry, **extra)

    return Case(b, weights, args, expected, ("sparse.make", "weight", op))


@case
def conv3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "conv3d", s=2, p=1)


@case
def subm_conv3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "subm_conv3d", k=3)


@case
def target_conv3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "target_conv3d", target_stride=2, k=2, s=2)


@case
def conv_transpose3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "conv_transpose3d", in_stride=2, k=3, s=2, p=1)


@case
def target_conv_transpose3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "target_conv_transpose3d", in_stride=2, target_stride=1, k=2, s=2)


@case
def generative_conv_transpose3d(gen: torch.Generator) -> Case:
    return _conv_case(gen, "generative_conv_transpose3d", in_stride=2, k=2, s=2)


@case
def pools(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 60, 3)
    sx = b.add_sparse_input("x", channels=3, dtype="f32")
    b.add_output("mx", b.pool3d(input=sx, mode="max", kernel_size=2, stride=2))
    b.add_output("avg", b.pool3d(input=sx, mode="avg", kernel_size=3, stride=1, padding=1))
    b.add_output("g", b.global_pool(input=sx, mode="sum", batch_size=3))

    def expected(x: SparseTensor) -> Any:
        return (
            ops.pool3d(x, mode="max", kernel_size=2, stride=2),
            ops.pool3d(x, mode="avg", kernel_size=3, stride=1, padding=1),
            ops.global_pool(x, mode="sum", batch_size=3),
        )

    return Case(b, {}, (x,), expected, ("pool3d", "global_pool"))


@case
def points(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    pts = torch.rand(80, 3, generator=gen) * 4
    feats = torch.randn(80, 5, generator=gen)
    batch = torch.randint(0, 2, (80,), generator=gen).to(torch.int32)
    vp = b.add_input("points", tensor_type([None, 3], "f32"))
    vf = b.add_input("features", tensor_type([None, 5], "f32"))
    vb = b.add_input("batch", tensor_type([None], "i32"))
    vox = b.voxelize(points=vp, features=vf, batch=vb, voxel_size=0.5, reduction="max")
    b.add_output("v", vox)
    dev = b.devoxelize(input=vox, points=vp, batch=vb, voxel_size=0.5, interpolation="trilinear")
    b.add_output("d", dev)

    def expected(p: torch.Tensor, f: torch.Tensor, bt: torch.Tensor) -> Any:
        v = ops.voxelize(p, f, bt, voxel_size=0.5, reduction="max")
        return v, ops.devoxelize(v, p, bt, voxel_size=0.5, interpolation="trilinear")

    return Case(b, {}, (pts, feats, batch), expected, ("voxelize", "devoxelize"))


@case
def features(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 40, 8)
    sx = b.add_sparse_input("x", channels=8, dtype="f32")
    _, f, _ = b.sparse_decompose(input=sx)
    names = ("lin.w", "lin.b", "bn.s", "bn.b", "bn.m", "bn.v", "ln.s", "ln.b", "rms.s")
    shapes = ((6, 8), (6,), (6,), (6,), (6,), (6,), (6,), (6,), (6,))
    layouts = ("linear_o_i", "bias_c", "channel_c", "bias_c", "channel_c", "channel_c",
               "channel_c", "bias_c", "channel_c")  # fmt: skip
    weights = {n: weight(gen, *s) for n, s in zip(names, shapes, strict=True)}
    weights["bn.v"] = weights["bn.v"].abs() + 0.5
    w = {
        n: b.weight(storage_key=n, layout=lay, dtype="f32", shape=s)
        for n, s, lay in zip(names, shapes, layouts, strict=True)
    }
    h = b.linear(input=f, weight=w["lin.w"], bias=w["lin.b"])
    h = b.activation(input=h, kind="gelu", approximate="tanh")
    h = b.batch_norm(
        input=h, scale=w["bn.s"], bias=w["bn.b"], mean=w["bn.m"], var=w["bn.v"], eps=1e-3
    )
    h = b.activation(input=h, kind="softplus", beta=2.0, threshold=5.0)
    h = b.layer_norm(input=h, scale=w["ln.s"], bias=w["ln.b"], eps=1e-5)
    h = b.rms_norm(input=h, scale=w["rms.s"], eps=1e-6)
    h = b.activation(input=h, kind="leaky_relu", alpha=0.2)
    y = b.sparse_with_features(input=sx, features=b.softmax(input=h))
    b.add_output("y", y)

    def expected(x: SparseTensor, **w: torch.Tensor) -> Any:
        h = ops.linear(x.feats, w["lin.w"], w["lin.b"])
        h = ops.activation(h, kind="gelu", approximate="tanh")
        h = ops.batch_norm(h, w["bn.s"], w["bn.b"], w["bn.m"], w["bn.v"], eps=1e-3)
        h = ops.activation(h, kind="softplus", beta=2.0, threshold=5.0)
        h = ops.layer_norm(h, w["ln.s"], w["ln.b"], eps=1e-5)
        h = ops.rms_norm(h, w["rms.s"], eps=1e-6)
        h = ops.activation(h, kind="leaky_relu", alpha=0.2)
        return x.with_feats(ops.softmax(h))

    return Case(
        b,
        weights,
        (x,),
        expected,
        (
            "sparse.decompose",
            "linear",
            "activation",
            "batch_norm",
            "layer_norm",
            "rms_norm",
            "softmax",
            "sparse.with_features",
        ),
    )


@case
def algebra(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 40, 3, stride=2)
    y = random_sparse(gen, 40, 3, stride=2)
    sx = b.add_sparse_input("x", channels=3, dtype="f32", stride=2)
    sy = b.add_sparse_input("y", channels=3, dtype="f32", stride=2)
    b.add_output("add", b.sparse_binary(lhs=sx, rhs=sy, op="add", join="outer"))
    b.add_output("mx", b.sparse_binary(lhs=sx, rhs=sy, op="max", join="inner"))
    b.add_output("cat", b.sparse_cat(lhs=sx, rhs=sy, join="left"))
    b.add_output("re", b.sparse_reindex(input=sx, target=sy))

    def expected(x: SparseTensor, y: SparseTensor) -> Any:
        return (
            ops.sparse_binary(x, y, op="add", join="outer"),
            ops.sparse_binary(x, y, op="max", join="inner"),
            ops.sparse_cat(x, y, join="left"),
            ops.sparse_reindex(x, y),
        )

    return Case(b, {}, (x, y), expected, ("sparse.binary", "sparse.cat", "sparse.reindex"))


@case
def cast_and_call(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    f = torch.randn(30, 5, generator=gen) * 100
    idx = torch.randint(0, 30, (12,), generator=gen).to(torch.int32)
    vf = b.add_input("f", tensor_type([None, 5], "f32"))
    vi = b.add_input("i", tensor_type([None], "i32"))
    b.add_output("h", b.cast(input=vf, rounding="toward_zero", dtype="f16"))
    b.add_output("am", b.call(inputs=(vf,), callee="argmax"))
    b.add_output("g", b.call(inputs=(vf, vi), callee="gather_rows"))

    def expected(f: torch.Tensor, i: torch.Tensor) -> Any:
        return (
            ops.cast(f, torch.float16, rounding="toward_zero"),
            torch.argmax(f, dim=1).to(torch.int32),
            f[i.long()],
        )

    return Case(b, {}, (f, idx), expected, ("cast", "call"))


@case
def packed_conv_and_linear(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 50, 64)
    sx = b.add_sparse_input("x", channels=64, dtype="f32")
    qc = quantize_weight(weight(gen, 32, 3, 3, 3, 64), bits=4, group_size=32)
    ql = quantize_weight(weight(gen, 8, 32), bits=8, group_size=32)
    wc = b.weight(
        storage_key="conv", layout="conv3d_o_xyz_i", shape=(32, 3, 3, 3, 64),
        packing={"bits": "int4", "group_size": 32, "scale_dtype": "f32"},
    )  # fmt: skip
    wl = b.weight(
        storage_key="head", layout="linear_o_i", shape=(8, 32),
        packing={"bits": "int8", "group_size": 32, "scale_dtype": "f32"},
    )  # fmt: skip
    y = b.subm_conv3d(input=sx, weight=wc, kernel_size=3)
    _, f, _ = b.sparse_decompose(input=y)
    b.add_output("y", b.linear(input=f, weight=wl))

    def expected(x: SparseTensor, conv: Any, head: Any) -> Any:
        dense = ops.subm_conv3d(x, conv.dequantize(torch.float32), kernel_size=3)
        return ops.linear(dense.feats, head.dequantize(torch.float32))

    return Case(b, {"conv": qc, "head": ql}, (x,), expected, ("subm_conv3d", "linear"))


# The weight-normalised, upsampling and lookup ops (issue 12).


def _normalized_case(
    gen: torch.Generator, op: str, *, in_stride: int, target: bool, k: int, s: int, p: int
) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 50, 4, stride=in_stride)
    sx = b.add_sparse_input("x", channels=4, dtype="f32", stride=in_stride)
    w = weight(gen, 6, k, k, k, 4)
    bias = weight(gen, 6)
    wv = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=tuple(w.shape))
    bv = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(6,))
    geometry: dict[str, Any] = {"kernel_size": k, "eps": 1e-6}
    if op != "normalized_subm_conv3d":
        geometry["stride"] = s
    if op in ("normalized_conv_transpose3d", "target_normalized_conv_transpose3d"):
        geometry["padding"] = p
    kwargs: dict[str, Any] = {"input": sx, "weight": wv, "bias": bv, **geometry}
    args: tuple[Any, ...] = (x,)
    if target:
        args = (x, random_sparse(gen, 30, 2, stride=in_stride // s))
        kwargs["target"] = b.add_sparse_input("t", channels=2, dtype="f32", stride=in_stride // s)
    b.add_output("y", b.emit(op, **kwargs))  # type: ignore[arg-type]
    direct = {
        "normalized_subm_conv3d": ops.normalized_subm_conv3d,
        "normalized_conv_transpose3d": ops.normalized_conv_transpose3d,
        "target_normalized_conv_transpose3d": ops.normalized_conv_transpose3d,
        "normalized_generative_conv_transpose3d": ops.normalized_generative_conv_transpose3d,
    }[op]

    def expected(x: SparseTensor, *rest: Any, w: torch.Tensor, b: torch.Tensor) -> Any:
        extra = {"coordinates": rest[0]} if rest else {}
        return direct(x, w, b, **geometry, **extra)

    return Case(b, {"w": w, "b": bias}, args, expected, (op,))


@case
def normalized_subm_conv3d(gen: torch.Generator) -> Case:
    return _normalized_case(gen, "normalized_subm_conv3d", in_stride=1, target=False, k=3, s=1, p=0)


@case
def normalized_conv_transpose3d(gen: torch.Generator) -> Case:
    op = "normalized_conv_transpose3d"
    return _normalized_case(gen, op, in_stride=2, target=False, k=3, s=2, p=1)


@case
def target_normalized_conv_transpose3d(gen: torch.Generator) -> Case:
    op = "target_normalized_conv_transpose3d"
    return _normalized_case(gen, op, in_stride=2, target=True, k=2, s=2, p=0)


@case
def normalized_generative_conv_transpose3d(gen: torch.Generator) -> Case:
    op = "normalized_generative_conv_transpose3d"
    return _normalized_case(gen, op, in_stride=2, target=False, k=3, s=2, p=0)


@case
def pool_transpose_and_trilinear(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    x = random_sparse(gen, 40, 4, stride=2)
    t = random_sparse(gen, 60, 1, stride=1, extent=12)
    sx = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    st = b.add_sparse_input("t", channels=1, dtype="f32")
    b.add_output(
        "pool", b.pool_transpose3d(input=sx, target=st, kernel_size=3, stride=2, padding=1)
    )
    b.add_output("pool_derived", b.pool_transpose3d(input=sx, kernel_size=2, stride=2))
    b.add_output("tri", b.trilinear_upsample3d(input=sx, target=st, stride=2))
    b.add_output("tri_derived", b.trilinear_upsample3d(input=sx, stride=(2, 1, 2)))

    def expected(x: SparseTensor, t: SparseTensor) -> Any:
        return (
            ops.pool_transpose3d(x, kernel_size=3, stride=2, padding=1, coordinates=t),
            ops.pool_transpose3d(x, kernel_size=2, stride=2),
            ops.trilinear_upsample3d(x, stride=2, coordinates=t),
            ops.trilinear_upsample3d(x, stride=(2, 1, 2)),
        )

    return Case(b, {}, (x, t), expected, ("pool_transpose3d", "trilinear_upsample3d"))


@case
def embedding_and_elementwise(gen: torch.Generator) -> Case:
    b = MLIRModuleBuilder()
    table = weight(gen, 9, 5)
    idx = torch.randint(0, 9, (20,), generator=gen).to(torch.int32)
    iv = b.add_input("idx", tensor_type([None], "i32"))
    tv = b.weight(storage_key="table", layout="embedding_n_c", dtype="f32", shape=(9, 5))
    rows = b.embedding_lookup(indices=iv, weight=tv)
    b.add_output("rows", rows)
    b.add_output("round", b.elementwise(input=b.elementwise(input=rows, kind="exp"), kind="round"))

    def expected(idx: torch.Tensor, table: torch.Tensor) -> Any:
        looked = ops.embedding_lookup(idx, table)
        return looked, ops.elementwise(ops.elementwise(looked, kind="exp"), kind="round")

    return Case(b, {"table": table}, (idx,), expected, ("embedding_lookup", "elementwise"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_direct_call(name: str, device: str, tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    c = CASES[name](gen)
    path = tmp_path / f"{name}.lattice"
    save_lattice_artifact(path, c.builder.build(), c.weights)
    program = load_lattice_program(path, device=device)
    args = tuple(to_device(a, device) for a in c.args)
    got = program(*args)
    weights = {k: (v.to(device)) for k, v in c.weights.items()}
    want = c.expected(*args, **weights)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    else:
        assert_same(got, want)
    for item in got if isinstance(got, tuple) else (got,):
        value = item.feats if isinstance(item, SparseTensor) else item
        assert value.device.type == device


def test_cases_cover_every_schema_op() -> None:
    covered = {op for make in CASES.values() for op in make(torch.Generator()).ops}
    assert covered == set(SCHEMA.ops), set(SCHEMA.ops) - covered
