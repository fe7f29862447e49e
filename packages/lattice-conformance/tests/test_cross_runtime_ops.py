"""Every functional op of mlx_lattice against the same op of torch_lattice.

Both runtimes claim one semantics (SPEC §5); this file holds them to it op by
op.  Each case draws its inputs once in NumPy (features exactly representable
in f16, so both sides read identical values), runs ``mlx_lattice.ops`` and
``torch_lattice.ops`` on them, and compares: sparse results by exact
coordinates and equal strides after canonical ordering (each runtime's own
``canonical_order``, which must also agree across runtimes), features within
the storage dtype's tolerance.  Feature-preserving ops must also agree on row
ORDER (SPEC §5's rule).  Bad inputs are in test_cross_runtime_words.py.

The random geometry (strides, kernel sizes odd and even, dilation, padding,
batch, negative coordinates, f32, f16 and bf16) is drawn by hypothesis; the rest is
parametrised.  Neither runtime is the oracle here; each has its own dense
PyTorch / spconv tests -- this file pins them to each other.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import mlx_lattice.ops as mo
import numpy as np
import pytest
import torch
import torch_lattice.ops as to
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.dialect import (
    ActivationKind,
    BinaryOp,
    Interpolation,
    Join,
    PoolMode,
    Rounding,
    VoxelReduction,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cross_runtime_support import (
    MX_DTYPES,
    TORCH_DTYPES,
    Pair,
    assert_close,
    assert_same_row_order,
    assert_sparse_match,
    np_of,
    random_coords,
    random_feats,
    random_sparse,
    sparse_pair,
    to_mx,
    to_torch,
)

EXAMPLES = settings(max_examples=25, deadline=None)

torch.set_num_threads(1)


# ------------------------------------------------------------------ geometry


def axis_triple(values: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[int, int, int]]:
    """Isotropic most of the time, sometimes one value per axis."""
    iso = values.map(lambda v: (v, v, v))
    return st.one_of(iso, st.tuples(values, values, values))


KERNELS = axis_triple(st.integers(1, 4))
STRIDES = axis_triple(st.integers(1, 2))
DILATIONS = st.integers(1, 2).map(lambda v: (v, v, v))
DTYPES = st.sampled_from(["f32", "f16", "bf16"])


def conv_weight(rng: np.random.Generator, c_out: int, kernel: Any, c_in: int) -> np.ndarray:
    shape = (c_out, *kernel, c_in)
    scale = 1.0 / np.sqrt(c_in * np.prod(kernel))
    return np.asarray((rng.standard_normal(shape) * scale).astype(np.float16), dtype=np.float32)


def weights_pair(array: np.ndarray | None, dtype: str) -> tuple[Any, Any]:
    if array is None:
        return None, None
    return to_mx(array, dtype), to_torch(array, dtype)


def mul(a: Any, b: Any) -> tuple[int, int, int]:
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2])


def target_support(
    rng: np.random.Generator, generated: np.ndarray, stride: Any, batch: int, dtype: str
) -> Pair:
    """A target: about half of a generated support plus random rows at ``stride``."""
    keep = generated[rng.random(len(generated)) < 0.5]
    extra = random_coords(rng, 12, batch=batch, extent=5, stride=stride, low=-2)
    rows = np.unique(np.concatenate([keep, extra]), axis=0)
    rows = rows[rng.permutation(len(rows))]
    return sparse_pair(rows, np.zeros((len(rows), 1), np.float32), stride, dtype)


@st.composite
def conv_cases(draw: st.DrawFn, *, transposed: bool = False) -> dict[str, Any]:
    """One random geometry and input; for transposed ops the input stride is a multiple of s."""
    s = draw(STRIDES)
    kernel = draw(KERNELS)
    dilation = draw(DILATIONS)
    padding = draw(axis_triple(st.integers(0, 2)))
    multiple = draw(axis_triple(st.integers(1, 2)))
    t = mul(s, multiple) if transposed else multiple
    return {
        "seed": draw(st.integers(0, 2**32 - 1)),
        "batch": draw(st.integers(1, 3)),
        "rows": draw(st.integers(1, 40)),
        "low": draw(st.sampled_from([-3, 0, 2])),
        "c_in": draw(st.integers(1, 5)),
        "c_out": draw(st.integers(1, 5)),
        "bias": draw(st.booleans()),
        "dtype": draw(DTYPES),
        "kernel": kernel,
        "stride": s,
        "padding": padding,
        "dilation": dilation,
        "input_stride": t,
    }


def case_input(case: dict[str, Any]) -> tuple[np.random.Generator, Pair]:
    rng = np.random.default_rng(case["seed"])
    x = random_sparse(
        rng,
        case["rows"],
        case["c_in"],
        case["dtype"],
        batch=case["batch"],
        extent=5,
        stride=case["input_stride"],
        low=case["low"],
    )
    return rng, x


def case_weights(rng: np.random.Generator, case: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    w = conv_weight(rng, case["c_out"], case["kernel"], case["c_in"])
    b = random_feats(rng, 1, case["c_out"])[0] if case["bias"] else None
    mw, tw = weights_pair(w, case["dtype"])
    mb, tb = weights_pair(b, case["dtype"])
    return mw, tw, mb, tb


# ---------------------------------------------------------------- sparse convs


def case_geometry(case: dict[str, Any]) -> dict[str, Any]:
    return {
        "kernel_size": case["kernel"],
        "stride": case["stride"],
        "padding": case["padding"],
        "dilation": case["dilation"],
    }


def check_conv_and_target(case: dict[str, Any], name: str, out_stride: Any) -> None:
    """``name`` (support-generating) and its ``coordinates=`` form agree across runtimes."""
    rng, x = case_input(case)
    mw, tw, mb, tb = case_weights(rng, case)
    m_op, t_op = getattr(mo, name), getattr(to, name)
    geo, dtype = case_geometry(case), case["dtype"]
    m_out = m_op(x.mx, mw, mb, **geo)
    t_out = t_op(x.torch, tw, tb, **geo)
    assert_sparse_match(m_out, t_out, dtype, f"{name} {case}")

    target = target_support(rng, np_of(t_out.coords), out_stride, case["batch"], dtype)
    m_tgt = m_op(x.mx, mw, mb, **geo, coordinates=target.mx)
    t_tgt = t_op(x.torch, tw, tb, **geo, coordinates=target.torch)
    assert_sparse_match(m_tgt, t_tgt, dtype, f"target {name} {case}")
    # a target conv keeps the target's rows in the target's order, on both sides
    assert_same_row_order(m_tgt, t_tgt, np_of(target.torch.coords))


def run_weighted(case: dict[str, Any], name: str, **geo: Any) -> tuple[Pair, Any, Any]:
    """The case's input, and op ``name`` of each runtime applied to it with random weights."""
    rng, x = case_input(case)
    mw, tw, mb, tb = case_weights(rng, case)
    return x, getattr(mo, name)(x.mx, mw, mb, **geo), getattr(to, name)(x.torch, tw, tb, **geo)


