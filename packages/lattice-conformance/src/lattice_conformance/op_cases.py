"""One table of artifact cases that covers every schema op, run by each runtime's tests.

Each case builds a small artifact with the contract's ``MLIRModuleBuilder``
(no exporter involved), holds its inputs and weights as NumPy arrays, and
says what the program must return in terms of the runtime's own functional
ops (the :class:`~lattice_contract.runtime.ops.RuntimeOps` both runtimes
satisfy) or, where an op has a plain definition, in NumPy.  A runtime's test
(``test_artifact_ops.py`` of ``mlx_lattice`` and of ``torch_lattice``)
supplies a :class:`CaseRuntime` -- how to make its arrays, sparse values,
dtypes and packed weights -- writes the bundle, loads it through the native
importer and compares the program's output with :meth:`OpCase.expected` by
its own rules.  Together the cases cover every op of the schema
(:func:`covered_ops`).

The table is declared once here so that both runtimes run the very same
graphs on the very same numbers; it holds no runtime code.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from lattice_contract.builder import MLIRModuleBuilder, Value, tensor_type

__all__ = [
    "OP_CASES",
    "CaseRuntime",
    "OpCase",
    "Packed",
    "Sparse",
    "Tensor",
    "covered_ops",
    "make_case",
    "random_sparse",
]


@dataclass(frozen=True)
class Sparse:
    """A sparse input: unique int32 rows ``(batch, x, y, z)``, f32 features, a stride, a dtype."""

    coords: np.ndarray
    feats: np.ndarray
    stride: int
    dtype: str = "f32"


@dataclass(frozen=True)
class Tensor:
    """A dense input or weight, stored in ``dtype`` (``f16``, ``f32``, ``i32``...)."""

    values: np.ndarray
    dtype: str


@dataclass(frozen=True)
class Packed:
    """A weight the runtime packs with its ``quantize_weight`` (``bits``, ``group_size``)."""

    values: np.ndarray
    bits: int
    group_size: int


class CaseRuntime(Protocol):
    """What a runtime's test supplies to run the cases on its own arrays."""

    @property
    def ops(self) -> Any:
        """The runtime's ops module (``mlx_lattice.ops``, ``torch_lattice.ops``).

        Both satisfy :class:`~lattice_contract.runtime.ops.RuntimeOps`; the cases
        call them as users do, leaning on their public defaults.
        """
        ...

    def array(self, value: Tensor) -> Any:
        """The runtime array of ``value``, in its dtype."""
        ...

    def sparse(self, value: Sparse) -> Any:
        """The runtime's ``SparseTensor`` of ``value``."""
        ...

    def dtype(self, name: str) -> Any:
        """The runtime dtype of an element type name (``f16``...)."""
        ...

    def pack(self, value: Packed) -> Any:
        """The runtime's packed weight of ``value``."""
        ...

    def dequantize(self, packed: Any) -> Any:
        """The f32 dense weight of a packed weight."""
        ...


Expected = Callable[[CaseRuntime, tuple[Any, ...], Mapping[str, Any]], Any]
"""``expected(runtime, inputs, weights)``: the program's result from the runtime's own values."""


@dataclass(frozen=True)
class OpCase:
    """One artifact, its inputs and weights, what it must return and the schema ops it uses."""

    builder: MLIRModuleBuilder
    weights: Mapping[str, Tensor | Packed]
    inputs: tuple[Sparse | Tensor, ...]
    expected: Expected
    ops: tuple[str, ...]

    def runtime_inputs(self, runtime: CaseRuntime) -> tuple[Any, ...]:
        """The inputs as the runtime's values."""
        return tuple(
            runtime.sparse(v) if isinstance(v, Sparse) else runtime.array(v) for v in self.inputs
        )

    def check(self, got: Any, want: Any, same: Callable[[Any, Any], None]) -> None:
        """``same(got_i, want_i)`` for every result (one, or a tuple of them)."""
        if isinstance(want, tuple):
            assert isinstance(got, tuple) and len(got) == len(want), (type(got), len(want))
            for g, w in zip(got, want, strict=True):
                same(g, w)
        else:
            same(got, want)

    def runtime_weights(self, runtime: CaseRuntime) -> dict[str, Any]:
        """The weights as the runtime's arrays (packed ones packed by the runtime)."""
        return {
            k: runtime.pack(v) if isinstance(v, Packed) else runtime.array(v)
            for k, v in self.weights.items()
        }


