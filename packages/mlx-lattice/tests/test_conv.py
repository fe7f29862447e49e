"""Sparse convolutions against dense PyTorch convolutions on small grids (SPEC §5, §10)."""

from __future__ import annotations

import weakref

import mlx.core as mx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_conformance.metrics import Tolerance
from mlx_lattice import SparseTensor, ops
from mlx_lattice.kernel_map import KernelMap
from mlx_lattice.ops import conv as conv_module
from mlx_lattice.ops.quant import quantize_weight
from mlx_sparse_oracle import (
    Triple,
    centred_padding,
    densify,
    logical_rows,
    make_sparse,
    oracle_centred_conv3d,
    oracle_conv3d,
    oracle_conv_transpose3d,
    random_weight,
    read_rows,
    sort_rows,
    to_np,
    tolerance,
    triples,
)

EXAMPLES = settings(max_examples=30, deadline=None)
DTYPES = st.sampled_from([mx.float32, mx.float16])


@st.composite
def geometry(draw: st.DrawFn) -> dict[str, object]:
    """Kernel 1-4 (odd and even), stride 1-2, dilation 1-2, padding 0-2, batch 1-3."""
    return {
        "k": draw(triples(1, 4)),
        "s": draw(triples(1, 2)),
        "d": draw(triples(1, 2)),
        "p": draw(triples(0, 2)),
        "batch": draw(st.integers(1, 3)),
        "seed": draw(st.integers(0, 2**31 - 1)),
        "c_in": draw(st.integers(1, 4)),
        "c_out": draw(st.integers(1, 4)),
    }


def _rows_in_order(y: SparseTensor, rows: np.ndarray) -> np.ndarray:
    """Output feature rows, reordered to ``rows`` (sorted logical coordinates)."""
    got = logical_rows(y)
    order = np.lexsort(got.T[::-1])
    np.testing.assert_array_equal(got[order], rows)
    return to_np(y.feats)[order]


@EXAMPLES
@given(g=geometry(), dtype=DTYPES, t=st.sampled_from([1, 2]), bias=st.booleans())
def test_full_conv3d_matches_dense_torch(g: dict, dtype: mx.Dtype, t: int, bias: bool) -> None:
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    x = make_sparse(
        rng, batch=g["batch"], extent=5, stride=(t, t, t), channels=g["c_in"], density=0.15,
        dtype=dtype,
    )  # fmt: skip
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    b = mx.array(rng.standard_normal(g["c_out"]).astype(np.float32)).astype(dtype) if bias else None
    y = ops.full_conv3d(x, w, b, kernel_size=k, stride=s, padding=p, dilation=d)
    assert y.stride == (t * s[0], t * s[1], t * s[2])
    assert y.dtype == dtype
    support, dense, shift, _ = oracle_conv3d(x, w, k, s, p, d)
    feats = _rows_in_order(y, support)
    expected = read_rows(dense, support, shift)
    if b is not None:
        expected = expected + to_np(b)
    np.testing.assert_allclose(feats, expected, **tolerance(dtype))


@EXAMPLES
@given(g=geometry(), dtype=DTYPES, t=st.sampled_from([1, 2]), bias=st.booleans())
def test_conv3d_is_dense_centred_conv_on_the_coarsened_support(
    g: dict, dtype: mx.Dtype, t: int, bias: bool
) -> None:
    """conv3d == dense conv with padding K//2*d + p (odd K; p for even K) at every floor(c/s)."""
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    x = make_sparse(
        rng, batch=g["batch"], extent=5, stride=(t, t, t), channels=g["c_in"], density=0.15,
        dtype=dtype,
    )  # fmt: skip
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    b = mx.array(rng.standard_normal(g["c_out"]).astype(np.float32)).astype(dtype) if bias else None
    y = ops.conv3d(x, w, b, kernel_size=k, stride=s, padding=p, dilation=d)
    assert y.stride == (t * s[0], t * s[1], t * s[2])
    if s == (1, 1, 1):  # stride 1 keeps exactly the input rows, in input order
        np.testing.assert_array_equal(to_np(y.coords), to_np(x.coords))
    support, expected, _ = oracle_centred_conv3d(x, w, k, s, p, d)
    feats = _rows_in_order(y, support)
    if b is not None:
        expected = expected + to_np(b)
    np.testing.assert_allclose(feats, expected, **tolerance(dtype))


