"""MLX's canonical order is the contract's reference, on every input form it accepts."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from lattice_contract.frontend import row_order
from mlx_lattice import SparseTensor, canonical_order


def test_mlx_order_equals_the_reference() -> None:
    rng = np.random.default_rng(5)
    coords = rng.integers(-(2**31), 2**31, size=(500, 4), dtype=np.int64)
    coords[:, 0] = rng.integers(0, 3, size=500)
    coords = np.concatenate([coords, [[0, 2**31 - 1, -(2**31), 0]], coords[:5]]).astype(np.int32)
    want = row_order.canonical_order(coords)
    got = canonical_order(mx.array(coords))
    assert got.dtype == mx.int32
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(canonical_order(coords)), want)


def test_canonical_tensor_is_sorted_by_the_reference() -> None:
    coords = np.array([[1, 0, 0, 0], [0, 2, 2, 2], [0, -2, 0, 0], [0, 0, 0, 2]], np.int32)
    x = SparseTensor(mx.array(coords), mx.arange(4, dtype=mx.float32).reshape(4, 1), stride=2)
    c = x.canonical()
    np.testing.assert_array_equal(np.asarray(c.coords), coords[row_order.canonical_order(coords)])


def test_bad_shape_is_named() -> None:
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        canonical_order(mx.zeros((3, 3), dtype=mx.int32))
