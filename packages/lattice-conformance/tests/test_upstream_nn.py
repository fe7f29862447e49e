"""torch_lattice.nn and mlx_lattice.nn mirrors of the eight extra ops agree,.

Each torch module is built with random parameters, its ``state_dict`` loaded
unchanged into the MLX mirror, and both are run on the same input: rows must
match exactly and features to f32 rounding.  The torch modules must also train
(gradients reach every parameter), and the normalised MLX modules refuse
``quantize()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx_lattice
import mlx_lattice.nn as mnn
import numpy as np
import pytest
import torch
import torch_lattice
import torch_lattice.nn as tnn


def _inputs(stride: int, seed: int = 0) -> tuple[Any, Any, Any, Any]:
    rng = np.random.default_rng(seed)
    logical = np.unique(rng.integers(-3, 4, (30, 4)) * np.array([0, 1, 1, 1]), axis=0)
    coords = (logical * np.array([1, stride, stride, stride])).astype(np.int32)
    feats = rng.standard_normal((len(coords), 4)).astype(np.float32)
    fine = np.unique(rng.integers(-6, 7, (40, 4)) * np.array([0, 1, 1, 1]), axis=0).astype(np.int32)
    fine_stride = max(stride // 2, 1)
    fine = fine * np.array([1, fine_stride, fine_stride, fine_stride], dtype=np.int32)
    zeros = np.zeros((len(fine), 1), np.float32)
    return (
        torch_lattice.SparseTensor(torch.from_numpy(coords), torch.from_numpy(feats), stride),
        mlx_lattice.SparseTensor(mx.array(coords), mx.array(feats), stride),
        torch_lattice.SparseTensor(torch.from_numpy(fine), torch.from_numpy(zeros), fine_stride),
        mlx_lattice.SparseTensor(mx.array(fine), mx.array(zeros), fine_stride),
    )


CASES: dict[str, tuple[int, Callable[[Any], Any], bool]] = {
    "NormalizedSubmConv3d": (1, lambda nn: nn.NormalizedSubmConv3d(4, 3, 3, eps=1e-6), False),
    "NormalizedConvTranspose3d": (
        2,
        lambda nn: nn.NormalizedConvTranspose3d(4, 3, 3, stride=2, padding=1),
        False,
    ),
    "TargetNormalizedConvTranspose3d": (
        2,
        lambda nn: nn.TargetNormalizedConvTranspose3d(4, 3, 3, stride=2, padding=1),
        True,
    ),
    "NormalizedGenerativeConvTranspose3d": (
        2,
        lambda nn: nn.NormalizedGenerativeConvTranspose3d(4, 3, 2, stride=2),
        False,
    ),
    "PoolTranspose3d": (2, lambda nn: nn.PoolTranspose3d(2), True),
    "TrilinearUpsample3d": (2, lambda nn: nn.TrilinearUpsample3d(2), True),
}


def _sorted(coords: np.ndarray, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort(coords.T[::-1])
    return coords[order], feats[order]


@pytest.mark.parametrize("name", sorted(CASES))
def test_mirrors_agree(name: str) -> None:
    stride, make, with_target = CASES[name]
    xt, xm, tt, tm = _inputs(stride)
    torch.manual_seed(0)
    tmod = make(tnn)
    mmod = make(mnn)
    state = {k: v.detach().numpy() for k, v in tmod.state_dict().items()}
    mmod.load_state_dict(state)
    yt = tmod(xt, tt) if with_target else tmod(xt)
    ym = mmod(xm, tm) if with_target else mmod(xm)
    assert yt.stride == ym.stride
    ct, ft = _sorted(yt.coords.numpy(), yt.feats.detach().numpy())
    cm, fm = _sorted(np.asarray(ym.coords), np.asarray(ym.feats))
    np.testing.assert_array_equal(ct, cm)
    np.testing.assert_allclose(ft, fm, rtol=1e-5, atol=1e-5)
    if state:
        yt.feats.square().sum().backward()
        for key, param in tmod.named_parameters():
            assert param.grad is not None and bool(param.grad.abs().sum() > 0), key


def test_embedding_mirror_and_training() -> None:
    torch.manual_seed(1)
    tmod = tnn.Embedding(6, 3)
    mmod = mnn.Embedding(6, 3)
    mmod.load_state_dict({"weight": tmod.weight.detach().numpy()})
    idx = np.array([5, 0, 2, 2], np.int32)
    yt = tmod(torch.from_numpy(idx))
    ym = mmod(mx.array(idx))
    np.testing.assert_array_equal(yt.detach().numpy(), np.asarray(ym))
    yt.sum().backward()
    assert tmod.weight.grad is not None
    assert tmod.weight.grad[:, 0].tolist() == [1.0, 0.0, 2.0, 0.0, 0.0, 1.0]


def test_normalized_modules_refuse_quantization_and_bad_eps() -> None:
    with pytest.raises(TypeError, match="cannot be quantized"):
        mnn.NormalizedSubmConv3d(32, 4, 3).quantize(bits=8, group_size=32)
    for nn in (tnn, mnn):
        with pytest.raises(ValueError, match="eps must be a positive"):
            nn.NormalizedSubmConv3d(2, 2, 3, eps=-1.0)
