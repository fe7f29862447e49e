"""sparse_binary / sparse_cat / sparse_reindex: joins, order, zeros for missing sides."""

from __future__ import annotations

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import available_devices

DEVICES = available_devices()


def _pair(device: str) -> tuple[SparseTensor, SparseTensor]:
    a = SparseTensor(
        torch.tensor([[0, 0, 0, 0], [0, 2, 0, 0], [1, 4, 2, 0]], dtype=torch.int32).to(device),
        torch.tensor([[1.0], [2.0], [3.0]]).to(device),
        stride=2,
    )
    b = SparseTensor(
        torch.tensor([[0, 6, 0, 0], [1, 4, 2, 0], [0, 0, 0, 0]], dtype=torch.int32).to(device),
        torch.tensor([[10.0], [20.0], [30.0]]).to(device),
        stride=2,
    )
    return a, b


@pytest.mark.parametrize("device", DEVICES)
def test_joins_and_row_order(device: str) -> None:
    a, b = _pair(device)
    inner = ops.sparse_binary(a, b, op="add", join="inner")
    assert inner.coords.cpu().tolist() == [[0, 0, 0, 0], [1, 4, 2, 0]]
    assert inner.feats.cpu().tolist() == [[31.0], [23.0]]
    left = ops.sparse_binary(a, b, op="sub", join="left")
    assert left.support is a.support
    assert left.feats.cpu().tolist() == [[-29.0], [2.0], [-17.0]]
    outer = ops.sparse_binary(a, b, op="mul", join="outer")
    assert outer.coords.cpu().tolist() == [[0, 0, 0, 0], [0, 2, 0, 0], [1, 4, 2, 0], [0, 6, 0, 0]]
    assert outer.feats.cpu().tolist() == [[30.0], [0.0], [60.0], [0.0]]
    mx = ops.sparse_binary(a, b, op="max", join="outer")
    assert mx.feats.cpu().tolist() == [[30.0], [2.0], [20.0], [10.0]]
    mn = ops.sparse_binary(a, b, op="min", join="outer")
    assert mn.feats.cpu().tolist() == [[1.0], [0.0], [3.0], [0.0]]
    cat = ops.sparse_cat(a, b, join="outer")
    assert cat.feats.cpu().tolist() == [[1.0, 30.0], [2.0, 0.0], [3.0, 20.0], [0.0, 10.0]]
    reidx = ops.sparse_reindex(a, b)
    assert reidx.support is b.support and reidx.feats.cpu().tolist() == [[0.0], [3.0], [1.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_right_join_fills_and_reindex_fill(device: str) -> None:
    """join right keeps rhs order; a missing side contributes its fill; reindex fills gaps."""
    a, b = _pair(device)
    right = ops.sparse_binary(a, b, op="sub", join="right", lhs_fill=100.0, rhs_fill=-1.0)
    assert right.support is b.support
    assert right.feats.cpu().tolist() == [[90.0], [-17.0], [-29.0]]
    outer = ops.sparse_binary(a, b, op="maximum", join="outer", lhs_fill=50.0, rhs_fill=-5.0)
    assert outer.feats.cpu().tolist() == [[30.0], [2.0], [20.0], [50.0]]
    left = ops.sparse_binary(a, b, op="minimum", join="left", rhs_fill=-7.0)
    assert left.feats.cpu().tolist() == [[1.0], [-7.0], [3.0]]
    cat = ops.sparse_cat(a, b, join="right")
    assert cat.feats.cpu().tolist() == [[0.0, 10.0], [3.0, 20.0], [1.0, 30.0]]
    reidx = ops.sparse_reindex(a, b, fill=-0.75)
    assert reidx.feats.cpu().tolist() == [[-0.75], [3.0], [1.0]]


def test_identical_supports_share_the_cache() -> None:
    a, _ = _pair("cpu")
    twice = ops.sparse_binary(a, a.with_feats(a.feats * 2), op="add", join="outer")
    assert twice.support is a.support
    assert ops.sparse_cat(a, a, join="inner").support is a.support


def test_algebra_errors() -> None:
    a, b = _pair("cpu")
    c = SparseTensor(a.coords, a.feats)  # stride 1
    with pytest.raises(ValueError, match="stride"):
        ops.sparse_binary(a, c, op="add")
    with pytest.raises(ValueError, match="channels"):
        ops.sparse_binary(a, ops.sparse_cat(b, b), op="add")
    with pytest.raises(ValueError, match="join"):
        ops.sparse_cat(a, b, join="full")
    with pytest.raises(TypeError, match="dtype"):
        ops.sparse_binary(a, b.with_feats(b.feats.half()), op="add")


def test_gradients_flow_through_algebra() -> None:
    a, b = _pair("cpu")
    fa = a.feats.clone().requires_grad_(True)
    fb = b.feats.clone().requires_grad_(True)
    out = ops.sparse_binary(a.with_feats(fa), b.with_feats(fb), op="mul", join="outer")
    out.feats.sum().backward()
    assert fa.grad is not None and fa.grad[:, 0].tolist() == [30.0, 0.0, 20.0]


def test_empty_operands() -> None:
    a, _ = _pair("cpu")
    empty = SparseTensor(torch.zeros(0, 4, dtype=torch.int32), torch.zeros(0, 1), stride=2)
    assert ops.sparse_reindex(empty, a).feats.tolist() == [[0.0], [0.0], [0.0]]
    left = ops.sparse_binary(a, empty, op="add", join="left")
    assert left.feats.tolist() == [[1.0], [2.0], [3.0]]
    assert ops.sparse_cat(empty, a, join="outer").num_rows == 3