def _one_rounding(dtype: mx.Dtype) -> Tolerance:
    """Two ops whose f32 sums agree but are added in another order, each rounded once to
    ``dtype``: equal to within one unit in the last place of that dtype (f16 and bf16
    results can differ by it; f32 ones only by the sums' own order)."""
    ulp = {mx.float16: 2.0**-10, mx.bfloat16: 2.0**-7}.get(dtype, 1e-6)
    return {"rtol": ulp, "atol": 1e-6}


@EXAMPLES
@given(g=geometry(), dtype=DTYPES, t=st.sampled_from([1, 2]))
def test_subm_conv3d_matches_dense_and_padded_conv3d(g: dict, dtype: mx.Dtype, t: int) -> None:
    rng = np.random.default_rng(g["seed"])
    k, d = g["k"], g["d"]
    x = make_sparse(
        rng, batch=g["batch"], extent=5, stride=(t, t, t), channels=g["c_in"], density=0.2,
        dtype=dtype,
    )  # fmt: skip
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    y = ops.subm_conv3d(x, w, kernel_size=k, dilation=d)
    np.testing.assert_array_equal(to_np(y.coords), to_np(x.coords))  # same rows, same order
    assert y.stride == x.stride
    # Dense oracle: the padded stride-1 conv read at the input rows.
    half = ((k[0] - 1) // 2 * d[0], (k[1] - 1) // 2 * d[1], (k[2] - 1) // 2 * d[2])
    _, dense, shift, _ = oracle_conv3d(x, w, k, (1, 1, 1), half, d)
    expected = read_rows(dense, logical_rows(x), shift)
    np.testing.assert_allclose(to_np(y.feats), expected, **tolerance(dtype))
    # SPEC §5 identity: conv3d(s=1, p=floor((K-1)/2)*d) on the input rows equals subm.
    full = ops.full_conv3d(x, w, kernel_size=k, stride=1, padding=half, dilation=d)
    on_rows = ops.conv3d(x, w, kernel_size=k, dilation=d, coordinates=x)
    if all(v % 2 for v in k):  # odd kernels: the centred rule is the subm rule
        np.testing.assert_allclose(to_np(on_rows.feats), to_np(y.feats), **_one_rounding(dtype))
        same = ops.conv3d(x, w, kernel_size=k, dilation=d)
        np.testing.assert_array_equal(to_np(same.coords), to_np(x.coords))
        np.testing.assert_array_equal(to_np(same.feats), to_np(y.feats))
    rows = logical_rows(full)
    key = {tuple(r): i for i, r in enumerate(rows.tolist())}
    pick = np.asarray([key[tuple(r)] for r in logical_rows(x).tolist()])
    np.testing.assert_allclose(to_np(full.feats)[pick], to_np(y.feats), **_one_rounding(dtype))


@EXAMPLES
@given(g=geometry(), dtype=DTYPES, bias=st.booleans())
def test_conv_transpose3d_matches_dense_torch(g: dict, dtype: mx.Dtype, bias: bool) -> None:
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    t = tuple(2 * v for v in s)  # input stride a multiple of s: output stride t/s = 2
    x = make_sparse(
        rng, batch=g["batch"], extent=4, stride=t, channels=g["c_in"], density=0.15, dtype=dtype
    )
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    b = mx.array(rng.standard_normal(g["c_out"]).astype(np.float32)).astype(dtype) if bias else None
    y = ops.conv_transpose3d(x, w, b, kernel_size=k, stride=s, padding=p, dilation=d)
    assert y.stride == (2, 2, 2)
    support, dense, shift = oracle_conv_transpose3d(x, w, k, s, p, d)
    feats = _rows_in_order(y, support)
    expected = read_rows(dense, support, shift)
    if b is not None:
        expected = expected + to_np(b)
    np.testing.assert_allclose(feats, expected, **tolerance(dtype))


@EXAMPLES
@given(g=geometry(), dtype=DTYPES)
def test_target_conv3d_matches_dense_at_every_target_row(g: dict, dtype: mx.Dtype) -> None:
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    x = make_sparse(
        rng, batch=g["batch"], extent=5, stride=(1, 1, 1), channels=g["c_in"], density=0.2,
        dtype=dtype,
    )  # fmt: skip
    target = make_sparse(rng, batch=g["batch"], extent=4, stride=s, channels=1, density=0.3)
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    b = mx.array(rng.standard_normal(g["c_out"]).astype(np.float32)).astype(dtype)
    y = ops.conv3d(x, w, b, kernel_size=k, stride=s, padding=p, dilation=d, coordinates=target)
    np.testing.assert_array_equal(to_np(y.coords), to_np(target.coords))
    assert y.stride == target.stride
    _, dense, shift, _ = oracle_conv3d(x, w, k, s, centred_padding(k, p, d), d)
    pad = np.zeros((dense.shape[0], dense.shape[1], *(n + 8 for n in dense.shape[2:])))
    pad[:, :, : dense.shape[2], : dense.shape[3], : dense.shape[4]] = dense.numpy()
    rows = logical_rows(target)
    rows = rows[rows[:, 0] < dense.shape[0]]  # batch items the input lacks read nothing
    expected = read_rows(torch.as_tensor(pad), rows, shift) + to_np(b)
    mask = logical_rows(target)[:, 0] < dense.shape[0]
    feats = to_np(y.feats)
    np.testing.assert_allclose(feats[mask], expected, **tolerance(dtype))
    np.testing.assert_allclose(feats[~mask], np.broadcast_to(to_np(b), feats[~mask].shape))


@EXAMPLES
@given(g=geometry(), dtype=DTYPES)
def test_target_conv_transpose3d_matches_dense_at_every_target_row(
    g: dict, dtype: mx.Dtype
) -> None:
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    x = make_sparse(
        rng, batch=g["batch"], extent=4, stride=s, channels=g["c_in"], density=0.2, dtype=dtype
    )
    target = make_sparse(rng, batch=g["batch"], extent=7, stride=(1, 1, 1), channels=1,
                         density=0.2)  # fmt: skip
    w = random_weight(rng, g["c_out"], k, g["c_in"], dtype)
    y = ops.conv_transpose3d(
        x, w, kernel_size=k, stride=s, padding=p, dilation=d, coordinates=target
    )
    np.testing.assert_array_equal(to_np(y.coords), to_np(target.coords))
    _, dense, shift = oracle_conv_transpose3d(x, w, k, s, p, d)
    big = np.zeros((3, dense.shape[1], *(n + 16 for n in dense.shape[2:])))
    big[: dense.shape[0], :, : dense.shape[2], : dense.shape[3], : dense.shape[4]] = dense.numpy()
    expected = read_rows(torch.as_tensor(big), logical_rows(target), shift)
    np.testing.assert_allclose(to_np(y.feats), expected, **tolerance(dtype))


@EXAMPLES
@given(
    k=triples(1, 4), s=triples(1, 2), seed=st.integers(0, 2**31 - 1), dtype=DTYPES,
    batch=st.integers(1, 3),
)  # fmt: skip
def test_generative_conv_transpose3d_emits_every_tap(
    k: Triple, s: Triple, seed: int, dtype: mx.Dtype, batch: int
) -> None:
    rng = np.random.default_rng(seed)
    x = make_sparse(rng, batch=batch, extent=4, stride=s, channels=2, density=0.2, dtype=dtype)
    w = random_weight(rng, 3, k, 2, dtype)
    y = ops.generative_conv_transpose3d(x, w, kernel_size=k, stride=s)
    assert y.stride == (1, 1, 1)
    # Support: every c*s + k (logical), independently enumerated.
    logical = logical_rows(x)
    taps = np.stack(np.meshgrid(*(np.arange(v) for v in k), indexing="ij"), -1).reshape(-1, 3)
    cand = (logical[:, None, 1:] * np.asarray(s) + taps[None]).reshape(-1, 3)
    cand = np.concatenate([np.repeat(logical[:, :1], len(taps), axis=0), cand], axis=1)
    np.testing.assert_array_equal(sort_rows(logical_rows(y)), sort_rows(np.unique(cand, axis=0)))
    same = ops.conv_transpose3d(x, w, kernel_size=k, stride=s, padding=0, dilation=1)
    np.testing.assert_array_equal(to_np(same.coords), to_np(y.coords))
    np.testing.assert_array_equal(to_np(same.feats), to_np(y.feats))


@EXAMPLES
@given(g=geometry(), family=st.sampled_from(["full", "conv", "subm", "transpose"]))
def test_all_ones_counts_contributing_pairs(g: dict, family: str) -> None:
    """On all-ones features and weights each output row equals its number of (input, tap) pairs."""
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    t = s if family == "transpose" else (1, 1, 1)
    x = make_sparse(rng, batch=g["batch"], extent=5, stride=t, channels=g["c_in"], density=0.25)
    x = x.with_feats(mx.ones((x.num_rows, g["c_in"])))
    w = mx.ones((1, *k, g["c_in"]))
    if family == "conv":  # every coarsened row holds its count (possibly 0)
        y = ops.conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
        support, _, counts = oracle_centred_conv3d(x, w, k, s, p, d)
        np.testing.assert_array_equal(_rows_in_order(y, support)[:, 0], counts * g["c_in"])
        return
    if family == "full":
        y = ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
        support, _, shift, count = oracle_conv3d(x, w, k, s, p, d)
    elif family == "subm":
        y = ops.subm_conv3d(x, w, kernel_size=k, dilation=d)
        half = ((k[0] - 1) // 2 * d[0], (k[1] - 1) // 2 * d[1], (k[2] - 1) // 2 * d[2])
        _, _, shift, count = oracle_conv3d(x, w, k, (1, 1, 1), half, d)
        support = sort_rows(logical_rows(x))
    else:
        y = ops.conv_transpose3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
        support, _, shift = oracle_conv_transpose3d(x, w, k, s, p, d)
        hi = logical_rows(x)[:, 1:].max(0) + 1
        occ = densify(x, (0, 0, 0), (int(hi[0]), int(hi[1]), int(hi[2])))
        count = torch.nn.functional.conv_transpose3d(
            occ.occupancy, torch.ones((1, 1, *k), dtype=torch.float64), stride=s, dilation=d
        ).numpy()
    feats = _rows_in_order(y, support)
    expected = read_rows(torch.as_tensor(count), support, shift)[:, 0] * g["c_in"]
    np.testing.assert_array_equal(feats[:, 0], expected)
    assert (expected > 0).all()


@EXAMPLES
@given(g=geometry(), dtype=DTYPES)
def test_transpose_is_adjoint_of_full_conv3d(g: dict, dtype: mx.Dtype) -> None:
    """<full_conv3d(x), y> == <x, conv_transpose3d(y)>, matching supports, swapped channels."""
    rng = np.random.default_rng(g["seed"])
    k, s, p, d = g["k"], g["s"], g["p"], g["d"]
    x = make_sparse(rng, batch=g["batch"], extent=5, stride=(1, 1, 1), channels=g["c_in"],
                    density=0.2)  # fmt: skip
    w = random_weight(rng, g["c_out"], k, g["c_in"])
    fx = ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
    y = fx.with_feats(mx.array(rng.standard_normal(fx.shape).astype(np.float32)).astype(dtype))
    w_t = w.transpose(4, 1, 2, 3, 0).astype(dtype)  # (C_in, K..., C_out)
    back = ops.conv_transpose3d(y, w_t, kernel_size=k, stride=s, padding=p, dilation=d,
                                coordinates=x)  # fmt: skip
    lhs = float(np.sum(to_np(fx.feats) * to_np(y.feats)))
    rhs = float(np.sum(to_np(x.feats) * to_np(back.feats)))
    scale = 1.0 + float(np.abs(to_np(fx.feats)).sum() * np.abs(to_np(y.feats)).max(initial=0.0))
    assert abs(lhs - rhs) <= (1e-5 if dtype == mx.float32 else 5e-3) * scale
    # The derived-support transpose restricted to x's rows gives the same values.
    free = ops.conv_transpose3d(y, w_t, kernel_size=k, stride=s, padding=p, dilation=d)
    # Rows of x that no tap reaches are absent from the free support and zero in the target form.
    free_feats = to_np(free.feats)
    free_rows = {tuple(r): free_feats[i] for i, r in enumerate(logical_rows(free).tolist())}
    zero = np.zeros(g["c_in"])
    expected = np.stack([free_rows.get(tuple(r), zero) for r in logical_rows(x).tolist()])
    np.testing.assert_allclose(expected, to_np(back.feats), rtol=1e-6, atol=1e-6)


def test_float_accumulation_is_f32_for_half_storage(rng: np.random.Generator) -> None:
    """Sums of many f16 products are not rounded to f16 between taps."""
    x = make_sparse(rng, batch=1, extent=6, stride=(1, 1, 1), channels=8, density=0.6,
                    dtype=mx.float16)  # fmt: skip
    w = random_weight(rng, 4, (3, 3, 3), 8, mx.float16)
    y16 = ops.subm_conv3d(x, w, kernel_size=3)
    y32 = ops.subm_conv3d(x.astype(mx.float32), w.astype(mx.float32), kernel_size=3)
    np.testing.assert_array_equal(to_np(y16.feats), to_np(y32.feats.astype(mx.float16)))


def test_bfloat16_storage(rng: np.random.Generator) -> None:
    x = make_sparse(rng, batch=2, extent=5, stride=(1, 1, 1), channels=3, density=0.3,
                    dtype=mx.bfloat16)  # fmt: skip
    w = random_weight(rng, 2, (2, 2, 2), 3, mx.bfloat16)
    y = ops.conv3d(x, w, kernel_size=2, stride=2)
    ref = ops.conv3d(x.astype(mx.float32), w.astype(mx.float32), kernel_size=2, stride=2)
    assert y.dtype == mx.bfloat16
    np.testing.assert_array_equal(to_np(y.feats), to_np(ref.feats.astype(mx.bfloat16)))


def test_quantized_weight_equals_its_dequantized_weight(rng: np.random.Generator) -> None:
    x = make_sparse(rng, batch=2, extent=6, stride=(1, 1, 1), channels=64, density=0.2)
    w = random_weight(rng, 16, (3, 3, 3), 64)
    for bits in (4, 8):
        q = quantize_weight(w, bits=bits, group_size=32)
        deq = q.dequantize().astype(mx.float32)
        for run in (
            lambda weight: ops.subm_conv3d(x, weight, kernel_size=3),
            lambda weight: ops.conv3d(x, weight, kernel_size=3, stride=2),
            lambda weight: ops.conv_transpose3d(x, weight, kernel_size=3, stride=1, padding=1),
        ):
            got, ref = run(q), run(deq)
            np.testing.assert_array_equal(to_np(got.coords), to_np(ref.coords))
            np.testing.assert_allclose(to_np(got.feats), to_np(ref.feats), rtol=1e-4, atol=1e-4)


def test_chunked_gathers_give_the_same_result(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = make_sparse(rng, batch=2, extent=8, stride=(1, 1, 1), channels=4, density=0.5)
    w = random_weight(rng, 3, (3, 3, 3), 4)
    whole = ops.subm_conv3d(x, w, kernel_size=3)
    monkeypatch.setattr(conv_module, "GATHER_BUFFER_ELEMENTS", 1)
    assert conv_module.chunk_rows(4) == 1024 and x.num_rows > 1024 // 4
    monkeypatch.setattr(conv_module, "chunk_rows", lambda channels: 7)
    chunked = ops.subm_conv3d(x.with_feats(x.feats), w, kernel_size=3)
    np.testing.assert_allclose(to_np(chunked.feats), to_np(whole.feats), rtol=1e-6, atol=1e-6)


def _kind(key: object) -> object:
    """The relation kind of a kernel-map cache key (``("subm", ...)``)."""
    assert isinstance(key, tuple)
    return key[0]


def test_kernel_maps_are_shared_within_a_support(rng: np.random.Generator) -> None:
    x = make_sparse(rng, batch=1, extent=6, stride=(1, 1, 1), channels=2, density=0.3)
    w = random_weight(rng, 2, (3, 3, 3), 2)
    y1 = ops.subm_conv3d(x, w, kernel_size=3)
    y2 = ops.subm_conv3d(y1, w, kernel_size=3)  # same support: the map is reused
    assert y1.cache is x.cache and y2.cache is x.cache
    assert len([key for key in x.cache.relations if _kind(key) == "subm"]) == 1
    w2 = random_weight(rng, 2, (2, 2, 2), 2)
    down = ops.conv3d(x, w2, kernel_size=2, stride=2)
    again = ops.conv3d(x.with_feats(x.feats * 2), w2, kernel_size=2, stride=2)
    assert again.cache is down.cache
    np.testing.assert_array_equal(to_np(again.coords), to_np(down.coords))
    up = ops.conv_transpose3d(down, w2, kernel_size=2, stride=2, coordinates=x)
    key = ("target_transpose", (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), weakref.ref(x.cache))
    assert key in down.cache.relations  # the forward map, reused transposed
    assert up.cache is x.cache


def test_empty_input_gives_empty_outputs() -> None:
    x = SparseTensor(mx.zeros((0, 4), dtype=mx.int32), mx.zeros((0, 3)))
    w = mx.ones((2, 3, 3, 3, 3))
    for y in (
        ops.subm_conv3d(x, w, kernel_size=3),
        ops.conv3d(x, w, kernel_size=3, stride=2),
        ops.conv_transpose3d(x, w, kernel_size=3),
        ops.generative_conv_transpose3d(x, w, kernel_size=3),
    ):
        assert y.shape == (0, 2)
    target = SparseTensor(mx.array([[0, 2, 2, 2]], dtype=mx.int32), mx.zeros((1, 1)))
    y = ops.conv3d(x, w, mx.array([1.0, 2.0]), kernel_size=3, coordinates=target)
    np.testing.assert_array_equal(to_np(y.feats), [[1.0, 2.0]])


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda x, w: ops.conv3d(x.feats, w, kernel_size=3), TypeError, "SparseTensor"),
        (lambda x, w: ops.conv3d(x, w[:, :2], kernel_size=3), ValueError, "expected (C_out, 3"),
        (lambda x, w: ops.conv3d(x, w[..., :1], kernel_size=3), ValueError, "C_in"),
        (lambda x, w: ops.conv3d(x, w.astype(mx.int32), kernel_size=3), TypeError, "f32"),
        (lambda x, w: ops.conv3d(x, w.tolist(), kernel_size=3), TypeError, "QuantizedWeight"),
        (lambda x, w: ops.conv3d(x, w, mx.ones((3,)), kernel_size=3), ValueError, "bias"),
        (lambda x, w: ops.conv3d(x, w, kernel_size=3, stride=0), ValueError, "stride"),
        (lambda x, w: ops.conv3d(x, w, kernel_size=3, padding=-1), ValueError, "padding"),
        (lambda x, w: ops.conv3d(x, w, kernel_size=(3, 3)), ValueError, "kernel_size"),
        (lambda x, w: ops.conv3d(x, w, kernel_size=3, dilation=True), TypeError, "dilation"),
        (
            lambda x, w: ops.conv3d(x, w, kernel_size=3, stride=2, coordinates=x),
            ValueError,
            "stride (2, 2, 2)",
        ),
        (
            lambda x, w: ops.conv_transpose3d(x, w, kernel_size=3, stride=2),
            ValueError,
            "must divide the input stride",
        ),
        (
            lambda x, w: ops.conv_transpose3d(x, w, kernel_size=3, coordinates=x.feats),
            TypeError,
            "coordinates",
        ),
        (
            # deliberately untyped: the op takes no padding, the check under test
            lambda x, w: ops.generative_conv_transpose3d(x, w, kernel_size=3, padding=1),  # type: ignore[call-arg]
            TypeError,
            "padding",
        ),
        (
            # deliberately untyped: the op takes no dilation, the check under test
            lambda x, w: ops.generative_conv_transpose3d(x, w, kernel_size=3, dilation=2),  # type: ignore[call-arg]
            TypeError,
            "dilation",
        ),
        (lambda x, w: ops.subm_conv3d(x, w, kernel_size=2), ValueError, "expected (C_out, 2"),
    ],
)
def test_bad_arguments_are_named(call: object, error: type, words: str) -> None:
    x = SparseTensor(mx.array([[0, 1, 2, 3], [0, 2, 2, 3]], dtype=mx.int32), mx.ones((2, 2)))
    w = mx.ones((2, 3, 3, 3, 2))
    with pytest.raises(error, match=None) as info:
        call(x, w)  # type: ignore[operator]
    assert words in str(info.value)


