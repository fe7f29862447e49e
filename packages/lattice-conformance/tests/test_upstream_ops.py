"""The reference system's eight extra ops on both runtimes against brute-force NumPy oracles.

Each case draws a small random support (absent neighbours everywhere, two
batch items, negative coordinates), runs ``mlx_lattice.ops`` and
``torch_lattice.ops`` on identical inputs, and checks both against
``upstream_ops_oracle`` (the ops' definitions walked row by row) and against
each other: exact output coordinates as sets of rows, features to f32
rounding.  hypothesis draws the geometry (kernel sizes odd and even, strides,
padding, dilation, targets that are subsets and supersets of the derived
support); the worst error seen per op and runtime is printed by
``test_zz_report_worst_errors`` (run with ``-s``) for the issue's closing note.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TypedDict

import mlx.core as mx
import mlx_lattice
import mlx_lattice.ops as mo
import numpy as np
import pytest
import torch
import torch_lattice
import torch_lattice.ops as to
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import upstream_ops_oracle as oracle

Triple = tuple[int, int, int]
Sparse = mlx_lattice.SparseTensor | torch_lattice.SparseTensor


class Geometry(TypedDict):
    """The window keywords every conv-family and pool op takes."""

    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple


def _finer(stride: int, by: Triple) -> Triple:
    """The stride ``stride`` (the same on each axis) divided by ``by`` per axis."""
    return (stride // by[0], stride // by[1], stride // by[2])


WORST: dict[str, dict[str, float]] = defaultdict(lambda: {"mlx": 0.0, "torch": 0.0})
ATOL = 2e-5


def _logical_support(rng: np.random.Generator, rows: int, extent: int) -> np.ndarray:
    """Unique logical rows ``(batch, x, y, z)`` in ``[-extent, extent)`` over two batch items."""
    pts = np.stack(
        [rng.integers(0, 2, rows), *(rng.integers(-extent, extent, rows) for _ in range(3))],
        axis=1,
    )
    return np.unique(pts, axis=0).astype(np.int32)


def _pair(logical: np.ndarray, feats: np.ndarray, stride: Triple) -> tuple[Any, Any]:
    phys = (logical * np.array((1, *stride), dtype=np.int32)).astype(np.int32)
    return (
        mlx_lattice.SparseTensor(mx.array(phys), mx.array(feats), stride),
        torch_lattice.SparseTensor(
            torch.from_numpy(phys.copy()), torch.from_numpy(feats.copy()), stride
        ),
    )


def _rows_of(value: Any, stride: Triple) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Logical rows and f64 features of a result, sorted by row."""
    if isinstance(value, torch_lattice.SparseTensor):
        coords, feats = value.coords.numpy(), value.feats.detach().double().numpy()
    else:
        coords, feats = np.asarray(value.coords), np.asarray(value.feats.astype(mx.float32))
    logical = coords // np.array((1, *stride))
    order = np.lexsort(logical.T[::-1])
    return [tuple(int(v) for v in r) for r in logical[order]], feats[order].astype(np.float64)


def _check(
    op: str, results: dict[str, Any], stride: Triple, rows: list[Any], want: np.ndarray
) -> None:
    order = sorted(range(len(rows)), key=lambda i: rows[i])
    rows = [tuple(rows[i]) for i in order]
    want = want[order] if len(order) else want
    got = {}
    for runtime, value in results.items():
        assert value.stride == stride, f"{op} on {runtime}: stride {value.stride}, want {stride}"
        have_rows, have = _rows_of(value, stride)
        assert have_rows == rows, f"{op} on {runtime}: output rows differ from the oracle's"
        err = float(np.abs(have - want).max()) if have.size else 0.0
        WORST[op][runtime] = max(WORST[op][runtime], err)
        assert err <= ATOL * max(1.0, float(np.abs(want).max(initial=0.0))), (op, runtime, err)
        got[runtime] = have
    np.testing.assert_allclose(got["mlx"], got["torch"], rtol=1e-5, atol=ATOL)