@EXAMPLES
@given(conv_cases())
def test_conv3d_and_target_conv3d(case: dict[str, Any]) -> None:
    check_conv_and_target(case, "conv3d", mul(case["input_stride"], case["stride"]))


@EXAMPLES
@given(conv_cases(transposed=True))
def test_conv_transpose3d_and_target(case: dict[str, Any]) -> None:
    out_stride = tuple(a // b for a, b in zip(case["input_stride"], case["stride"], strict=True))
    check_conv_and_target(case, "conv_transpose3d", out_stride)


@EXAMPLES
@given(conv_cases(transposed=True))
def test_generative_conv_transpose3d(case: dict[str, Any]) -> None:
    name = "generative_conv_transpose3d"
    _, m_out, t_out = run_weighted(case, name, kernel_size=case["kernel"], stride=case["stride"])
    assert_sparse_match(m_out, t_out, case["dtype"], f"{name} {case}")


@EXAMPLES
@given(conv_cases())
def test_subm_conv3d_same_rows_same_order(case: dict[str, Any]) -> None:
    geo = {"kernel_size": case["kernel"], "dilation": case["dilation"]}
    x, m_out, t_out = run_weighted(case, "subm_conv3d", **geo)
    assert_sparse_match(m_out, t_out, case["dtype"], f"subm_conv3d {case}")
    assert_same_row_order(m_out, t_out, np_of(x.torch.coords))
    # row for row, not only after canonical ordering
    assert_close(m_out.feats, t_out.feats, case["dtype"], "subm_conv3d rows")


@EXAMPLES
@given(conv_cases(), st.sampled_from(list(PoolMode)))
def test_pool3d(case: dict[str, Any], mode: PoolMode) -> None:
    _, x = case_input(case)
    geo = case_geometry(case)
    m_out = mo.pool3d(x.mx, mode=mode.value, **geo)
    t_out = to.pool3d(x.torch, mode=mode, **geo)  # string on one side, enum on the other
    assert_sparse_match(m_out, t_out, case["dtype"], f"pool3d {mode.value} {case}")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("mode", list(PoolMode))
def test_global_pool(mode: PoolMode, dtype: str) -> None:
    rng = np.random.default_rng(7)
    coords = random_coords(rng, 60, batch=3, extent=5, low=-2)
    coords = coords[coords[:, 0] != 1]  # batch item 1 is empty, and so is item 3
    x = sparse_pair(coords, random_feats(rng, len(coords), 4), 1, dtype)
    m_out = mo.global_pool(x.mx, mode=mode, batch_size=4)
    t_out = to.global_pool(x.torch, mode=mode.value, batch_size=4)
    assert m_out.dtype == MX_DTYPES[dtype] and t_out.dtype == TORCH_DTYPES[dtype]
    assert_close(m_out, t_out, dtype, f"global_pool {mode.value}")
    assert not np.any(np_of(t_out)[[1, 3]]), "empty batch items pool to zero"


# ------------------------------------------------------------- points, voxels


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("reduction", list(VoxelReduction))
def test_voxelize(reduction: VoxelReduction, dtype: str) -> None:
    rng = np.random.default_rng(11)
    points = rng.uniform(-1.2, 1.7, size=(300, 3)).astype(np.float32)
    feats = random_feats(rng, 300, 3)
    batch = rng.integers(0, 3, size=300).astype(np.int32)
    grids: list[tuple[float | tuple[float, ...], float | tuple[float, ...], int | tuple[int, ...]]]
    grids = [(0.5, 0.0, 1), ((0.3, 0.25, 0.4), (0.1, -0.2, 0.05), (1, 2, 1))]
    for voxel_size, origin, stride in grids:  # one power of two, one whose division rounds
        active = np.array([270], np.int32)
        m_out = mo.voxelize(
            to_mx(points), to_mx(feats, dtype), to_mx(batch), to_mx(active),
            voxel_size=voxel_size, origin=origin, reduction=reduction, stride=stride,
        )  # fmt: skip
        t_out = to.voxelize(
            to_torch(points), to_torch(feats, dtype), to_torch(batch), to_torch(active),
            voxel_size=voxel_size, origin=origin, reduction=reduction.value, stride=stride,
        )  # fmt: skip
        assert_sparse_match(m_out, t_out, dtype, f"voxelize {reduction.value} {voxel_size}")
        # first-occurrence order is part of the op: both runtimes give the same rows in order
        np.testing.assert_array_equal(np_of(m_out.coords), np_of(t_out.coords))
        assert t_out.num_rows < 270, "the case must merge points"


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("interpolation", list(Interpolation))
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_devoxelize(interpolation: Interpolation, stride: int, dtype: str) -> None:
    rng = np.random.default_rng(13 + stride)
    voxel_size = 0.25
    x = random_sparse(rng, 70, 3, dtype, batch=2, extent=5, stride=(stride,) * 3, low=-2)
    # points spread over the support's box and a margin around it (some see no voxel)
    lo, hi = -2.5 * stride * voxel_size, 3.5 * stride * voxel_size
    points = rng.uniform(lo, hi, size=(400, 3)).astype(np.float32)
    # a few points exactly on voxel faces and centres
    points[:40] = (rng.integers(-4, 8, size=(40, 3)) * voxel_size * 0.5).astype(np.float32)
    batch = rng.integers(0, 2, size=400).astype(np.int32)
    args: dict[str, Any] = {
        "voxel_size": voxel_size * stride,  # u in the value's cells
        "origin": (0.05, -0.1, 0.0),
        "interpolation": interpolation,
    }
    m_out = mo.devoxelize(to_mx(points), x.mx, to_mx(batch), **args)
    t_out = to.devoxelize(to_torch(points), x.torch, to_torch(batch), **args)
    assert m_out.dtype == MX_DTYPES[dtype] and t_out.dtype == TORCH_DTYPES[dtype]
    assert_close(m_out, t_out, dtype, f"devoxelize {interpolation.value} stride {stride}")
    hit = np.any(np_of(t_out) != 0, axis=1)
    assert 0 < hit.sum() < len(hit), "the case must mix points with and without voxels"


# ------------------------------------------------------------- sparse algebra


def overlapping_pair(dtype: str, channels: tuple[int, int], stride: int = 2) -> tuple[Pair, Pair]:
    """Two supports at one stride that share some rows and not others."""
    rng = np.random.default_rng(17)
    st3 = (stride,) * 3
    a = random_coords(rng, 40, batch=2, extent=4, stride=st3, low=-1)
    b = random_coords(rng, 40, batch=2, extent=4, stride=st3, low=-1)
    lhs = sparse_pair(a, random_feats(rng, len(a), channels[0]), st3, dtype)
    rhs = sparse_pair(b, random_feats(rng, len(b), channels[1]), st3, dtype)
    return lhs, rhs


def join_rows(lhs: np.ndarray, rhs: np.ndarray, join: Join) -> np.ndarray:
    """SPEC §5's row order of a join, computed by brute force on host rows."""
    equal = (lhs[:, None, :] == rhs[None, :, :]).all(axis=2)  # (lhs rows, rhs rows)
    if join is Join.inner:
        return np.asarray(lhs[equal.any(axis=1)])
    if join is Join.left:
        return lhs
    if join is Join.right:
        return rhs
    return np.concatenate([lhs, rhs[~equal.any(axis=0)]])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("join", list(Join))
@pytest.mark.parametrize("op", list(BinaryOp))
def test_sparse_binary(op: BinaryOp, join: Join, dtype: str) -> None:
    lhs, rhs = overlapping_pair(dtype, (3, 3))
    fills = {"lhs_fill": 0.75, "rhs_fill": -1.5} if join is not Join.inner else {}
    m_out = mo.sparse_binary(lhs.mx, rhs.mx, op=op.value, join=join, **fills)
    t_out = to.sparse_binary(lhs.torch, rhs.torch, op=op, join=join.value, **fills)
    assert_sparse_match(m_out, t_out, dtype, f"sparse_binary {op.value} {join.value}")
    expected = join_rows(np_of(lhs.torch.coords), np_of(rhs.torch.coords), join)
    assert len(expected) > 0 and (join is not Join.inner or len(expected) < lhs.torch.num_rows)
    assert_same_row_order(m_out, t_out, expected)
    assert_close(m_out.feats, t_out.feats, dtype, "sparse_binary rows")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("join", list(Join))
def test_sparse_cat(join: Join, dtype: str) -> None:
    lhs, rhs = overlapping_pair(dtype, (2, 3), stride=1)
    m_out = mo.sparse_cat(lhs.mx, rhs.mx, join=join.value)
    t_out = to.sparse_cat(lhs.torch, rhs.torch, join=join)
    assert_sparse_match(m_out, t_out, dtype, f"sparse_cat {join.value}")
    assert t_out.num_channels == 5
    expected = join_rows(np_of(lhs.torch.coords), np_of(rhs.torch.coords), join)
    assert_same_row_order(m_out, t_out, expected)
    assert_close(m_out.feats, t_out.feats, dtype, "sparse_cat rows")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_sparse_reindex(dtype: str) -> None:
    src, target = overlapping_pair(dtype, (3, 1))
    m_out = mo.sparse_reindex(src.mx, target.mx)
    t_out = to.sparse_reindex(src.torch, target.torch)
    assert_sparse_match(m_out, t_out, dtype, "sparse_reindex")
    assert_same_row_order(m_out, t_out, np_of(target.torch.coords))
    assert_close(m_out.feats, t_out.feats, dtype, "sparse_reindex rows")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_with_feats_keeps_rows_and_order(dtype: str) -> None:
    rng = np.random.default_rng(19)
    x = random_sparse(rng, 30, 2, dtype, batch=2, stride=(2, 1, 2))
    new = random_feats(rng, x.torch.num_rows, 4)
    m_out = x.mx.with_feats(to_mx(new, dtype))
    t_out = x.torch.with_feats(to_torch(new, dtype))
    assert_same_row_order(m_out, t_out, np_of(x.torch.coords))
    assert m_out.stride == t_out.stride == (2, 1, 2)
    assert_close(m_out.feats, t_out.feats, dtype, "with_feats")


# ---------------------------------------------------------- feature-only ops


def dense_pair(seed: int, shape: tuple[int, int], dtype: str, scale: float = 1.0) -> Any:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)
    return to_mx(x, dtype), to_torch(x, dtype)


