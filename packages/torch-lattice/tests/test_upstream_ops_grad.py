"""gradcheck in float64 of the reference system's extra ops: features, weights and bias.

The normalised convolutions differentiate through both the numerator and the
support-dependent normaliser (the weight appears in both); the upsampling ops
through their weighted gathers; the embedding through its table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import random_sparse


def _x(stride: tuple[int, int, int] = (1, 1, 1), seed: int = 0) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    return random_sparse(g, 14, 2, batch=2, extent=4, stride=stride, dtype=torch.float64)


def _w(kernel: tuple[int, int, int], cout: int = 3, cin: int = 2) -> torch.Tensor:
    return torch.randn(cout, *kernel, cin, dtype=torch.float64, requires_grad=True)


NORMALIZED: dict[str, tuple[tuple[int, int, int], tuple[int, int, int], Callable[..., Any]]] = {
    "subm_k3": (
        (1, 1, 1),
        (3, 3, 3),
        lambda x, w, b: ops.normalized_subm_conv3d(x, w, b, kernel_size=3),
    ),
    "subm_k311_d2": (
        (1, 1, 1),
        (3, 1, 1),
        lambda x, w, b: ops.normalized_subm_conv3d(x, w, b, kernel_size=(3, 1, 1), dilation=2),
    ),
    "transpose_k3s2p1": (
        (2, 2, 2),
        (3, 3, 3),
        lambda x, w, b: ops.normalized_conv_transpose3d(
            x, w, b, kernel_size=3, stride=2, padding=1
        ),
    ),
    "target_transpose_k2s2": (
        (2, 2, 2),
        (2, 2, 2),
        lambda x, w, b: ops.normalized_conv_transpose3d(
            x, w, b, kernel_size=2, stride=2, coordinates=_x(seed=1)
        ),
    ),
    "generative_k3s2": (
        (2, 2, 2),
        (3, 3, 3),
        lambda x, w, b: ops.normalized_generative_conv_transpose3d(
            x, w, b, kernel_size=3, stride=2
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(NORMALIZED))
def test_normalized_gradcheck(name: str) -> None:
    stride, kernel, fn = NORMALIZED[name]
    x = _x(stride)
    w = _w(kernel)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    f = x.feats.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f, w, b: fn(x.with_feats(f), w, b).feats, (f, w, b))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: ops.pool_transpose3d(x, kernel_size=3, stride=2, padding=1),
        lambda x: ops.pool_transpose3d(x, kernel_size=2, stride=2, coordinates=_x(seed=2)),
        lambda x: ops.trilinear_upsample3d(x, stride=2),
        lambda x: ops.trilinear_upsample3d(x, stride=2, coordinates=_x(seed=3)),
    ],
    ids=["pool_transpose", "pool_transpose_target", "trilinear", "trilinear_target"],
)
def test_upsample_gradcheck(fn: Callable[[SparseTensor], SparseTensor]) -> None:
    x = _x((2, 2, 2))
    f = x.feats.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f: fn(x.with_feats(f)).feats, (f,))


def test_embedding_gradcheck() -> None:
    table = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([4, 0, 4, 2], dtype=torch.int32)
    assert torch.autograd.gradcheck(lambda t: ops.embedding_lookup(idx, t), (table,))
    ops.embedding_lookup(idx, table).sum().backward()
    assert table.grad is not None
    assert table.grad[:, 0].tolist() == [1.0, 0.0, 1.0, 0.0, 2.0]
