"""The reference models, exported from torch, run on MLX as they run on torch.

MinkUNet and SPVCNN (``torch_lattice.models``) are exported as dense f32,
dense f16 and packed int8 artifacts; each artifact is loaded by both runtimes
(``torch_lattice.artifact`` and ``mlx_lattice.artifact``) and the outputs are
compared: sparse coordinates exactly after canonical ordering, features
within tolerances that reflect the two runtimes' different summation orders.
BatchNorm statistics are randomised so the normalisation actually matters.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
import torch
import torch_lattice
from lattice_conformance import scenes
from mlx_lattice import SparseTensor as MxSparse
from mlx_lattice import canonical_order as mx_canonical_order
from mlx_lattice.artifact import load_lattice_program as load_mlx
from torch_lattice.artifact import load_lattice_program as load_torch
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.models import SPVCNN, MinkUNet

# (rtol, atol) of MLX against torch, per artifact flavour
TOLERANCES = {"f32": (1e-4, 1e-4), "f16": (2e-2, 2e-2), "int8": (1e-4, 1e-4)}


@pytest.fixture(scope="module")
def scene() -> dict[str, torch.Tensor]:
    coords, _ = scenes.make_scene(600, grid=32, seed=5)
    c = torch.from_numpy(coords).to(torch.int32)
    gen = torch.Generator().manual_seed(1)
    return {
        "coords": torch.from_numpy(scenes.batched(coords)),
        "feats": torch.cat([c.float() / 32.0, torch.ones(len(c), 1)], dim=1),
        "points": c.float() + torch.rand(len(c), 3, generator=gen),
        "batch": torch.zeros(len(c), dtype=torch.int32),
    }


def _randomise_norms(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch_lattice.nn.BatchNorm):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)
    return model.eval()


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().float().numpy() if t.is_floating_point() else t.cpu().numpy()


def _mx_input(value: Any) -> Any:
    if isinstance(value, torch_lattice.SparseTensor):
        feats = mx.array(_np(value.feats))
        if value.dtype == torch.float16:
            feats = feats.astype(mx.float16)
        return MxSparse(mx.array(_np(value.coords)), feats, stride=value.stride)
    array = mx.array(_np(value))
    return array.astype(mx.float16) if value.dtype == torch.float16 else array


def _compare(torch_out: Any, mlx_out: Any, rtol: float, atol: float) -> None:
    if isinstance(torch_out, torch_lattice.SparseTensor):
        assert isinstance(mlx_out, MxSparse)
        assert tuple(mlx_out.stride) == torch_out.stride
        pt = torch_lattice.canonical_order(torch_out.coords)
        pm = np.array(mx_canonical_order(mlx_out.coords))
        coords_t = torch_out.coords[pt].numpy()
        coords_m = np.array(mlx_out.coords)[pm]
        np.testing.assert_array_equal(coords_m, coords_t)
        ft = _np(torch_out.feats[pt])
        fm = np.array(mlx_out.feats.astype(mx.float32))[pm]
    else:
        ft = _np(torch_out)
        fm = np.array(mlx_out.astype(mx.float32))
    assert fm.shape == ft.shape
    np.testing.assert_allclose(fm, ft, rtol=rtol, atol=atol)


def _cross_check(
    model: torch.nn.Module,
    inputs: tuple[Any, ...],
    half_inputs: tuple[Any, ...],
    tmp: Path,
    flavour: str,
) -> None:
    if flavour == "f16":
        model, inputs = copy.deepcopy(model).half(), half_inputs
    quantize = {"bits": 8, "group_size": 32} if flavour == "int8" else None
    report = save_lattice_model_artifact(model, inputs, tmp, quantize=quantize)
    if flavour == "int8":
        assert report.packed_weights
    torch_out = load_torch(tmp)(*inputs)
    mlx_out = load_mlx(tmp)(*(_mx_input(i) for i in inputs))
    rtol, atol = TOLERANCES[flavour]
    _compare(torch_out, mlx_out, rtol, atol)


@pytest.mark.parametrize("flavour", ["f32", "f16", "int8"])
def test_minkunet_mlx_matches_torch(
    scene: dict[str, torch.Tensor], tmp_path: Path, flavour: str
) -> None:
    torch.manual_seed(0)
    model = _randomise_norms(MinkUNet(4, 5), seed=2)
    x = torch_lattice.SparseTensor(scene["coords"], scene["feats"])
    half = (x.to(dtype=torch.float16),)
    _cross_check(model, (x,), half, tmp_path / f"mink-{flavour}.lattice", flavour)


@pytest.mark.parametrize("flavour", ["f32", "f16", "int8"])
def test_spvcnn_mlx_matches_torch(
    scene: dict[str, torch.Tensor], tmp_path: Path, flavour: str
) -> None:
    torch.manual_seed(1)
    model = _randomise_norms(SPVCNN(4, 5, voxel_size=1.0), seed=3)
    active = torch.tensor([scene["points"].shape[0]], dtype=torch.int32)
    inputs = (scene["points"], scene["feats"], scene["batch"], active)
    half = (scene["points"], scene["feats"].half(), scene["batch"], active)  # points stay f32
    _cross_check(model, inputs, half, tmp_path / f"spv-{flavour}.lattice", flavour)
