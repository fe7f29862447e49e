"""TorchSparse users' habits: each works as TorchSparse means it, or says what to use.

The oracle for ``sparse_quantize`` is a NumPy re-derivation of TorchSparse
2.x's ``torchsparse.utils.quantize.sparse_quantize`` (floor by the voxel
size, a ravelled hash over the min-shifted voxels, ``np.unique`` with
``return_index`` / ``return_inverse``, coordinates taken at the indices).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch_lattice import SparseTensor, nn
from torch_lattice.data import sparse_quantize
from torch_lattice.ops.reference import random_sparse


def _torchsparse_quantize(coords: np.ndarray, voxel_size: float, **flags: bool) -> Any:
    vox = np.floor(coords / voxel_size).astype(np.int32)
    shifted = vox.astype(np.int64) - vox.min(0)
    dims = shifted.max(0) + 1
    keys = (shifted[:, 0] * dims[1] + shifted[:, 1]) * dims[2] + shifted[:, 2]
    _, index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    out: list[np.ndarray] = [vox[index]]
    if flags.get("return_index"):
        out.append(index)
    if flags.get("return_inverse"):
        out.append(inverse.reshape(-1))
    return out[0] if len(out) == 1 else out


@pytest.mark.parametrize(
    "flags",
    [
        {"return_index": True},
        {"return_inverse": True},
        {"return_index": True, "return_inverse": True},
        {"return_index": False},
    ],
)
def test_sparse_quantize_takes_torchsparse_keywords(flags: dict[str, bool]) -> None:
    rng = np.random.default_rng(0)
    points = (rng.standard_normal((3000, 3)) * [20, 20, 2]).astype(np.float32)
    points[:5] = [[-40, 0, 0], [40, 0, 0], [0, -40, 0], [0, 40, 0], [0, 0, -9]]  # the edges
    got = sparse_quantize(points, 0.5, **flags)  # type: ignore[call-overload]
    want = _torchsparse_quantize(points, 0.5, **flags)
    if isinstance(want, np.ndarray):
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.numpy(), want)
        return
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_relu_inplace_is_accepted() -> None:
    x = random_sparse(torch.Generator().manual_seed(0), 50, 4, extent=6)
    assert torch.equal(nn.ReLU(True)(x).feats, nn.ReLU()(x).feats)
    assert torch.equal(nn.LeakyReLU(0.1, True)(x).feats, nn.LeakyReLU(0.1)(x).feats)


def test_torchsparse_argument_order_is_named() -> None:
    coords = torch.zeros(5, 4, dtype=torch.int32)
    coords[:, 1] = torch.arange(5, dtype=torch.int32)
    feats = torch.randn(5, 4)
    with pytest.raises(
        TypeError, match=r"takes \(coords, feats\).*TorchSparse's .*\(feats, coords\)"
    ):
        SparseTensor(feats, coords)


def test_conv_transposed_flag_names_the_module_to_use() -> None:
    with pytest.raises(TypeError, match=r"nn\.TargetConvTranspose3d\(c_in, c_out, k, stride\)"):
        nn.Conv3d(4, 8, 2, 2, transposed=True)  # type: ignore[call-arg]


def test_target_transpose_returns_to_the_skip_rows_and_left_cat_keeps_them() -> None:
    """TorchSparse's decoder step: back to the finer rows, then cat with the skip."""
    skip = random_sparse(torch.Generator().manual_seed(1), 490, 4, extent=16)
    down = nn.Conv3d(4, 8, 2, 2)(skip)
    up = nn.TargetConvTranspose3d(8, 4, 2, 2)(down, skip)
    assert torch.equal(up.coords, skip.coords)
    inflated = nn.ConvTranspose3d(8, 4, 2, 2)(down)
    assert inflated.num_rows == 8 * down.num_rows  # the trap the docstring names
    from torch_lattice import cat

    assert cat([up, skip]).num_rows == skip.num_rows
    assert cat([inflated, skip], join="right").num_rows == skip.num_rows