ACTIVATIONS: list[tuple[ActivationKind, dict[str, Any]]] = [
    (ActivationKind.relu, {}),
    (ActivationKind.leaky_relu, {"alpha": 0.2}),
    (ActivationKind.gelu, {"approximate": "none"}),
    (ActivationKind.gelu, {"approximate": "tanh"}),
    (ActivationKind.gelu, {"approximate": "precise"}),
    (ActivationKind.gelu, {"approximate": "fast"}),
    (ActivationKind.silu, {}),
    (ActivationKind.sigmoid, {}),
    (ActivationKind.tanh, {}),
    (ActivationKind.softplus, {}),
    (ActivationKind.softplus, {"beta": 2.0, "threshold": 3.0}),
    (ActivationKind.elu, {"alpha": 0.7}),
    (ActivationKind.hardswish, {}),
    (ActivationKind.identity, {}),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(("kind", "params"), ACTIVATIONS)
def test_activation(kind: ActivationKind, params: dict[str, Any], dtype: str) -> None:
    mx_x, t_x = dense_pair(23, (64, 8), dtype, scale=4.0)
    m_out = mo.activation(mx_x, kind=kind, **params)
    t_out = to.activation(t_x, kind=kind.value, **params)
    assert m_out.dtype == MX_DTYPES[dtype] and t_out.dtype == TORCH_DTYPES[dtype]
    assert_close(m_out, t_out, dtype, f"activation {kind.value} {params}")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(with_bias: bool, dtype: str) -> None:
    mx_x, t_x = dense_pair(29, (50, 12), dtype)
    mx_w, t_w = dense_pair(31, (7, 12), dtype, scale=0.3)
    mx_b, t_b = dense_pair(37, (1, 7), dtype) if with_bias else (None, None)
    m_out = mo.linear(mx_x, mx_w, None if mx_b is None else mx_b[0])
    t_out = to.linear(t_x, t_w, None if t_b is None else t_b[0])
    assert m_out.dtype == MX_DTYPES[dtype] and t_out.dtype == TORCH_DTYPES[dtype]
    assert_close(m_out, t_out, dtype, "linear")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_norms_and_softmax(dtype: str) -> None:
    c = 6
    mx_x, t_x = dense_pair(41, (40, c), dtype, scale=3.0)
    rng = np.random.default_rng(43)
    scale, bias, mean = (random_feats(rng, 1, c)[0] for _ in range(3))
    var = (rng.random(c) + 0.2).astype(np.float16).astype(np.float32)
    m_vec = [to_mx(v, dtype) for v in (scale, bias, mean, var)]
    t_vec = [to_torch(v, dtype) for v in (scale, bias, mean, var)]
    cases = [
        ("batch_norm", mo.batch_norm(mx_x, *m_vec, eps=1e-3), to.batch_norm(t_x, *t_vec, eps=1e-3)),
        (
            "layer_norm",
            mo.layer_norm(mx_x, m_vec[0], m_vec[1], eps=1e-5),
            to.layer_norm(t_x, t_vec[0], t_vec[1], eps=1e-5),
        ),
        ("rms_norm", mo.rms_norm(mx_x, m_vec[0], eps=1e-6), to.rms_norm(t_x, t_vec[0], eps=1e-6)),
        ("softmax", mo.softmax(mx_x), to.softmax(t_x)),
        ("softmax axis 1", mo.softmax(mx_x, axis=1), to.softmax(t_x, axis=1)),
        # Defaults and the optional affine parts: eps=1e-5, no scale / no shift.
        ("batch_norm_default_eps", mo.batch_norm(mx_x, *m_vec), to.batch_norm(t_x, *t_vec)),
        ("layer_norm_plain", mo.layer_norm(mx_x, None, None), to.layer_norm(t_x, None, None)),
        (
            "layer_norm_scale_only",
            mo.layer_norm(mx_x, m_vec[0], None),
            to.layer_norm(t_x, t_vec[0], None),
        ),
        ("rms_norm_plain", mo.rms_norm(mx_x, None), to.rms_norm(t_x, None)),
    ]
    for name, m_out, t_out in cases:
        assert m_out.dtype == MX_DTYPES[dtype] and t_out.dtype == TORCH_DTYPES[dtype], name
        assert_close(m_out, t_out, dtype, name)


# ------------------------------------------------------------------------ cast


def cast_inputs() -> np.ndarray:
    """f32 values that exercise every rounding decision of f16 and bf16 (as a bit array)."""
    rng = np.random.default_rng(47)
    random_bits = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    # magnitudes where f16 is normal, subnormal, or overflows
    mags = np.exp2(rng.uniform(-27, 17, size=3000)).astype(np.float32)
    mags *= np.where(rng.random(3000) < 0.5, -1, 1).astype(np.float32)
    # exact halfway and near-halfway points of f16 and bf16
    f16 = rng.integers(0, 0x7C00, size=500, dtype=np.uint16).view(np.float16).astype(np.float32)
    half16 = f16 + (np.spacing(np.abs(f16).astype(np.float16)).astype(np.float32) / 2)
    bf = (rng.integers(0, 2**31, size=500, dtype=np.uint64).astype(np.uint32) & 0x7F7F0000) | 0x8000
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, -65520.0, 65519.996, 2.0**-24,
         2.0**-25, -(2.0**-25), 3 * 2.0**-26, 1e-45, 3.4e38, -3.4e38],
        dtype=np.float32,
    )  # fmt: skip
    values = np.concatenate(
        [
            random_bits.view(np.float32),
            mags,
            half16,
            -half16,
            np.nextafter(half16, np.float32(np.inf)),
            np.nextafter(half16, np.float32(-np.inf)),
            bf.view(np.float32),
            (bf + 1).view(np.float32),
            (bf | 0x80000000).view(np.float32),
            special,
            # NaNs with payloads, quiet and signalling, of both signs
            np.array(
                [0x7F800001, 0xFF800001, 0x7FC00001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7F802000],
                dtype=np.uint32,
            ).view(np.float32),
        ]
    )
    return values.astype(np.float32)