OP_CASES: dict[str, Callable[[np.random.Generator], OpCase]] = {}
"""Every case by name; call one with a NumPy generator (see :func:`make_case`)."""


def _case(fn: Callable[[np.random.Generator], OpCase]) -> Callable[[np.random.Generator], OpCase]:
    OP_CASES[fn.__name__] = fn
    return fn


def make_case(name: str) -> OpCase:
    """Case ``name`` with its inputs drawn from a generator seeded by the name."""
    return OP_CASES[name](np.random.default_rng(zlib.crc32(name.encode())))


def covered_ops() -> set[str]:
    """The schema ops the cases exercise together."""
    return {op for name in OP_CASES for op in make_case(name).ops}


# ---------------------------------------------------------------------------
# Inputs.


def random_sparse(
    rng: np.random.Generator,
    rows: int,
    channels: int,
    dtype: str = "f32",
    *,
    stride: int = 1,
    batches: int = 2,
    extent: int = 6,
) -> Sparse:
    """Unique random rows in ``batches`` batch items, physical coordinates at ``stride``."""
    logical = rng.integers(0, extent, size=(rows, 3))
    batch = rng.integers(0, batches, size=(rows, 1))
    coords = np.unique(np.concatenate([batch, logical * stride], axis=1), axis=0)
    feats = rng.standard_normal((len(coords), channels)).astype(np.float32)
    return Sparse(coords.astype(np.int32), feats, stride, dtype)


def _weight(rng: np.random.Generator, *shape: int, dtype: str = "f32") -> Tensor:
    """A random weight (scaled to keep sums moderate)."""
    return Tensor((rng.standard_normal(shape) * 0.3).astype(np.float32), dtype)


def _sparse_input(b: MLIRModuleBuilder, name: str, value: Sparse) -> Value:
    channels = int(value.feats.shape[1])
    return b.add_sparse_input(name, channels=channels, dtype=value.dtype, stride=value.stride)


def _weight_value(b: MLIRModuleBuilder, key: str, layout: str, value: Tensor) -> Value:
    return b.weight(storage_key=key, layout=layout, dtype=value.dtype, shape=value.values.shape)


# ---------------------------------------------------------------------------
# Convolutions.

_CONV_DIRECT = {
    "conv3d": "conv3d",
    "full_conv3d": "full_conv3d",
    "target_conv3d": "conv3d",
    "subm_conv3d": "subm_conv3d",
    "conv_transpose3d": "conv_transpose3d",
    "target_conv_transpose3d": "conv_transpose3d",
    "generative_conv_transpose3d": "generative_conv_transpose3d",
    "normalized_subm_conv3d": "normalized_subm_conv3d",
    "normalized_conv_transpose3d": "normalized_conv_transpose3d",
    "target_normalized_conv_transpose3d": "normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d": "normalized_generative_conv_transpose3d",
}
"""Schema op -> the functional op computing it (targets pass ``coordinates=``)."""


def _conv(
    rng: np.random.Generator,
    op: str,
    *,
    in_stride: int = 1,
    target_stride: int | None = None,
    k: int = 3,
    dtype: str = "f32",
    **geometry: Any,
) -> OpCase:
    """One conv-family op with weight and bias; ``geometry`` holds stride, padding, eps."""
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 4, dtype, stride=in_stride)
    w, bias = _weight(rng, 6, k, k, k, 4, dtype=dtype), _weight(rng, 6, dtype=dtype)
    attrs = {"kernel_size": k, **geometry}
    kwargs: dict[str, Any] = {
        "input": _sparse_input(b, "x", x),
        "weight": _weight_value(b, "w", "conv3d_o_xyz_i", w),
        "bias": _weight_value(b, "b", "bias_c", bias),
        **attrs,
    }
    inputs: tuple[Sparse | Tensor, ...] = (x,)
    if target_stride is not None:
        t = random_sparse(rng, 30, 2, dtype, stride=target_stride)
        kwargs["target"] = _sparse_input(b, "t", t)
        inputs = (x, t)
    result = b.emit(op, **kwargs)
    assert isinstance(result, Value)  # one result, as every conv-family op
    b.add_output("y", result)
    direct = _CONV_DIRECT[op]

    def expected(rt: CaseRuntime, args: tuple[Any, ...], w: Mapping[str, Any]) -> Any:
        extra = {"coordinates": args[1]} if len(args) > 1 else {}
        return getattr(rt.ops, direct)(args[0], w["w"], w["b"], **attrs, **extra)

    return OpCase(b, {"w": w, "b": bias}, inputs, expected, ("sparse.make", "weight", op))