def test_offsets_beyond_the_key_margin_use_repacked_keys(rng: np.random.Generator) -> None:
    """Dilations larger than the index margin take the shift-and-repack lookup path."""
    x = make_sparse(rng, batch=2, extent=6, stride=(1, 1, 1), channels=2, density=0.3)
    x = SparseTensor(x.coords * mx.array([1, 17, 1, 1], dtype=mx.int32), x.feats)
    k, d = (3, 3, 3), (17, 1, 2)
    assert x.cache.index(x.logical_coords).space.key_offset((17, 0, 0)) is None
    w = random_weight(rng, 3, k, 2)
    y = ops.subm_conv3d(x, w, kernel_size=k, dilation=d)
    half = ((k[0] - 1) // 2 * d[0], (k[1] - 1) // 2 * d[1], (k[2] - 1) // 2 * d[2])
    _, dense, shift, _ = oracle_conv3d(x, w, k, (1, 1, 1), half, d)
    expected = read_rows(dense, logical_rows(x), shift)
    np.testing.assert_allclose(to_np(y.feats), expected, rtol=1e-5, atol=1e-5)


def test_gathered_rows_stay_within_the_buffer_bound(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transient memory of a layer does not grow with pairs x channels."""
    x = make_sparse(rng, batch=1, extent=32, stride=(1, 1, 1), channels=32, density=0.5)
    w = random_weight(rng, 32, (3, 3, 3), 32)
    y = ops.subm_conv3d(x, w, kernel_size=3)  # builds and caches the map
    mx.eval(y.feats)
    kmap = next(v for k, v in x.cache.relations.items() if _kind(k) == "subm")
    assert isinstance(kmap, KernelMap)
    unbounded = (kmap.num_pairs - x.num_rows) * 32 * 4  # every tap's gathered rows, f32
    monkeypatch.setattr(conv_module, "GATHER_BUFFER_ELEMENTS", 1 << 16)
    mx.eval(x.feats, w)
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    again = ops.subm_conv3d(x, w, kernel_size=3)
    mx.eval(again.feats)
    transient = mx.get_peak_memory() - base
    assert unbounded > 20 * 2**20
    assert transient < unbounded / 5, (transient, unbounded)
    np.testing.assert_allclose(to_np(again.feats), to_np(y.feats), rtol=1e-6, atol=1e-6)


def test_upstream_example_kernel_3_1_1_keeps_the_input_rows() -> None:
    """Upstream: x = 0, 1, 2, features 1, 2, 3, weights 1, 2, 3 give rows {0,1,2} = [8,14,8]."""
    x = SparseTensor(
        mx.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 2, 0, 0]], dtype=mx.int32),
        mx.array([[1.0], [2.0], [3.0]]),
    )
    w = mx.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1, 1)
    y = ops.conv3d(x, w, kernel_size=(3, 1, 1))
    np.testing.assert_array_equal(to_np(y.coords), to_np(x.coords))
    assert to_np(y.feats)[:, 0].tolist() == [8.0, 14.0, 8.0]
    full = ops.full_conv3d(x, w, kernel_size=(3, 1, 1), padding=(1, 0, 0))
    assert sorted(to_np(full.feats)[:, 0].tolist()) == [3.0, 3.0, 8.0, 8.0, 14.0]
    pooled = ops.pool3d(x, mode="max", kernel_size=(3, 1, 1))
    assert to_np(pooled.feats)[:, 0].tolist() == [2.0, 3.0, 3.0]
