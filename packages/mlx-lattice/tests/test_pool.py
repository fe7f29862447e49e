"""Sparse pooling against dense PyTorch pooling: full_pool3d at its support, pool3d centred."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.dialect import PoolMode
from mlx_lattice import SparseTensor, ops
from mlx_sparse_oracle import (
    logical_rows,
    make_sparse,
    oracle_centred_pool3d,
    oracle_pool3d,
    to_np,
    tolerance,
    triples,
)


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(["max", "avg", "sum"]),
    k=triples(1, 4),
    s=triples(1, 2),
    p=triples(0, 2),
    d=triples(1, 2),
    batch=st.integers(1, 3),
    t=st.sampled_from([1, 2]),
    dtype=st.sampled_from([mx.float32, mx.float16]),
    seed=st.integers(0, 2**31 - 1),
)
def test_pool3d_matches_dense_torch(
    mode: str, k: tuple, s: tuple, p: tuple, d: tuple, batch: int, t: int, dtype: mx.Dtype,
    seed: int,
) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    x = make_sparse(rng, batch=batch, extent=5, stride=(t, t, t), channels=3, density=0.2,
                    dtype=dtype)  # fmt: skip
    for op, oracle in ((ops.full_pool3d, oracle_pool3d), (ops.pool3d, oracle_centred_pool3d)):
        y = op(x, mode=mode, kernel_size=k, stride=s, padding=p, dilation=d)
        assert y.stride == (t * s[0], t * s[1], t * s[2]) and y.dtype == dtype
        support, expected = oracle(x, mode, k, s, p, d)
        got = logical_rows(y)
        order = np.lexsort(got.T[::-1])
        np.testing.assert_array_equal(got[order], support)
        np.testing.assert_allclose(to_np(y.feats)[order], expected, **tolerance(dtype))


def test_pool3d_shares_the_conv3d_support_and_map(rng: np.random.Generator) -> None:
    x = make_sparse(rng, batch=2, extent=6, stride=(1, 1, 1), channels=2, density=0.3)
    pooled = ops.pool3d(x, mode=PoolMode.max, kernel_size=2, stride=2)
    conv = ops.conv3d(x, mx.ones((1, 2, 2, 2, 2)), kernel_size=2, stride=2)
    assert conv.cache is pooled.cache
    np.testing.assert_array_equal(to_np(conv.coords), to_np(pooled.coords))


def test_avg_divides_by_active_contributors_not_window_volume() -> None:
    coords = mx.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 5, 5, 5]], dtype=mx.int32)
    x = SparseTensor(coords, mx.array([[2.0], [4.0], [7.0]]))
    y = ops.pool3d(x, mode="avg", kernel_size=2, stride=2)
    rows = {
        tuple(r): v for r, v in zip(to_np(y.coords).tolist(), to_np(y.feats)[:, 0], strict=True)
    }
    assert rows == {(0, 0, 0, 0): 3.0, (0, 4, 4, 4): 7.0}


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_global_pool_per_batch_with_empty_items(rng: np.random.Generator, dtype: mx.Dtype) -> None:
    x = make_sparse(rng, batch=3, extent=4, stride=(1, 1, 1), channels=4, density=0.3,
                    dtype=dtype)  # fmt: skip
    keep = np.flatnonzero(to_np(x.coords)[:, 0] != 1)  # batch item 1 is empty
    x = SparseTensor(x.coords[mx.array(keep)], x.feats[mx.array(keep)])
    feats, batch = to_np(x.feats), to_np(x.coords)[:, 0]
    for mode in ("max", "avg", "sum"):
        out = ops.global_pool(x, mode=mode, batch_size=4)
        assert out.shape == (4, 4) and out.dtype == dtype
        ref = np.zeros((4, 4))
        for b in (0, 2):
            rows = feats[batch == b]
            ref[b] = {"max": rows.max(0), "avg": rows.mean(0), "sum": rows.sum(0)}[mode]
        np.testing.assert_allclose(to_np(out), ref, **tolerance(dtype))


def test_global_pool_rejects_rows_beyond_batch_size() -> None:
    x = SparseTensor(mx.array([[2, 0, 0, 0]], dtype=mx.int32), mx.ones((1, 2)))
    with pytest.raises(ValueError, match="batch_size > every batch index"):
        ops.global_pool(x, mode="sum", batch_size=2)
    with pytest.raises(ValueError, match="batch_size > every batch index"):
        ops.global_pool(x, mode="sum", batch_size=0)
    with pytest.raises(ValueError, match="-1"):
        ops.global_pool(x, mode="sum", batch_size=-3)
    assert ops.global_pool(x, mode="sum", batch_size=-1).shape == (3, 2)
    assert ops.global_pool(x, mode="sum").shape == (3, 2)  # -1 is the default
    empty = SparseTensor(mx.zeros((0, 4), dtype=mx.int32), mx.zeros((0, 2)))
    assert ops.global_pool(empty, mode="max", batch_size=0).shape == (0, 2)
    assert ops.global_pool(empty, mode="max", batch_size=-1).shape == (0, 2)
    with pytest.raises(ValueError, match="'max', 'avg', 'sum'"):
        ops.global_pool(x, mode="mean", batch_size=3)
    with pytest.raises(ValueError, match="'max', 'avg', 'sum'"):
        ops.pool3d(x, mode="min", kernel_size=2)
    with pytest.raises(TypeError, match="SparseTensor"):
        ops.pool3d(x.feats, mode="max", kernel_size=2)  # type: ignore[arg-type]  # deliberate