@_case
def conv3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "conv3d", stride=2, padding=1)


@_case
def conv3d_f16(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "conv3d", in_stride=2, k=2, dtype="f16", stride=2, padding=0)


@_case
def full_conv3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "full_conv3d", stride=2, padding=1)


@_case
def subm_conv3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "subm_conv3d")


@_case
def target_conv3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "target_conv3d", target_stride=2, stride=2, padding=1)


@_case
def conv_transpose3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "conv_transpose3d", in_stride=2, stride=2, padding=1)


@_case
def target_conv_transpose3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "target_conv_transpose3d", in_stride=2, target_stride=1, k=2, stride=2)


@_case
def generative_conv_transpose3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "generative_conv_transpose3d", in_stride=2, k=2, stride=2)


@_case
def normalized_subm_conv3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "normalized_subm_conv3d", eps=1e-6)


@_case
def normalized_conv_transpose3d(rng: np.random.Generator) -> OpCase:
    op = "normalized_conv_transpose3d"
    return _conv(rng, op, in_stride=2, stride=2, padding=1, eps=1e-6)


@_case
def target_normalized_conv_transpose3d(rng: np.random.Generator) -> OpCase:
    op = "target_normalized_conv_transpose3d"
    return _conv(rng, op, in_stride=2, target_stride=1, k=2, stride=2, padding=0, eps=1e-6)


@_case
def normalized_generative_conv_transpose3d(rng: np.random.Generator) -> OpCase:
    return _conv(rng, "normalized_generative_conv_transpose3d", in_stride=2, stride=2, eps=1e-6)


@_case
def packed_conv_and_linear(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 64)
    conv = Packed(_weight(rng, 32, 3, 3, 3, 64).values, bits=4, group_size=32)
    head = Packed(_weight(rng, 8, 32).values, bits=8, group_size=32)
    wc = b.weight(
        storage_key="conv", layout="conv3d_o_xyz_i", shape=(32, 3, 3, 3, 64),
        packing={"bits": "int4", "group_size": 32, "scale_dtype": "f32"},
    )  # fmt: skip
    wl = b.weight(
        storage_key="head", layout="linear_o_i", shape=(8, 32),
        packing={"bits": "int8", "group_size": 32, "scale_dtype": "f32"},
    )  # fmt: skip
    _, f, _ = b.sparse_decompose(
        input=b.subm_conv3d(input=_sparse_input(b, "x", x), weight=wc, kernel_size=3)
    )
    b.add_output("y", b.linear(input=f, weight=wl))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], w: Mapping[str, Any]) -> Any:
        dense = rt.ops.subm_conv3d(args[0], rt.dequantize(w["conv"]), kernel_size=3)
        return rt.ops.linear(dense.feats, rt.dequantize(w["head"]))

    ops = ("subm_conv3d", "linear", "sparse.decompose")
    return OpCase(b, {"conv": conv, "head": head}, (x,), expected, ops)


# ---------------------------------------------------------------------------
# Pools, upsampling.


@_case
def pools(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 60, 3)
    sx = _sparse_input(b, "x", x)
    b.add_output("mx", b.pool3d(input=sx, mode="max", kernel_size=2, stride=2))
    b.add_output("avg", b.pool3d(input=sx, mode="avg", kernel_size=3, stride=1, padding=1))
    b.add_output("g", b.global_pool(input=sx, mode="sum", batch_size=3))
    b.add_output("full", b.full_pool3d(input=sx, mode="sum", kernel_size=3, stride=2, padding=1))
    b.add_output("inferred", b.global_pool(input=sx, mode="max", batch_size=-1))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        (x,) = args
        return (
            rt.ops.pool3d(x, mode="max", kernel_size=2, stride=2),
            rt.ops.pool3d(x, mode="avg", kernel_size=3, stride=1, padding=1),
            rt.ops.global_pool(x, mode="sum", batch_size=3),
            rt.ops.full_pool3d(x, mode="sum", kernel_size=3, stride=2, padding=1),
            rt.ops.global_pool(x, mode="max", batch_size=-1),
        )

    return OpCase(b, {}, (x,), expected, ("pool3d", "full_pool3d", "global_pool"))


