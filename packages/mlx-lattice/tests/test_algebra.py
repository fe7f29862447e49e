"""Sparse algebra against a brute-force dictionary reference on small supports."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest
from lattice_contract.dialect import BinaryOp, Join
from mlx_lattice import SparseTensor
from mlx_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex

Row = tuple[int, int, int, int]


def random_sparse(
    rng: np.random.Generator,
    n: int,
    channels: int,
    stride: int = 1,
    extent: int = 4,
    dtype: mx.Dtype = mx.float32,
) -> SparseTensor:
    """``n`` distinct rows (2 batches, a small box) at ``stride``, in random order."""
    cells = np.stack(
        np.meshgrid(np.arange(2), *(np.arange(-1, extent),) * 3, indexing="ij"), -1
    ).reshape(-1, 4)
    pick = rng.choice(len(cells), size=min(n, len(cells)), replace=False)
    coords = cells[pick] * np.array([1, stride, stride, stride])
    feats = rng.standard_normal((len(pick), channels)).astype(np.float32)
    return SparseTensor(
        mx.array(coords.astype(np.int32)), mx.array(feats).astype(dtype), stride=stride
    )


def as_dict(x: SparseTensor) -> dict[Row, np.ndarray]:
    coords = np.array(x.coords).tolist()
    feats = np.array(x.feats.astype(mx.float32))
    return {(r[0], r[1], r[2], r[3]): feats[i] for i, r in enumerate(coords)}


def rows(x: SparseTensor) -> list[Row]:
    return [(r[0], r[1], r[2], r[3]) for r in np.array(x.coords).tolist()]


def expected_rows(lhs: SparseTensor, rhs: SparseTensor, join: str) -> list[Row]:
    left, right = rows(lhs), rows(rhs)
    in_rhs, in_lhs = set(right), set(left)
    if join == "inner":
        return [r for r in left if r in in_rhs]
    if join == "left":
        return left
    if join == "right":
        return right
    return left + [r for r in right if r not in in_lhs]


OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "max": np.maximum,  # Lattice's earlier spelling, a synonym
}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("join", [j.value for j in Join])
@pytest.mark.parametrize("op", list(OPS))
def test_sparse_binary_matches_brute_force(seed: int, join: str, op: str) -> None:
    rng = np.random.default_rng(seed)
    stride = 1 + seed % 2
    lhs = random_sparse(rng, 40, 3, stride)
    rhs = random_sparse(rng, 35, 3, stride)
    lhs_fill, rhs_fill = (0.0, 0.0) if seed < 2 else (0.5 * seed, -1.25)
    out = sparse_binary(lhs, rhs, op=op, join=join, lhs_fill=lhs_fill, rhs_fill=rhs_fill)
    want_rows = expected_rows(lhs, rhs, join)
    assert rows(out) == want_rows
    assert out.stride == lhs.stride and out.dtype == lhs.dtype
    a, b = as_dict(lhs), as_dict(rhs)
    fa, fb = np.full(3, lhs_fill, np.float32), np.full(3, rhs_fill, np.float32)
    want = np.array([OPS[op](a.get(r, fa), b.get(r, fb)) for r in want_rows])
    np.testing.assert_allclose(np.array(out.feats), want.reshape(-1, 3), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("join", [j.value for j in Join])
def test_sparse_cat_matches_brute_force(seed: int, join: str) -> None:
    rng = np.random.default_rng(10 + seed)
    lhs = random_sparse(rng, 30, 2, 2)
    rhs = random_sparse(rng, 30, 5, 2)
    out = sparse_cat(lhs, rhs, join=Join(join))
    want_rows = expected_rows(lhs, rhs, join)
    assert rows(out) == want_rows
    a, b = as_dict(lhs), as_dict(rhs)
    want = [np.concatenate([a.get(r, np.zeros(2)), b.get(r, np.zeros(5))]) for r in want_rows]
    np.testing.assert_array_equal(np.array(out.feats), np.array(want, dtype=np.float32))


@pytest.mark.parametrize("seed", range(3))
def test_sparse_reindex_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(20 + seed)
    src = random_sparse(rng, 30, 4, 2, dtype=mx.float16)
    dst = random_sparse(rng, 25, 7, 2)
    fill = -0.75 * seed
    out = sparse_reindex(src, dst, fill=fill)
    assert rows(out) == rows(dst) and out.dtype == mx.float16 and out.num_channels == 4
    a = as_dict(src)
    want = np.array([a.get(r, np.full(4, fill)) for r in rows(dst)], dtype=np.float32)
    np.testing.assert_array_equal(np.array(out.feats.astype(mx.float32)), want)
    # The result keeps target's support: same cache object.
    assert out.cache is dst.cache


def test_left_join_shares_lhs_support_and_f16_is_computed_in_f32() -> None:
    rng = np.random.default_rng(3)
    lhs = random_sparse(rng, 20, 3, dtype=mx.float16)
    out = sparse_binary(lhs, lhs, op=BinaryOp.add, join="left")
    assert out.cache is lhs.cache and out.dtype == mx.float16
    np.testing.assert_array_equal(np.array(out.feats), np.array(lhs.feats * 2))


def test_empty_sides() -> None:
    rng = np.random.default_rng(4)
    full = random_sparse(rng, 10, 2)
    empty = SparseTensor(mx.zeros((0, 4), dtype=mx.int32), mx.zeros((0, 2)))
    assert sparse_binary(full, empty, op="add", join="inner").num_rows == 0
    left = sparse_binary(full, empty, op="sub", join="left")
    np.testing.assert_array_equal(np.array(left.feats), np.array(full.feats))
    outer = sparse_binary(empty, full, op="sub", join="outer")
    assert rows(outer) == rows(full)
    np.testing.assert_array_equal(np.array(outer.feats), -np.array(full.feats))
    assert sparse_reindex(empty, full).num_rows == 10


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda a, b, c: sparse_binary(a, c, op="add"),
            ValueError,
            r"stride \(1, 1, 1\) but rhs has stride \(2, 2, 2\)",
        ),
        (lambda a, b, c: sparse_binary(a, b, op="add"), ValueError, "channel"),
        (lambda a, b, c: sparse_binary(a, a, op="div"), ValueError, "'add'"),
        (lambda a, b, c: sparse_cat(a, a, join="full"), ValueError, "'outer'"),
        (lambda a, b, c: sparse_cat(a, a.astype(mx.float16)), TypeError, "dtype"),
        (lambda a, b, c: sparse_cat(a, a.feats), TypeError, "rhs must be a SparseTensor"),
        (lambda a, b, c: sparse_reindex(a, c), ValueError, "need equal strides"),
    ],
)
def test_bad_inputs(
    call: Callable[[SparseTensor, SparseTensor, SparseTensor], object],
    error: type[Exception],
    match: str,
) -> None:
    rng = np.random.default_rng(5)
    a, b, c = random_sparse(rng, 8, 3), random_sparse(rng, 8, 4), random_sparse(rng, 8, 3, 2)
    with pytest.raises(error, match=match):
        call(a, b, c)