def _target_rows(rng: np.random.Generator, derived: list[Any], extent: int) -> np.ndarray:
    """Half of the derived rows plus a few rows no input reaches."""
    keep = [r for r in derived if rng.random() < 0.5]
    extra = _logical_support(rng, 6, extent)
    rows = {tuple(r) for r in keep} | {tuple(int(v) for v in r) for r in extra}
    return np.array(sorted(rows), dtype=np.int32).reshape(-1, 4)


geometry = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
small = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))
pads = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1))


# --------------------------------------------------------------------- normalised


@settings(max_examples=12, deadline=None)
@given(kernel=geometry, dilation=small, seed=st.integers(0, 2**16), bias=st.booleans())
def test_normalized_subm_conv3d(kernel: Triple, dilation: Triple, seed: int, bias: bool) -> None:
    rng = np.random.default_rng(seed)
    logical = _logical_support(rng, 40, 4)
    x = rng.standard_normal((len(logical), 3)).astype(np.float32)
    w = rng.standard_normal((4, *kernel, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32) if bias else None
    m, t = _pair(logical, x, (1, 1, 1))
    got = {
        "mlx": mo.normalized_subm_conv3d(
            m,
            mx.array(w),
            None if b is None else mx.array(b),
            kernel_size=kernel,
            dilation=dilation,
        ),
        "torch": to.normalized_subm_conv3d(
            t,
            torch.from_numpy(w),
            None if b is None else torch.from_numpy(b),
            kernel_size=kernel,
            dilation=dilation,
        ),
    }
    want = oracle.normalized_subm(logical, x, w, b, kernel, dilation, 1e-8)
    _check("normalized_subm_conv3d", got, (1, 1, 1), [tuple(r) for r in logical], want)


def test_pointwise_normalized_subm_is_plain_subm() -> None:
    """1x1x1, d=1: no normalisation (upstream's behaviour), so the weight's scale shows."""
    rng = np.random.default_rng(3)
    logical = _logical_support(rng, 20, 3)
    x = rng.standard_normal((len(logical), 2)).astype(np.float32)
    w = 10 * rng.standard_normal((3, 1, 1, 1, 2)).astype(np.float32)
    m, t = _pair(logical, x, (1, 1, 1))
    want = x.astype(np.float64) @ w[:, 0, 0, 0, :].T.astype(np.float64)
    got = {
        "mlx": mo.normalized_subm_conv3d(m, mx.array(w), kernel_size=1),
        "torch": to.normalized_subm_conv3d(t, torch.from_numpy(w), kernel_size=1),
    }
    _check("normalized_subm_conv3d", got, (1, 1, 1), [tuple(r) for r in logical], want)


@settings(max_examples=12, deadline=None)
@given(
    kernel=geometry,
    stride=small,
    padding=pads,
    dilation=small,
    seed=st.integers(0, 2**16),
    use_target=st.booleans(),
)
def test_normalized_conv_transpose3d(
    kernel: Triple, stride: Triple, padding: Triple, dilation: Triple, seed: int, use_target: bool
) -> None:
    rng = np.random.default_rng(seed)
    in_stride: Triple = (2, 2, 2)
    out_stride = _finer(2, stride)
    logical = _logical_support(rng, 25, 3)
    x = rng.standard_normal((len(logical), 2)).astype(np.float32)
    w = rng.standard_normal((3, *kernel, 2)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    m, t = _pair(logical, x, in_stride)
    geom = Geometry(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    derived = sorted(oracle.transposed_pairs(logical, kernel, stride, padding, dilation))
    kw_m: dict[str, Any] = {}
    kw_t: dict[str, Any] = {}
    target = None
    if use_target:
        target_rows = _target_rows(rng, derived, 6)
        target = oracle.rows_of(target_rows)
        zeros = np.zeros((len(target_rows), 1), np.float32)
        kw_m["coordinates"], kw_t["coordinates"] = _pair(target_rows, zeros, out_stride)
    got = {
        "mlx": mo.normalized_conv_transpose3d(m, mx.array(w), mx.array(b), **geom, **kw_m),
        "torch": to.normalized_conv_transpose3d(
            t, torch.from_numpy(w), torch.from_numpy(b), **geom, **kw_t
        ),
    }
    rows, want = oracle.normalized_transposed(
        logical, x, w, b, kernel, stride, padding, dilation, 1e-8, target
    )
    _check(
        "normalized_conv_transpose3d" if target is None else "target_normalized_conv_transpose3d",
        got,
        out_stride,
        rows,
        want,
    )


@settings(max_examples=10, deadline=None)
@given(kernel=geometry, stride=small, seed=st.integers(0, 2**16))
def test_normalized_generative_conv_transpose3d(kernel: Triple, stride: Triple, seed: int) -> None:
    """s < K makes several (input, tap) pairs land on one output: they are summed into one row."""
    rng = np.random.default_rng(seed)
    logical = _logical_support(rng, 20, 3)
    x = rng.standard_normal((len(logical), 2)).astype(np.float32)
    w = rng.standard_normal((3, *kernel, 2)).astype(np.float32)
    m, t = _pair(logical, x, (2, 2, 2))
    out_stride = _finer(2, stride)
    got = {
        "mlx": mo.normalized_generative_conv_transpose3d(
            m, mx.array(w), kernel_size=kernel, stride=stride
        ),
        "torch": to.normalized_generative_conv_transpose3d(
            t, torch.from_numpy(w), kernel_size=kernel, stride=stride
        ),
    }
    rows, want = oracle.normalized_transposed(
        logical, x, w, None, kernel, stride, (0, 0, 0), (1, 1, 1), 1e-8
    )
    _check("normalized_generative_conv_transpose3d", got, out_stride, rows, want)


# ------------------------------------------------------------------- upsampling


@settings(max_examples=12, deadline=None)
@given(
    kernel=geometry,
    stride=small,
    padding=pads,
    dilation=small,
    seed=st.integers(0, 2**16),
    use_target=st.booleans(),
)
def test_pool_transpose3d(
    kernel: Triple, stride: Triple, padding: Triple, dilation: Triple, seed: int, use_target: bool
) -> None:
    rng = np.random.default_rng(seed)
    logical = _logical_support(rng, 25, 3)
    x = rng.standard_normal((len(logical), 3)).astype(np.float32)
    m, t = _pair(logical, x, (2, 2, 2))
    out_stride = _finer(2, stride)
    geom = Geometry(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    target = None
    kw_m: dict[str, Any] = {}
    kw_t: dict[str, Any] = {}
    if use_target:
        derived = sorted(oracle.transposed_pairs(logical, kernel, stride, padding, dilation))
        target_rows = _target_rows(rng, derived, 6)
        target = oracle.rows_of(target_rows)
        zeros = np.zeros((len(target_rows), 1), np.float32)
        kw_m["coordinates"], kw_t["coordinates"] = _pair(target_rows, zeros, out_stride)
    got = {
        "mlx": mo.pool_transpose3d(m, **geom, **kw_m),
        "torch": to.pool_transpose3d(t, **geom, **kw_t),
    }
    rows, want = oracle.pool_transpose(logical, x, kernel, stride, padding, dilation, target)
    _check("pool_transpose3d", got, out_stride, rows, want)


@settings(max_examples=12, deadline=None)
@given(
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)),
    seed=st.integers(0, 2**16),
    use_target=st.booleans(),
)
def test_trilinear_upsample3d(stride: Triple, seed: int, use_target: bool) -> None:
    rng = np.random.default_rng(seed)
    in_stride = (6, 6, 6)
    out_stride = _finer(6, stride)
    logical = _logical_support(rng, 18, 3)
    x = rng.standard_normal((len(logical), 2)).astype(np.float32)
    m, t = _pair(logical, x, in_stride)
    target = None
    kw_m: dict[str, Any] = {}
    kw_t: dict[str, Any] = {}
    if use_target:
        derived, _ = oracle.trilinear(logical, x, stride)
        target_rows = _target_rows(rng, derived, 9)
        target = oracle.rows_of(target_rows)
        zeros = np.zeros((len(target_rows), 1), np.float32)
        kw_m["coordinates"], kw_t["coordinates"] = _pair(target_rows, zeros, out_stride)
    got = {
        "mlx": mo.trilinear_upsample3d(m, stride=stride, **kw_m),
        "torch": to.trilinear_upsample3d(t, stride=stride, **kw_t),
    }
    rows, want = oracle.trilinear(logical, x, stride, target)
    _check("trilinear_upsample3d", got, out_stride, rows, want)


def test_trilinear_exact_at_coarse_rows_and_midpoints() -> None:
    """A coarse row reproduces itself; a midpoint between two present rows is their mean."""
    logical = np.array([[0, 0, 0, 0], [0, 1, 0, 0]], np.int32)
    x = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    m, t = _pair(logical, x, (2, 1, 1))
    target = np.array(
        [[0, 0, 0, 0], [0, 1, 0, 0], [0, 2, 0, 0], [0, 3, 0, 0], [0, 7, 0, 0]], np.int32
    )
    want = np.array([[1, -2], [2, 1], [3, 4], [3, 4], [0, 0]], np.float64)
    tm, tt = _pair(target, np.zeros((5, 1), np.float32), (1, 1, 1))
    got = {
        "mlx": mo.trilinear_upsample3d(m, stride=(2, 1, 1), coordinates=tm),
        "torch": to.trilinear_upsample3d(t, stride=(2, 1, 1), coordinates=tt),
    }
    _check("trilinear_upsample3d", got, (1, 1, 1), [tuple(r) for r in target], want)


# ------------------------------------------------------------- dense feature ops


def test_embedding_lookup_and_range_errors() -> None:
    rng = np.random.default_rng(5)
    table = rng.standard_normal((7, 3)).astype(np.float32)
    idx = np.array([0, 6, 3, 3, 1], np.int32)
    want = table[idx].astype(np.float64)
    got_m = np.asarray(mo.embedding_lookup(mx.array(idx), mx.array(table)))
    got_t = to.embedding_lookup(torch.from_numpy(idx), torch.from_numpy(table)).numpy()
    for runtime, have in (("mlx", got_m), ("torch", got_t)):
        err = float(np.abs(have - want).max())
        WORST["embedding_lookup"][runtime] = max(WORST["embedding_lookup"][runtime], err)
        assert err == 0.0
    bad = np.array([2, 7, -1], np.int32)
    messages = []
    for call in (
        lambda: mo.embedding_lookup(mx.array(bad), mx.array(table)),
        lambda: to.embedding_lookup(torch.from_numpy(bad), torch.from_numpy(table)),
    ):
        with pytest.raises(IndexError, match=r"index 7 \(position 1\) is out of range") as info:
            call()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_elementwise_exp_and_round_half_to_even() -> None:
    x = np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, 2.4999998, 3.7, -2.5]], np.float32)
    for kind, ref in (("round", np.round), ("exp", np.exp)):
        want = ref(x.astype(np.float64)) if kind == "exp" else ref(x).astype(np.float64)
        got = {
            "mlx": np.asarray(mo.elementwise(mx.array(x), kind=kind)),
            "torch": to.elementwise(torch.from_numpy(x), kind=kind).numpy(),
        }
        for runtime, have in got.items():
            err = float(np.abs(have - want).max() / (1 if kind == "round" else np.abs(want).max()))
            WORST[f"elementwise[{kind}]"][runtime] = max(
                WORST[f"elementwise[{kind}]"][runtime], err
            )
            assert err <= (0.0 if kind == "round" else 1e-6), (kind, runtime, err)
    for call in (
        lambda: mo.elementwise(mx.array(x).astype(mx.float16), kind="exp"),
        lambda: to.elementwise(torch.from_numpy(x).half(), kind="exp"),
    ):
        with pytest.raises(TypeError, match="float32"):
            call()
    for call in (
        lambda: mo.elementwise(mx.array(x), kind="log"),
        lambda: to.elementwise(torch.from_numpy(x), kind="log"),
    ):
        with pytest.raises(ValueError, match="kind must be one of 'exp', 'round'"):
            call()