@_case
def pools_f16(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 50, 3, "f16")
    sx = _sparse_input(b, "x", x)
    b.add_output("full", b.full_pool3d(input=sx, mode="avg", kernel_size=3, stride=2, padding=1))
    b.add_output("g", b.global_pool(input=sx, mode="avg", batch_size=-1))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        (x,) = args
        return (
            rt.ops.full_pool3d(x, mode="avg", kernel_size=3, stride=2, padding=1),
            rt.ops.global_pool(x, mode="avg", batch_size=-1),
        )

    return OpCase(b, {}, (x,), expected, ("full_pool3d", "global_pool"))


@_case
def pool_transpose_and_trilinear(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 40, 4, stride=2)
    t = random_sparse(rng, 60, 1, stride=1, extent=12)
    sx, st = _sparse_input(b, "x", x), _sparse_input(b, "t", t)
    b.add_output(
        "pool", b.pool_transpose3d(input=sx, target=st, kernel_size=3, stride=2, padding=1)
    )
    b.add_output("pool_derived", b.pool_transpose3d(input=sx, kernel_size=2, stride=2))
    b.add_output("tri", b.trilinear_upsample3d(input=sx, target=st, stride=2))
    b.add_output("tri_derived", b.trilinear_upsample3d(input=sx, stride=(2, 1, 2)))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        x, t = args
        return (
            rt.ops.pool_transpose3d(x, kernel_size=3, stride=2, padding=1, coordinates=t),
            rt.ops.pool_transpose3d(x, kernel_size=2, stride=2),
            rt.ops.trilinear_upsample3d(x, stride=2, coordinates=t),
            rt.ops.trilinear_upsample3d(x, stride=(2, 1, 2)),
        )

    return OpCase(b, {}, (x, t), expected, ("pool_transpose3d", "trilinear_upsample3d"))


# ---------------------------------------------------------------------------
# Sparse structure and algebra.


@_case
def sparse_make_f16(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 30, 3, "f16", stride=2)
    b.add_output("y", _sparse_input(b, "x", x))
    return OpCase(b, {}, (x,), lambda rt, args, _: args[0], ("sparse.make",))


@_case
def sparse_decompose(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 30, 3)
    for name, value in zip("cfa", b.sparse_decompose(input=_sparse_input(b, "x", x)), strict=True):
        b.add_output(name, value)

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        return (args[0].coords, args[0].feats, args[0].active_rows)

    return OpCase(b, {}, (x,), expected, ("sparse.make", "sparse.decompose"))


@_case
def algebra(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x, y = random_sparse(rng, 40, 3, stride=2), random_sparse(rng, 40, 3, stride=2)
    sx, sy = _sparse_input(b, "x", x), _sparse_input(b, "y", y)
    b.add_output("add", b.sparse_binary(lhs=sx, rhs=sy, op="add", join="outer"))
    b.add_output("sub", b.sparse_binary(lhs=sx, rhs=sy, op="sub", join="outer"))
    b.add_output("mx", b.sparse_binary(lhs=sx, rhs=sy, op="max", join="inner"))
    b.add_output("cat", b.sparse_cat(lhs=sx, rhs=sy, join="left"))
    b.add_output("re", b.sparse_reindex(input=sx, target=sy))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        x, y = args
        return (
            rt.ops.sparse_binary(x, y, op="add", join="outer"),
            rt.ops.sparse_binary(x, y, op="sub", join="outer"),
            rt.ops.sparse_binary(x, y, op="max", join="inner"),
            rt.ops.sparse_cat(x, y, join="left"),
            rt.ops.sparse_reindex(x, y),
        )

    return OpCase(b, {}, (x, y), expected, ("sparse.binary", "sparse.cat", "sparse.reindex"))


@_case
def grid_bounds_and_dense(rng: np.random.Generator) -> OpCase:
    """A crop that cuts rows on faces of the extent, then the dense hand-off in two layouts."""
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 60, 3, stride=2, extent=6)
    cropped = b.sparse_crop(input=_sparse_input(b, "x", x), lower=(2, 0, 0), upper=(10, 12, 8))
    b.add_output("crop", cropped)
    b.add_output(
        "vol", b.sparse_to_dense(input=cropped, spatial_shape=6, batch_size=2, layout="b_c_z_y_x")
    )
    bev = b.sparse_to_dense(input=cropped, spatial_shape=6, batch_size=2, layout="b_cz_y_x")
    b.add_output("bev", bev)

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        y = rt.ops.sparse_crop(args[0], lower=(2, 0, 0), upper=(10, 12, 8))
        return (
            y,
            rt.ops.sparse_to_dense(y, spatial_shape=6, batch_size=2, layout="b_c_z_y_x"),
            rt.ops.sparse_to_dense(y, spatial_shape=6, batch_size=2, layout="b_cz_y_x"),
        )

    return OpCase(b, {}, (x,), expected, ("sparse.crop", "sparse.to_dense"))