QUIET_NAN_BITS = {"f16": 0x7E00, "bf16": 0x7FC0}
"""The NaN policy's NaN (exponent all ones, top significand bit only), positive."""


def policy_nan_bits(sign: np.ndarray, target: str) -> np.ndarray:
    """The 16-bit NaN the contract's policy gives for sources of sign bit ``sign`` (0 or 1)."""
    return (sign.astype(np.int64) << 15) | QUIET_NAN_BITS[target]


def bits_of(value: Any) -> np.ndarray:
    """Raw 16-bit patterns of an f16/bf16 array from either runtime."""
    if isinstance(value, torch.Tensor):
        return value.view(torch.int16).numpy().view(np.uint16)
    return np.asarray(value.view(mx.uint16))


@pytest.mark.parametrize("target", ["f16", "bf16"])
@pytest.mark.parametrize("rounding", list(Rounding))
def test_cast_bit_exact(rounding: Rounding, target: str) -> None:
    values = cast_inputs()
    m_out = mo.cast(to_mx(values[:, None]), target, rounding=rounding.value)
    t_out = to.cast(to_torch(values[:, None]), TORCH_DTYPES[target], rounding=rounding)
    assert m_out.dtype == MX_DTYPES[target] and t_out.dtype == TORCH_DTYPES[target]
    mb, tb = bits_of(m_out).ravel(), bits_of(t_out).ravel()
    bad = np.flatnonzero(mb != tb)  # every bit pattern, NaNs included: nothing is masked
    assert bad.size == 0, (
        f"cast {rounding.value} to {target}: {bad.size} values differ, first "
        f"{values[bad[0]]!r}: mlx {mb[bad[0]]:#06x} torch {tb[bad[0]]:#06x}"
    )
    nan = np.isnan(values)
    sign = values.view(np.uint32)[nan] >> 31
    np.testing.assert_array_equal(mb[nan].astype(np.int64), policy_nan_bits(sign, target))


