"""The replay table and plot keep their meaning with 14+ cases.

A suite of 16 cases whose names share long prefixes (``quantized_classifier_int4``
and ``quantized_classifier_int8`` differ in their last character), two of them
made to fail: the table prints every name whole, the plot's legend names every
series, and each failure's full reason (its fix included) is on the figure.
``LATTICE_KEEP_PLOT=path.png`` keeps the picture for a person to look at.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.plots import (
    draw_error_histograms,
    draw_shared_legend,
    failure_notes,
    plot_replay_errors,
    pyplot,
    replay_series,
    replay_verdicts,
)
from lattice_conformance.replay import ReplayResult, format_table, replay_archive
from lattice_conformance.torch_fixtures import write_torch_fixture_archive
from torch_lattice import SparseTensor, nn

NAMES = [
    "quantized_classifier_int4",
    "quantized_classifier_int8",
    *(f"sparse_segmentation_scene_{i:02d}_lidar_like" for i in range(12)),
    "normalized_convolution_transposed",
    "normalized_convolution_generative",
]
FAILING = {"quantized_classifier_int8", "normalized_convolution_generative"}


def _model() -> torch.nn.Module:
    torch.manual_seed(5)
    return nn.Sequential(nn.SubmConv3d(4, 8, 3, bias=False), nn.ReLU()).eval()


def _inputs() -> list[SparseTensor]:
    out = []
    for i in range(len(NAMES)):
        scene = seg.make_scene(4000 + i, n_voxels=200)
        out.append(SparseTensor(torch.from_numpy(scene.coords), torch.from_numpy(scene.features)))
    return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> ReplayResult:
    tmp = tmp_path_factory.mktemp("scale")
    good = write_torch_fixture_archive(
        tmp / "good.tar.gz", _model(), _inputs(), atol=1e-4, rtol=1e-4, names=NAMES
    )
    # Two cases get tolerance 0: any rounding difference fails them.
    buf = io.BytesIO()
    with tarfile.open(good, "r:gz") as src, tarfile.open(fileobj=buf, mode="w") as dst:
        for member in src.getmembers():
            f = src.extractfile(member)
            data = f.read() if f is not None else b""
            if member.name == "manifest.json":
                manifest = json.loads(data)
                for case in manifest["cases"]:
                    if case["name"] in FAILING:
                        case["atol"] = case["rtol"] = 0.0
                data = json.dumps(manifest, indent=2, sort_keys=True).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if f is not None else None)
    strict = tmp / "suite.tar.gz"
    strict.write_bytes(gzip.compress(buf.getvalue()))
    return replay_archive(strict, progress=False)


def test_the_table_prints_every_name_whole(suite: ReplayResult) -> None:
    table = format_table(suite)
    rows = table.splitlines()[2 : 2 + len(NAMES)]
    assert [row.split()[0] for row in rows] == NAMES
    assert len({row.split()[0] for row in rows}) == len(NAMES)  # none collapse into another
    failed = {row.split()[0] for row in rows if row.endswith("FAIL")}
    if failed:  # bit-identical runs cannot fail even at tolerance 0
        assert failed <= FAILING


def test_the_plot_names_every_series_and_every_failure(suite: ReplayResult, tmp_path: Path) -> None:
    series = replay_series(suite)
    assert len(series) == len(NAMES)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3)
    draw_error_histograms(axes[:2], series)
    draw_shared_legend(axes[2], axes[0])
    legend = axes[2].get_legend()
    assert legend is not None
    shown = [t.get_text() for t in legend.get_texts()]
    assert len(shown) == len(NAMES)
    for name in NAMES:
        assert any(f"{name}:" in text for text in shown), name
    plt.close(fig)
    notes = failure_notes(replay_verdicts(suite))
    for case in suite.cases:
        for out in case.outputs:
            if not out.passed:
                assert out.reasons and out.reasons[0].split()[0] in notes
    target = Path(os.environ.get("LATTICE_KEEP_PLOT", tmp_path / "replay.png"))
    plot_replay_errors(suite, target)
    assert target.stat().st_size > 20_000