# ---------------------------------------------------------------------------
# Points.


@_case
def points(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    pts = Tensor((rng.random((80, 3)) * 4).astype(np.float32), "f32")
    feats = Tensor(rng.standard_normal((80, 5)).astype(np.float32), "f32")
    batch = Tensor(rng.integers(0, 2, 80).astype(np.int32), "i32")
    active = Tensor(np.array([70], dtype=np.int32), "i32")
    vp = b.add_input("points", tensor_type([None, 3], "f32"))
    vf = b.add_input("features", tensor_type([None, 5], "f32"))
    vb = b.add_input("batch", tensor_type([None], "i32"))
    va = b.add_input("active", tensor_type([1], "i32"))
    grid: dict[str, Any] = {"voxel_size": (0.5, 0.25, 0.5), "origin": (0.1, 0.0, -0.2)}
    vox = b.voxelize(
        points=vp, features=vf, batch_indices=vb, active_rows=va, reduction="max",
        stride=(2, 1, 1), **grid,
    )  # fmt: skip
    b.add_output("v", vox)
    mean = b.voxelize(
        points=vp, features=vf, batch_indices=vb, active_rows=va, reduction="mean",
        stride=(1, 2, 1), **grid,
    )  # fmt: skip
    b.add_output("m", mean)
    b.add_output("d", b.devoxelize(
        points=vp, voxels=vox, batch_indices=vb, point_active_rows=va, interpolation="linear",
        **grid,
    ))  # fmt: skip

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        p, f, bt, a = args
        v = rt.ops.voxelize(p, f, bt, a, reduction="max", stride=(2, 1, 1), **grid)
        m = rt.ops.voxelize(p, f, bt, a, reduction="mean", stride=(1, 2, 1), **grid)
        return v, m, rt.ops.devoxelize(p, v, bt, a, interpolation="linear", **grid)

    return OpCase(b, {}, (pts, feats, batch, active), expected, ("voxelize", "devoxelize"))


# ---------------------------------------------------------------------------
# Feature-only ops.


@_case
def features(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = random_sparse(rng, 40, 8)
    sx = _sparse_input(b, "x", x)
    _, f, _ = b.sparse_decompose(input=sx)
    names = ("lin.w", "lin.b", "bn.s", "bn.b", "bn.m", "bn.v", "ln.s", "ln.b", "rms.s")
    shapes = ((6, 8), (6,), (6,), (6,), (6,), (6,), (6,), (6,), (6,))
    layouts = ("linear_o_i", "bias_c", "channel_c", "bias_c", "channel_c", "channel_c",
               "channel_c", "bias_c", "channel_c")  # fmt: skip
    weights = {n: _weight(rng, *s) for n, s in zip(names, shapes, strict=True)}
    weights["bn.v"] = Tensor(np.abs(weights["bn.v"].values) + 0.5, "f32")
    w = {n: _weight_value(b, n, lay, weights[n]) for n, lay in zip(names, layouts, strict=True)}
    h = b.linear(input=f, weight=w["lin.w"], bias=w["lin.b"])
    h = b.activation(input=h, kind="gelu", approximate="tanh")
    h = b.batch_norm(
        input=h, scale=w["bn.s"], bias=w["bn.b"], mean=w["bn.m"], var=w["bn.v"], eps=1e-3
    )
    h = b.activation(input=h, kind="softplus", beta=2.0, threshold=5.0)
    h = b.layer_norm(input=h, scale=w["ln.s"], bias=w["ln.b"], eps=1e-5)
    h = b.rms_norm(input=h, scale=w["rms.s"], eps=1e-6)
    h = b.activation(input=h, kind="leaky_relu", alpha=0.2)
    b.add_output("y", b.sparse_with_features(input=sx, features=b.softmax(input=h)))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], w: Mapping[str, Any]) -> Any:
        o = rt.ops
        h = o.linear(args[0].feats, w["lin.w"], w["lin.b"])
        h = o.activation(h, kind="gelu", approximate="tanh")
        h = o.batch_norm(h, w["bn.s"], w["bn.b"], w["bn.m"], w["bn.v"], eps=1e-3)
        h = o.activation(h, kind="softplus", beta=2.0, threshold=5.0)
        h = o.layer_norm(h, w["ln.s"], w["ln.b"], eps=1e-5)
        h = o.rms_norm(h, w["rms.s"], eps=1e-6)
        h = o.activation(h, kind="leaky_relu", alpha=0.2)
        return args[0].with_feats(o.softmax(h, axis=-1))

    ops = ("sparse.decompose", "linear", "activation", "batch_norm", "layer_norm", "rms_norm",
           "softmax", "sparse.with_features")  # fmt: skip
    return OpCase(b, weights, (x,), expected, ops)