@pytest.mark.parametrize("source", ["f16", "bf16"])
def test_cast_to_f32_and_same_type_bit_exact(source: str) -> None:
    """Widening and same-type casts give the same bits on both runtimes, NaNs included."""
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    m_in = mx.array(patterns).view(MX_DTYPES[source])
    t_in = torch.from_numpy(patterns.view(np.int16).copy()).view(TORCH_DTYPES[source])
    m_wide = np.asarray(mo.cast(m_in, "f32").view(mx.uint32))
    t_wide = to.cast(t_in, "f32").view(torch.int32).numpy().view(np.uint32)
    np.testing.assert_array_equal(m_wide, t_wide)
    inf = {"f16": 0x7C00, "bf16": 0x7F80}[source]
    nan = (patterns.astype(np.int64) & 0x7FFF) > inf  # from the fields, not a float conversion
    sign = patterns.astype(np.uint32)[nan] >> 15
    np.testing.assert_array_equal(m_wide[nan], (sign << 31) | 0x7FC00000)
    m_same, t_same = bits_of(mo.cast(m_in, source)), bits_of(to.cast(t_in, source))
    np.testing.assert_array_equal(m_same, t_same)
    np.testing.assert_array_equal(m_same[nan].astype(np.int64), policy_nan_bits(sign, source))
    np.testing.assert_array_equal(m_same[~nan], patterns[~nan])


