"""pool3d, full_pool3d and global_pool against dense per-window references."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import (
    available_devices,
    dense_centred_pool3d,
    dense_pool3d,
    random_sparse,
    sorted_rows,
)

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
def test_pools_match_dense_windows(device, seed, mode, k, s, p, d, dtype) -> None:
    """full_pool3d: every reached window (spconv's); pool3d: centred windows, coarsened support."""
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, 20, 3, batch=2, extent=5, dtype=dtype, device=device)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for op, oracle in ((ops.full_pool3d, dense_pool3d), (ops.pool3d, dense_centred_pool3d)):
        out = op(x, mode=mode, kernel_size=k, stride=s, padding=p, dilation=d)
        ref = oracle(x, mode, k, s, p, d)
        coords, feats = sorted_rows(out.coords.cpu(), out.feats.cpu())
        assert torch.equal(coords, ref.coords)
        torch.testing.assert_close(feats.double(), ref.feats, atol=tol, rtol=tol)
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


def test_global_pool_batch_size_minus_one_infers_and_zero_is_empty() -> None:
    coords = torch.tensor([[0, 0, 0, 0], [2, 5, 5, 5]], dtype=torch.int32)
    x = SparseTensor(coords, torch.tensor([[1.0], [5.0]]))
    assert ops.global_pool(x, mode="sum", batch_size=-1).tolist() == [[1.0], [0.0], [5.0]]
    assert ops.global_pool(x, mode="sum").shape == (3, 1)  # -1 is the default
    empty = SparseTensor(torch.zeros(0, 4, dtype=torch.int32), torch.zeros(0, 2))
    assert ops.global_pool(empty, mode="avg", batch_size=0).shape == (0, 2)
    assert ops.global_pool(empty, mode="avg", batch_size=-1).shape == (0, 2)
    with pytest.raises(ValueError, match="-1"):
        ops.global_pool(x, mode="sum", batch_size=-2)


def test_pool3d_identity_window_and_unreached_rows() -> None:
    """Stride-1 odd windows include the row itself; a coarse row no tap reaches gives 0."""
    coords = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 3, 0, 0]], dtype=torch.int32)
    x = SparseTensor(coords, torch.tensor([[-1.0], [-2.0], [-3.0]]))
    assert ops.pool3d(x, mode="max", kernel_size=(3, 1, 1)).feats[:, 0].tolist() == [-1, -1, -3]
    # K = 1, s = 2: coarse row 1 holds only x = 3, which tap 0 (x = 2) does not read
    out = ops.pool3d(x, mode="max", kernel_size=1, stride=2)
    assert sorted_rows(out.coords, out.feats)[1][:, 0].tolist() == [-1.0, 0.0]


@pytest.mark.parametrize("op", ["pool3d", "global_pool", "voxelize"])
def test_max_gradient_splits_evenly_among_tied_inputs_at_zero(op: str) -> None:
    # Rows 0 and 1 tie at a maximum of exactly 0: each gets half of the output's
    # gradient (torch.amax's rule) and none leaks to the reduction's start value
    # (a zero start used to take a third); row 2 is alone in its window.
    coords = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 4, 4, 4]], dtype=torch.int32)
    feats = torch.tensor([[0.0, 0.0], [0.0, 0.0], [-1.0, -1.0]], requires_grad=True)
    if op == "voxelize":
        points = coords[:, 1:].to(torch.float32) * 0.25  # rows 0 and 1 share a voxel
        out = ops.voxelize(points, feats, coords[:, 0], voxel_size=1.0, reduction="max").feats
        expected = [0.5, 0.5, 1.0]
    elif op == "pool3d":
        x = SparseTensor(coords, feats)
        out = ops.pool3d(x, mode="max", kernel_size=2, stride=2).feats
        expected = [0.5, 0.5, 1.0]
    else:
        out = ops.global_pool(SparseTensor(coords[:2], feats[:2]), mode="max", batch_size=1)
        expected = [0.5, 0.5, 0.0]
    out.sum().backward()
    assert feats.grad is not None
    assert feats.grad.tolist() == [[g, g] for g in expected]


def test_max_of_an_all_minus_inf_window_stays_minus_inf_and_unreached_is_zero() -> None:
    """The empty-window 0 is decided by reach, not by the value: -inf inputs give -inf.

    (Unreached rows read 0: test_pool3d_identity_window_and_unreached_rows.)
    """
    ninf = -float("inf")
    coords = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 4, 4, 4]], dtype=torch.int32)
    x = SparseTensor(coords, torch.tensor([[ninf], [ninf], [1.0]]), 1)
    y = ops.pool3d(x, kernel_size=2, stride=2, mode="max")
    assert y.coords.tolist() == [[0, 0, 0, 0], [0, 4, 4, 4]]
    assert y.feats.tolist() == [[ninf], [1.0]]
    assert ops.global_pool(x, mode="max", batch_size=2).tolist() == [[1.0], [0.0]]
