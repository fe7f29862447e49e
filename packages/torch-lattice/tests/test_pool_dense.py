"""pool3d and global_pool against dense per-window references."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import available_devices, dense_pool3d, random_sparse, sorted_rows

DEVICES = available_devices()
small = st.integers(min_value=1, max_value=3)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from(["max", "avg", "sum"]),
    k=st.tuples(small, small, small),
    s=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2)),
    p=st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2)),
    dtype=st.sampled_from([torch.float32, torch.float16]),
)
def test_pool3d_matches_dense_windows(device, seed, mode, k, s, p, d, dtype) -> None:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, 20, 3, batch=2, extent=5, dtype=dtype, device=device)
    out = ops.pool3d(x, mode=mode, kernel_size=k, stride=s, padding=p, dilation=d)
    ref = dense_pool3d(x, mode, k, s, p, d)
    coords, feats = sorted_rows(out.coords.cpu(), out.feats.cpu())
    assert torch.equal(coords, ref.coords)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-2, "rtol": 1e-2}
    torch.testing.assert_close(feats.double(), ref.feats, **tol)
    assert out.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["max", "avg", "sum"])
def test_global_pool_per_batch_and_empty_batch(device, mode) -> None:
    coords = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [2, 5, 5, 5]], dtype=torch.int32)
    feats = torch.tensor([[1.0, -2.0], [3.0, -4.0], [5.0, 6.0]])
    x = SparseTensor(coords.to(device), feats.to(device))
    out = ops.global_pool(x, mode=mode, batch_size=4).cpu()
    expected = {
        "max": [[3.0, -2.0], [0.0, 0.0], [5.0, 6.0], [0.0, 0.0]],
        "avg": [[2.0, -3.0], [0.0, 0.0], [5.0, 6.0], [0.0, 0.0]],
        "sum": [[4.0, -6.0], [0.0, 0.0], [5.0, 6.0], [0.0, 0.0]],
    }[mode]
    assert out.tolist() == expected


def test_global_pool_rejects_small_batch_size() -> None:
    x = SparseTensor(torch.tensor([[3, 0, 0, 0]], dtype=torch.int32), torch.ones(1, 1))
    with pytest.raises(ValueError, match="batch_size"):
        ops.global_pool(x, mode="sum", batch_size=2)
    with pytest.raises(ValueError, match="mode"):
        ops.global_pool(x, mode="median", batch_size=4)