# ------------------------------------------------------------ packed weights


def packed_pair(
    dense: np.ndarray, bits: int, group: int, scale_dtype: str, side: str
) -> tuple[mo.QuantizedWeight, to.QuantizedWeight]:
    """Quantize once on ``side`` and hand the identical words, scales and biases to the other."""
    if side == "mlx":
        q = mo.quantize_weight(
            to_mx(dense), bits=bits, group_size=group, scale_dtype=MX_DTYPES[scale_dtype]
        )
        words = np.asarray(q.weight)
        scales, biases = np_of(q.scales), np_of(q.biases)
    else:
        tq = to.quantize_weight(
            to_torch(dense), bits=bits, group_size=group, scale_dtype=TORCH_DTYPES[scale_dtype]
        )
        words = tq.weight.view(torch.int32).numpy().view(np.uint32)
        scales, biases = np_of(tq.scales), np_of(tq.biases)
    assert words.dtype == np.uint32
    shape = tuple(dense.shape)
    mq = mo.QuantizedWeight(
        to_mx(words), to_mx(scales, scale_dtype), to_mx(biases, scale_dtype), bits, group, shape
    )
    tq = to.QuantizedWeight(
        torch.from_numpy(words.view(np.int32).copy()).view(torch.uint32),
        to_torch(scales, scale_dtype),
        to_torch(biases, scale_dtype),
        bits,
        group,
        shape,
    )
    # the identical packing dequantizes to the same f32 weights on both sides
    np.testing.assert_allclose(
        np_of(mq.dequantize()), np_of(tq.dequantize(torch.float32)), rtol=1e-6, atol=1e-7
    )
    return mq, tq