@_case
def linear_f16(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    x = _weight(rng, 20, 8, dtype="f16")
    w, bias = _weight(rng, 5, 8, dtype="f16"), _weight(rng, 5, dtype="f16")
    xv = b.add_input("x", "tensor<?x8xf16>")
    wv, bv = (
        _weight_value(b, "fc.weight", "linear_o_i", w),
        _weight_value(b, "fc.bias", "bias_c", bias),
    )
    b.add_output("y", b.linear(input=xv, weight=wv, bias=bv))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], w: Mapping[str, Any]) -> Any:
        return rt.ops.linear(args[0], w["fc.weight"], w["fc.bias"])

    return OpCase(b, {"fc.weight": w, "fc.bias": bias}, (x,), expected, ("weight", "linear"))


@_case
def cast_and_call(rng: np.random.Generator) -> OpCase:
    """``cast`` against the runtime's op; the two primitives against NumPy's definition."""
    b = MLIRModuleBuilder()
    f = (rng.standard_normal((30, 5)) * 100).astype(np.float32)
    idx = rng.integers(0, 30, 12).astype(np.int32)
    vf = b.add_input("f", tensor_type([None, 5], "f32"))
    vi = b.add_input("i", tensor_type([None], "i32"))
    b.add_output("h", b.cast(input=vf, rounding="toward_zero", dtype="f16"))
    b.add_output("am", b.call(inputs=(vf,), callee="argmax"))
    b.add_output("g", b.call(inputs=(vf, vi), callee="gather_rows"))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], _: Mapping[str, Any]) -> Any:
        return (
            rt.ops.cast(args[0], rt.dtype("f16"), rounding="toward_zero"),
            rt.array(Tensor(np.argmax(f, axis=1).astype(np.int32), "i32")),  # first max wins
            rt.array(Tensor(f[idx], "f32")),
        )

    inputs = (Tensor(f, "f32"), Tensor(idx, "i32"))
    return OpCase(b, {}, inputs, expected, ("cast", "call"))


@_case
def embedding_and_elementwise(rng: np.random.Generator) -> OpCase:
    b = MLIRModuleBuilder()
    table = _weight(rng, 9, 5)
    idx = Tensor(rng.integers(0, 9, 20).astype(np.int32), "i32")
    iv = b.add_input("idx", tensor_type([None], "i32"))
    rows = b.embedding_lookup(indices=iv, weight=_weight_value(b, "table", "embedding_n_c", table))
    b.add_output("rows", rows)
    b.add_output("round", b.elementwise(input=b.elementwise(input=rows, kind="exp"), kind="round"))

    def expected(rt: CaseRuntime, args: tuple[Any, ...], w: Mapping[str, Any]) -> Any:
        looked = rt.ops.embedding_lookup(args[0], w["table"])
        return looked, rt.ops.elementwise(rt.ops.elementwise(looked, kind="exp"), kind="round")

    ops = ("embedding_lookup", "elementwise")
    return OpCase(b, {"table": table}, (idx,), expected, ops)
