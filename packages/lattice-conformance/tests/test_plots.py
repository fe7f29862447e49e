"""The replay picture tells the truth: axes from the data, tolerance lines, failing cases marked.

A three-case archive is built from the shipped MinkUNet's small case: one
untouched, one with a feature off by 1e3 (far past any fixed axis), one with
a coordinate moved (no values compared at all).  The figure's axes are then
read back from matplotlib: the absolute-error axis must reach the 1e3 error,
dashed lines must sit at the atol and rtol, and the per-case panel must label
exactly the two failing cases FAIL.  The PNG is left under pytest's tmp dir
(``replay-errors.png``) for a person to look at.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from lattice_conformance import segmentation as seg
from lattice_conformance.archive import (
    FixtureCase,
    SparseArrays,
    open_fixture_archive,
    write_fixture_archive,
)
from lattice_conformance.plots import (
    draw_case_verdicts,
    draw_error_histograms,
    plot_replay_errors,
    pyplot,
    replay_series,
    replay_verdicts,
)
from lattice_conformance.replay import ReplayResult, replay_archive


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> ReplayResult:
    root = tmp_path_factory.mktemp("plots")
    with open_fixture_archive(seg.fixture_path("minkunet", "f16"), into=root / "x") as archive:
        spec = next(c for c in archive.cases if c.name.startswith("small"))
        case = archive.load_case(spec)
    y = case.expected["y"]
    assert isinstance(y, SparseArrays)

    def variant(name: str, coords: np.ndarray, feats: np.ndarray) -> FixtureCase:
        expected = {"y": SparseArrays(coords, feats, y.stride)}
        return dataclasses.replace(case, name=name, expected=expected)

    far = y.features.copy()
    far[5, 1] += np.float16(1000.0)
    moved = y.coords.copy()
    moved[3, 3] = moved[:, 3].max() + 7
    cases = [
        variant("clean", y.coords, y.features),
        variant("far-off", y.coords, far),
        variant("moved-voxel", moved, y.features),
    ]
    archive_path = write_fixture_archive(root / "three.tar.gz", root / "x" / "artifact", cases)
    return replay_archive(archive_path, progress=False)


def test_axes_come_from_the_data_and_tolerances_are_drawn(replayed: ReplayResult) -> None:
    assert [c.passed for c in replayed.cases] == [True, False, False]
    plt = pyplot()
    fig, axes = plt.subplots(1, 3)
    series = replay_series(replayed)
    draw_error_histograms(axes[:2], series)
    draw_case_verdicts(axes[2], replay_verdicts(replayed))
    worst = max(float(s.abs_errors.max()) for s in series)
    assert worst > 900  # the 1e3 error is in the data ...
    assert axes[0].get_xlim()[1] >= np.log10(worst)  # ... and inside the axis, not clipped
    case = replayed.cases[0]
    lines = {round(line.get_xdata()[0], 6) for line in axes[0].get_lines()}
    assert round(np.log10(case.atol), 6) in lines
    rel_lines = {round(line.get_xdata()[0], 6) for line in axes[1].get_lines()}
    assert round(np.log10(case.rtol), 6) in rel_lines
    legend = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert any(t.startswith("FAIL") and "far-off" in t for t in legend)
    assert any(not t.startswith("FAIL") and "clean" in t for t in legend)
    ticks = [t.get_text() for t in axes[2].get_yticklabels()]
    assert sorted(t.split()[0] for t in ticks) == ["FAIL", "FAIL", "PASS"]
    assert any("moved-voxel" in t and t.startswith("FAIL") for t in ticks)
    plt.close(fig)

    # A small-error suite gets a small-error axis (not 1e-12 .. 1e1 whatever the data).
    fig, axes = plt.subplots(1, 2)
    draw_error_histograms(axes, [s for s in series if "clean" in s.label])
    high = axes[0].get_xlim()[1]
    assert high < np.log10(worst)
    plt.close(fig)


def test_replay_png_is_written(tmp_path: Path, replayed: ReplayResult) -> None:
    png = plot_replay_errors(replayed, tmp_path / "replay-errors.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1500 and height >= 500