QUANT_CASES = [
    (4, "f32", "f32", "mlx"),
    (8, "f32", "f16", "torch"),
    (4, "f16", "f16", "torch"),
    (8, "f16", "f16", "mlx"),
    (4, "f32", "bf16", "mlx"),
]


@pytest.mark.parametrize(("bits", "dtype", "scale_dtype", "side"), QUANT_CASES)
def test_quantized_conv3d_and_linear(bits: int, dtype: str, scale_dtype: str, side: str) -> None:
    rng = np.random.default_rng(53 + bits)
    c_in, c_out, group = 40, 5, 32  # C_in padded to 64 in the packing
    x = random_sparse(rng, 60, c_in, dtype, batch=2, extent=5)
    w = conv_weight(rng, c_out, (3, 2, 3), c_in)
    mq, tq = packed_pair(w, bits, group, scale_dtype, side)
    bias = random_feats(rng, 1, c_out)[0]
    mb, tb = weights_pair(bias, dtype)
    geo: dict[str, Any] = {"kernel_size": (3, 2, 3), "stride": 2, "padding": 1}
    m_out = mo.conv3d(x.mx, mq, mb, **geo)
    t_out = to.conv3d(x.torch, tq, tb, **geo)
    assert_sparse_match(m_out, t_out, dtype, f"packed int{bits} conv3d")
    m_sub = mo.subm_conv3d(x.mx, mq, mb, kernel_size=(3, 2, 3))
    t_sub = to.subm_conv3d(x.torch, tq, tb, kernel_size=(3, 2, 3))
    assert_sparse_match(m_sub, t_sub, dtype, f"packed int{bits} subm_conv3d")

    lw = conv_weight(rng, 9, (1, 1, 1), 2 * group).reshape(9, 2 * group)
    mlq, tlq = packed_pair(lw, bits, group, scale_dtype, side)
    mx_x, t_x = dense_pair(59, (30, 2 * group), dtype)
    m_lin = mo.linear(mx_x, mlq)
    t_lin = to.linear(t_x, tlq)
    assert m_lin.dtype == MX_DTYPES[dtype] and t_lin.dtype == TORCH_DTYPES[dtype]
    assert_close(m_lin, t_lin, dtype, f"packed int{bits} linear")


