"""The reference MinkUNet and SPVCNN: they train, and they export (f16 and int8).

Training data is the synthetic surface scene of ``lattice_conformance.scenes``
(labels = primitive class of each voxel).  After a few optimiser steps the
loss must have fallen; the trained models are then exported as dense f16 and
packed int8 artifacts, reloaded from disk and compared with the eager models
(for int8: the eager model running the packed-then-dequantized weights).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from lattice_conformance import scenes
from safetensors.torch import load_file
from torch_lattice import SparseTensor, canonical_order
from torch_lattice.artifact import load_lattice_program
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.models import SPVCNN, MinkUNet
from torch_lattice.ops.quant import QuantizedWeight

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
STEPS = 6


@pytest.fixture(scope="module")
def scene() -> dict[str, torch.Tensor]:
    coords, labels = scenes.make_scene(800, grid=40, seed=3)
    c = torch.from_numpy(coords).to(torch.int32)
    feats = torch.cat([c.float() / 40.0, torch.ones(len(c), 1)], dim=1)
    gen = torch.Generator().manual_seed(0)
    return {
        "coords": torch.from_numpy(scenes.batched(coords)),
        "feats": feats,
        "labels": torch.from_numpy(labels).long(),
        "points": c.float() + torch.rand(len(c), 3, generator=gen),
        "batch": torch.zeros(len(c), dtype=torch.int32),
    }


def _train(model: torch.nn.Module, forward: Any, labels: torch.Tensor) -> list[float]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    model.train()
    for _ in range(STEPS):
        loss = torch.nn.functional.cross_entropy(forward(), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _dequantized_copy(model: torch.nn.Module, path: Path, packed: tuple[str, ...]) -> Any:
    stored = load_file(str(path / "weights.safetensors"))
    reference = copy.deepcopy(model)
    params = dict(reference.named_parameters())
    with torch.no_grad():
        for key in packed:
            q = QuantizedWeight(
                stored[key + ".weight"], stored[key + ".scales"], stored[key + ".biases"], 8, 32
            )
            params[key].copy_(q.dequantize(params[key].dtype))
    return reference.eval()


def _check_sparse(got: SparseTensor, want: SparseTensor, atol: float) -> None:
    pg, pw = canonical_order(got.coords), canonical_order(want.coords)
    assert torch.equal(got.coords[pg].cpu(), want.coords[pw].cpu())
    torch.testing.assert_close(got.feats[pg].cpu(), want.feats[pw].cpu(), atol=atol, rtol=1e-2)


@pytest.fixture(scope="module")
def trained_minkunet(scene: dict[str, torch.Tensor]) -> tuple[MinkUNet, list[float]]:
    torch.manual_seed(0)
    model = MinkUNet(4, 4)
    x = SparseTensor(scene["coords"], scene["feats"])
    losses = _train(model, lambda: model(x).feats, scene["labels"])
    return model.eval(), losses


@pytest.fixture(scope="module")
def trained_spvcnn(scene: dict[str, torch.Tensor]) -> tuple[SPVCNN, list[float]]:
    torch.manual_seed(0)
    model = SPVCNN(4, 4, voxel_size=1.0)
    args = (scene["points"], scene["feats"], scene["batch"])
    losses = _train(model, lambda: model(*args), scene["labels"])
    return model.eval(), losses


def test_minkunet_trains(trained_minkunet: tuple[MinkUNet, list[float]]) -> None:
    _, losses = trained_minkunet
    assert losses[-1] < 0.8 * losses[0], losses


def test_spvcnn_trains(trained_spvcnn: tuple[SPVCNN, list[float]]) -> None:
    _, losses = trained_spvcnn
    assert losses[-1] < 0.8 * losses[0], losses


def test_minkunet_logits_stay_on_input_rows(
    trained_minkunet: tuple[MinkUNet, list[float]], scene: dict[str, torch.Tensor]
) -> None:
    model, _ = trained_minkunet
    x = SparseTensor(scene["coords"], scene["feats"])
    with torch.no_grad():
        y = model(x)
    assert torch.equal(y.coords, x.coords) and y.feats.shape == (x.num_rows, 4)


@pytest.mark.parametrize("device", DEVICES)
def test_minkunet_exports_f16_and_int8(
    trained_minkunet: tuple[MinkUNet, list[float]],
    scene: dict[str, torch.Tensor],
    tmp_path: Path,
    device: str,
) -> None:
    model, _ = trained_minkunet
    x = SparseTensor(scene["coords"], scene["feats"]).to(device)

    half = copy.deepcopy(model).half().to(device)
    xh = x.to(dtype=torch.float16)
    report = save_lattice_model_artifact(half, xh, tmp_path / "f16.lattice")
    for op in ("subm_conv3d", "conv3d", "target_conv_transpose3d", "sparse.cat", "batch_norm"):
        assert f"lattice.{op}" in report.ops
    got = load_lattice_program(tmp_path / "f16.lattice", device=device)(xh)
    with torch.no_grad():
        _check_sparse(got, half(xh), atol=2e-2)

    f32 = copy.deepcopy(model).to(device)
    report = save_lattice_model_artifact(
        f32, x, tmp_path / "i8.lattice", quantize={"bits": 8, "group_size": 32}
    )
    assert len(report.packed_weights) >= 8
    assert "stem.0.0.weight" in report.dense_unpackable_weights  # 4 input channels
    reference = _dequantized_copy(f32, tmp_path / "i8.lattice", report.packed_weights)
    got = load_lattice_program(tmp_path / "i8.lattice", device=device)(x)
    with torch.no_grad():
        _check_sparse(got, reference(x), atol=1e-4)
        # Quantized, yet the classification it produces is the same as f32 on most voxels.
        agree = (got.feats.argmax(1) == f32(x).feats.argmax(1)).float().mean()
    assert float(agree) > 0.9


@pytest.mark.parametrize("device", DEVICES)
def test_spvcnn_exports_f16_and_int8(
    trained_spvcnn: tuple[SPVCNN, list[float]],
    scene: dict[str, torch.Tensor],
    tmp_path: Path,
    device: str,
) -> None:
    model, _ = trained_spvcnn
    p, f, b = (scene[k].to(device) for k in ("points", "feats", "batch"))
    a = torch.tensor([p.shape[0]], dtype=torch.int32, device=device)

    half = copy.deepcopy(model).half().to(device)
    report = save_lattice_model_artifact(
        half,
        (p, f.half(), b, a),
        tmp_path / "f16.lattice",
        input_names=["points", "features", "batch", "active"],
    )
    for op in ("voxelize", "devoxelize", "sparse.binary", "target_conv_transpose3d", "linear"):
        assert f"lattice.{op}" in report.ops
    program = load_lattice_program(tmp_path / "f16.lattice", device=device)
    assert program.input_names == ("points", "features", "batch", "active")
    got = program(points=p, features=f.half(), batch=b, active=a)
    with torch.no_grad():
        torch.testing.assert_close(got, half(p, f.half(), b, a), atol=2e-2, rtol=1e-2)

    f32 = copy.deepcopy(model).to(device)
    report = save_lattice_model_artifact(
        f32, (p, f, b, a), tmp_path / "i8.lattice", quantize={"bits": 8, "group_size": 32}
    )
    assert report.packed_weights
    reference = _dequantized_copy(f32, tmp_path / "i8.lattice", report.packed_weights)
    got = load_lattice_program(tmp_path / "i8.lattice", device=device)(p, f, b, a)
    with torch.no_grad():
        torch.testing.assert_close(got, reference(p, f, b, a), atol=1e-4, rtol=1e-3)
