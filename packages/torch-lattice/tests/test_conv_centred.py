"""conv3d / target_conv3d / pool3d: the centred relation on the coarsened support.

Upstream's own semantic example, and the consequences docs/semantics.md pins
(stride-1 odd unpadded conv3d is subm_conv3d exactly; even kernels read
forward; the coarsened support keeps every floor(c / s)).  The dense-oracle
and pair-count tests live in test_conv_dense.py and test_pool_dense.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.ops.reference import random_sparse, sorted_rows


def _line(values: list[float]) -> SparseTensor:
    coords = torch.tensor([[0, i, 0, 0] for i in range(len(values))], dtype=torch.int32)
    return SparseTensor(coords, torch.tensor(values)[:, None])


def test_upstream_example_kernel_3_1_1() -> None:
    """Upstream: rows x = 0, 1, 2 with features 1, 2, 3 and weights 1, 2, 3 give [8, 14, 8]."""
    x = _line([1.0, 2.0, 3.0])
    w = torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1, 1)
    out = ops.conv3d(x, w, kernel_size=(3, 1, 1))
    assert torch.equal(out.coords, x.coords)
    assert out.feats[:, 0].tolist() == [8.0, 14.0, 8.0]
    # spconv's regular conv with the same weights grows the support to five rows
    full = ops.full_conv3d(x, w, kernel_size=(3, 1, 1), padding=(1, 0, 0))
    assert sorted_rows(full.coords, full.feats)[1][:, 0].tolist() == [3.0, 8.0, 14.0, 8.0, 3.0]


def test_even_kernel_reads_forward_and_strided_support_is_coarsened() -> None:
    x = _line([1.0, 2.0, 3.0, 4.0, 5.0])
    w = torch.tensor([1.0, 10.0]).reshape(1, 2, 1, 1, 1)
    # K = 2 reads c = o and o + 1 (k * d): [1 + 20, 2 + 30, 3 + 40, 4 + 50, 5]
    out = ops.conv3d(x, w, kernel_size=(2, 1, 1))
    assert out.feats[:, 0].tolist() == [21.0, 32.0, 43.0, 54.0, 5.0]
    # stride 2: outputs at floor(c / 2) = 0, 1, 2; o reads 2o and 2o + 1
    down = ops.conv3d(x, w, kernel_size=(2, 1, 1), stride=(2, 1, 1))
    coords, feats = sorted_rows(down.coords, down.feats)
    assert coords[:, 1].tolist() == [0, 2, 4] and down.stride == (2, 1, 1)
    assert feats[:, 0].tolist() == [21.0, 43.0, 5.0]
    # odd K = 3, s = 2 is centred on 2o: reads 2o - 1, 2o, 2o + 1
    w3 = torch.tensor([1.0, 10.0, 100.0]).reshape(1, 3, 1, 1, 1)
    odd = ops.conv3d(x, w3, kernel_size=(3, 1, 1), stride=(2, 1, 1))
    assert sorted_rows(odd.coords, odd.feats)[1][:, 0].tolist() == [210.0, 2 + 30 + 400, 4 + 50]


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.tuples(*(st.sampled_from([1, 3, 5]) for _ in range(3))),
    d=st.tuples(*(st.integers(1, 2) for _ in range(3))),
)
def test_stride_one_odd_unpadded_conv3d_is_subm_exactly(seed, k, d) -> None:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, 30, 3, batch=2, extent=6)
    w = torch.randn(2, *k, 3, generator=g)
    b = torch.randn(2, generator=g)
    conv = ops.conv3d(x, w, b, kernel_size=k, dilation=d)
    sub = ops.subm_conv3d(x, w, b, kernel_size=k, dilation=d)
    assert torch.equal(conv.coords, sub.coords) and torch.equal(conv.coords, x.coords)
    assert torch.equal(conv.feats, sub.feats)
    target = ops.conv3d(x, w, b, kernel_size=k, dilation=d, coordinates=x)
    torch.testing.assert_close(target.feats, sub.feats)


def test_target_conv3d_uses_the_centred_rule() -> None:
    x = _line([1.0, 2.0, 3.0])
    w = torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1, 1)
    target = SparseTensor(
        torch.tensor([[0, 0, 0, 0], [0, 5, 0, 0]], dtype=torch.int32), torch.ones(2, 1)
    )
    out = ops.conv3d(x, w, torch.tensor([0.5]), kernel_size=(3, 1, 1), coordinates=target)
    assert out.feats[:, 0].tolist() == [8.5, 0.5]  # a row no tap reaches gets the bias alone


def test_modules_follow_the_ops() -> None:
    x = _line([1.0, 2.0, 3.0])
    conv, full = nn.Conv3d(1, 1, (3, 1, 1), bias=False), nn.FullConv3d(1, 1, (3, 1, 1), bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1, 1))
        full.weight.copy_(conv.weight)
    assert conv(x).num_rows == 3 and full(x).num_rows == 5
    for cls, mode in (
        (nn.FullMaxPool3d, "max"),
        (nn.FullAvgPool3d, "avg"),
        (nn.FullSumPool3d, "sum"),
    ):
        ours = cls(3, stride=1)(x)
        ref = ops.full_pool3d(x, mode=mode, kernel_size=3)
        assert torch.equal(ours.feats, ref.feats)
    assert nn.MaxPool3d(3, stride=1)(x).num_rows == 3


def test_conv3d_gradients_flow() -> None:
    g = torch.Generator().manual_seed(3)
    x = random_sparse(g, 20, 2, extent=5, dtype=torch.float64)
    feats = x.feats.clone().requires_grad_(True)
    w = torch.randn(2, 3, 2, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    for op in (ops.conv3d, ops.full_conv3d):

        def f(fe: torch.Tensor, we: torch.Tensor, op=op) -> torch.Tensor:
            return op(x.with_feats(fe), we, kernel_size=(3, 2, 3), stride=(2, 1, 2)).feats

        assert torch.autograd.gradcheck(f, (feats, w))


@pytest.mark.parametrize("bad", [{"padding": 1}, {"dilation": 2}])
def test_generative_has_no_padding_or_dilation(bad: dict[str, Any]) -> None:
    """``bad`` is typed Any deliberately: the keywords the op refuses are the check under test."""
    x = _line([1.0])
    with pytest.raises(TypeError):
        ops.generative_conv_transpose3d(
            x, torch.ones(1, 2, 2, 2, 1), kernel_size=2, stride=1, **bad
        )