# --------------------------------------------------------------------- refusals


def test_bad_arguments_are_refused_alike() -> None:
    logical = np.array([[0, 0, 0, 0], [0, 1, 0, 0]], np.int32)
    x = np.ones((2, 2), np.float32)
    m, t = _pair(logical, x, (1, 1, 1))
    w = np.ones((2, 3, 3, 3, 2), np.float32)
    cases = [
        (
            lambda: mo.normalized_subm_conv3d(m, mx.array(w), kernel_size=3, eps=0.0),
            lambda: to.normalized_subm_conv3d(t, torch.from_numpy(w), kernel_size=3, eps=0.0),
            ValueError,
            "eps must be a positive",
        ),
        (
            lambda: mo.normalized_conv_transpose3d(m, mx.array(w), kernel_size=3, stride=2),
            lambda: to.normalized_conv_transpose3d(t, torch.from_numpy(w), kernel_size=3, stride=2),
            ValueError,
            "must divide the input stride",
        ),
        (
            lambda: mo.trilinear_upsample3d(m, stride=2),
            lambda: to.trilinear_upsample3d(t, stride=2),
            ValueError,
            "must divide the input stride",
        ),
        (
            lambda: mo.normalized_subm_conv3d(
                m,
                # A packed weight on purpose: the op refuses it.
                mo.quantize_weight(mx.ones((2, 3, 3, 3, 32)), bits=8, group_size=32),  # type: ignore[arg-type]
                kernel_size=3,
            ),
            lambda: to.normalized_subm_conv3d(
                t,
                # A packed weight on purpose: the op refuses it.
                to.quantize_weight(torch.ones(2, 3, 3, 3, 32), bits=8, group_size=32),  # type: ignore[arg-type]
                kernel_size=3,
            ),
            TypeError,
            "packed \\(quantized\\) weights are not allowed",
        ),
    ]
    for call_m, call_t, error, words in cases:
        texts = []
        for call in (call_m, call_t):
            with pytest.raises(error, match=words) as info:
                call()
            texts.append(str(info.value))
        assert texts[0] == texts[1], texts


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_precision_sums_in_f32(dtype: str) -> None:
    """f16/bf16 storage: products summed in f32, one rounding at the end (both runtimes)."""
    rng = np.random.default_rng(11)
    logical = _logical_support(rng, 40, 3)
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    mdt = {"f16": mx.float16, "bf16": mx.bfloat16}[dtype]
    x = torch.from_numpy(rng.standard_normal((len(logical), 3)).astype(np.float32)).to(tdt)
    w = torch.from_numpy(rng.standard_normal((2, 3, 3, 3, 3)).astype(np.float32)).to(tdt)
    xf, wf = x.float().numpy(), w.float().numpy()
    phys = logical.copy()
    mx_in = mlx_lattice.SparseTensor(mx.array(phys), mx.array(xf).astype(mdt))
    t_in = torch_lattice.SparseTensor(torch.from_numpy(phys), x)
    got: dict[str, Sparse] = {
        "mlx": mo.normalized_subm_conv3d(mx_in, mx.array(wf).astype(mdt), kernel_size=3),
        "torch": to.normalized_subm_conv3d(t_in, w, kernel_size=3),
    }
    want = oracle.normalized_subm(logical, xf, wf, None, (3, 3, 3), (1, 1, 1), 1e-8)
    tol = {"f16": 2e-3, "bf16": 1.6e-2}[dtype]
    for runtime, value in got.items():
        assert value.dtype == (mdt if runtime == "mlx" else tdt)
        _, have = _rows_of(value, (1, 1, 1))
        order = np.lexsort(logical.T[::-1])
        np.testing.assert_allclose(have, want[order], rtol=tol, atol=tol)


def test_zz_report_worst_errors() -> None:
    """Print the worst |error| against the oracle per op and runtime (for the closing note)."""
    assert WORST, "the oracle tests above did not run"
    for op in sorted(WORST):
        print(f"{op:42s} mlx {WORST[op]['mlx']:.3g}  torch {WORST[op]['torch']:.3g}")
