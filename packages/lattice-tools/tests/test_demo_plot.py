"""The demo picture shows what its titles claim, on a fixed layout for any artifact.

``demo_figure`` gets two artifacts' results with known differences: MLX
disagrees with torch on exactly 3 rows (one of them flips its class), and
int8 changes the class of exactly 5 voxels relative to f16.  The panel
titles read back from matplotlib must state exactly those counts, and the
figure must keep its six scene panels and two histograms when the artifact
has one variant or outputs that are not class logits.  A full demo run on a
non-segmentation artifact (``--artifact``) checks the same from the outside,
and leaves its PNGs under pytest's tmp dir for a person to look at.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.archive import SparseArrays
from lattice_conformance.metrics import OutputResult
from lattice_conformance.plots import save_figure
from lattice_tools.cli import lattice_main
from lattice_tools.demo_plot import Disagreement, demo_figure, row_disagreement
from torch_lattice import SparseTensor, nn
from torch_lattice.export import save_lattice_model_artifact


def _variant(name: str, logits: np.ndarray, disagreement: Disagreement | None) -> object:
    agreement = OutputResult("y", "sparse", True, [], 2e-2, 1e-2, "f16", "f16")
    agreement.abs_sample = np.abs(np.random.default_rng(0).normal(0, 1e-3, 200))
    agreement.rel_sample = agreement.abs_sample
    pred = logits.argmax(axis=1)
    return types.SimpleNamespace(
        name=name,
        predictions={"mlx": pred, "torch": pred},
        logits={"mlx": logits},
        miou={"mlx": 0.9},
        disagreement=disagreement,
        agreement=agreement,
    )


def _titles(fig: object) -> list[str]:
    return [ax.get_title() for ax in fig.axes]  # type: ignore[attr-defined]


def test_titles_state_the_measured_differences() -> None:
    rng = np.random.default_rng(1)
    coords = np.unique(rng.integers(0, 20, (400, 3)), axis=0).astype(np.int32)
    n = len(coords)
    coords4 = np.concatenate([np.zeros((n, 1), np.int32), coords], axis=1)
    f16 = rng.normal(0, 1, (n, 4)).astype(np.float32)
    f16[np.arange(n), f16.argmax(1)] += 3.0  # clear winners
    int8 = f16.copy()
    flip = np.arange(5)
    int8[flip] = np.roll(f16[flip], 1, axis=1)  # 5 voxels change class
    mlx = f16.copy()
    mlx[10:13] += 1e-3
    mlx[20] = np.roll(f16[20], 1)  # one more row differs, and its class flips
    d = row_disagreement(SparseArrays(coords4, f16, (1, 1, 1)),
                         SparseArrays(coords4[::-1].copy(), mlx[::-1].copy(), (1, 1, 1)),
                         coords.astype(np.float32))  # fmt: skip
    assert d is not None and int((d.max_abs > 0).sum()) == 4 and int(d.flips.sum()) == 1
    truth = f16.argmax(1)
    variants = [_variant("f16", f16, d), _variant("int8", int8, None)]
    fig = demo_figure("t", coords.astype(np.float32), truth, "ground truth", variants, {},
                      seg.CLASS_NAMES)  # fmt: skip
    titles = _titles(fig)
    assert any("torch - MLX (f16 artifact)" in t and "1 class flips" in t for t in titles)
    assert any(f"{n - 4} of {n} rows identical" in t for t in titles)
    assert any("int8 - f16 logits" in t and "5 class flips" in t for t in titles)
    assert any(t.startswith("MLX int8 prediction") for t in titles)
    assert sum(hasattr(ax, "get_zlim") for ax in fig.axes) == 6  # six 3-D panels


@pytest.mark.parametrize("logits", [True, False])
def test_layout_is_fixed_for_one_artifact_and_any_output(tmp_path: Path, logits: bool) -> None:
    rng = np.random.default_rng(2)
    xyz = rng.random((300, 3)).astype(np.float32) * 20
    out = rng.normal(0, 1, (300, 4)).astype(np.float32)
    v = _variant("user", out, Disagreement(xyz, np.zeros(300), np.zeros(300, bool)))
    if not logits:  # an artifact whose output is not class logits
        v.predictions, v.logits, v.miou = {}, {}, {}  # type: ignore[attr-defined]
    truth = np.full(300, -1)
    fig = demo_figure("t", xyz, truth, "none", [v], {}, seg.CLASS_NAMES)
    png = save_figure(fig, tmp_path / "d.png", dpi=90)
    data = png.read_bytes()
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (
        1440,
        1260,
    )


def test_demo_with_a_non_segmentation_artifact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.SubmConv3d(4, 8, 3), nn.ReLU(), nn.Conv3d(8, 6, 2, 2)).eval()
    scene = seg.make_scene(9, n_voxels=800)
    x = SparseTensor(torch.from_numpy(scene.coords), torch.from_numpy(scene.features))
    save_lattice_model_artifact(model, x, tmp_path / "other.lattice")
    out = tmp_path / "demo"
    args = ["demo", "--artifact", str(tmp_path / "other.lattice"), "--out", str(out)]
    assert lattice_main([*args, "--voxels", "1500"]) == 0
    printed = capsys.readouterr()
    assert "RESULT: PASS" in printed.out and "other.lattice" in printed.out
    assert "compile user (mlx) ..." in printed.err  # stages announced as they run
    report = json.loads((out / "report.json").read_text())
    assert report["artifacts"]["user"]["miou"] == {}
    data = (out / "demo.png").read_bytes()
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (
        1440,
        1260,
    )