@pytest.mark.parametrize(("source", "target"), [("f16", "bf16"), ("bf16", "f16")])
@pytest.mark.parametrize("rounding", list(Rounding))
def test_cast_between_half_types_exhaustive(rounding: Rounding, source: str, target: str) -> None:
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    m_in = mx.array(patterns).view(MX_DTYPES[source])
    t_in = torch.from_numpy(patterns.view(np.int16).copy()).view(TORCH_DTYPES[source])
    m_out = mo.cast(m_in, target, rounding=rounding)
    t_out = to.cast(t_in, target, rounding=rounding.value)
    mb, tb = bits_of(m_out), bits_of(t_out)
    bad = np.flatnonzero(mb != tb)  # NaNs included: the policy fixes their bits too
    assert bad.size == 0, (
        f"cast {source}->{target} {rounding.value}: {bad.size} patterns differ, first "
        f"{patterns[bad[0]]:#06x}: mlx {mb[bad[0]]:#06x} torch {tb[bad[0]]:#06x}"
    )


# ------------------------------------------------------------------ API shape


def _public(module: ModuleType) -> set[str]:
    """A module's run-time ``__all__`` (computed, so the ops packages hide it from mypy)."""
    return set(vars(module)["__all__"])


@pytest.mark.parametrize("name", sorted(_public(mo) & _public(to) - {"QuantizedWeight"}))
def test_functional_op_parameters_match(name: str) -> None:
    """Both runtimes take the same parameters, in the same order, of the same kind and default."""
    m_params = inspect.signature(getattr(mo, name)).parameters.values()
    t_params = inspect.signature(getattr(to, name)).parameters.values()
    assert [(p.name, p.kind, p.default) for p in m_params] == [
        (p.name, p.kind, p.default) for p in t_params
    ]


def test_every_mlx_op_has_a_torch_twin() -> None:
    assert _public(mo) <= _public(to), _public(mo) - _public(to)
