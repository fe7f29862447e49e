"""conformance replay on real fixtures: shipped archives, tampered archives, suites.

Every archive here holds a real artifact exported by torch_lattice, verified
by the native MLIR dialect and executed by mlx_lattice; nothing is mocked.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.archive import (
    FixtureCase,
    SparseArrays,
    open_fixture_archive,
    write_fixture_archive,
)
from lattice_conformance.replay import format_table, replay_archive
from lattice_conformance.replay import main as replay_main
from lattice_conformance.torch_fixtures import write_torch_fixture_archive
from torch_lattice import SparseTensor, nn

# Subcommands are called here without the command entry that sets up logging.
pytestmark = pytest.mark.usefixtures("command_logging")


@pytest.mark.parametrize("name", seg.MODELS)
@pytest.mark.parametrize("variant", seg.VARIANTS)
def test_shipped_archives_replay_and_pass(name: str, variant: str, tmp_path: Path) -> None:
    archive = seg.fixture_path(name, variant)
    report = tmp_path / "report.json"
    plot = tmp_path / "errors.png"
    code = replay_main([str(archive), "--report", str(report), "--plot", str(plot)])
    data = json.loads(report.read_text())
    assert code == 0, data
    assert data["report_format"] == "lattice-conformance-report"
    assert data["report_version"] == 1
    assert data["summary"]["all_passed"] and data["summary"]["cases"] == len(seg.FIXTURE_CASES)
    for case in data["cases"]:
        out = case["outputs"][0]
        assert out["passed"] and out["violations"] == 0
        if name == "minkunet":  # sparse logits on the input voxels
            assert out["coordinates"]["equal"] and out["coordinates"]["rows_differing"] == 0
        for key in ("mean", "median", "p95", "p99", "max"):
            assert 0.0 <= out["abs_error"][key] <= case["atol"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["artifact"]["op_counts"]["lattice.weight"] > 0
    assert data["archive"]["producer"]["model"] == name


def test_shipped_archive_also_replays_on_torch(tmp_path: Path) -> None:
    result = replay_archive(seg.fixture_path("minkunet", "int8"), runtime="torch")
    assert result.error is None and result.passed, [c.reasons for c in result.cases]


# ---------------------------------------------------------------------------
# Tampering with a shipped archive.


@pytest.fixture(scope="module")
def small_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FixtureCase]:
    """The small case of the shipped MinkUNet f16 archive, with its artifact."""
    root = tmp_path_factory.mktemp("shipped")
    with open_fixture_archive(seg.fixture_path("minkunet", "f16"), into=root / "x") as archive:
        spec = next(c for c in archive.cases if c.name.startswith("small"))
        case = archive.load_case(spec)
    return root / "x" / "artifact", case


def _with_expected(case: FixtureCase, coords: np.ndarray, feats: np.ndarray) -> FixtureCase:
    y = case.expected["y"]
    assert isinstance(y, SparseArrays)
    return dataclasses.replace(case, expected={"y": SparseArrays(coords, feats, y.stride)})


def _replay_one(tmp_path: Path, artifact: Path, case: FixtureCase) -> dict[str, Any]:
    archive = write_fixture_archive(tmp_path / "t.tar.gz", artifact, [case])
    report = tmp_path / "r.json"
    code = replay_main([str(archive), "--report", str(report)])
    data: dict[str, Any] = json.loads(report.read_text())
    data["exit_code"] = code
    return data


def test_untampered_small_case_passes(tmp_path: Path, small_case: tuple[Path, FixtureCase]) -> None:
    artifact, case = small_case
    data = _replay_one(tmp_path, artifact, case)
    assert data["exit_code"] == 0 and data["summary"]["all_passed"]


def test_flipped_coordinate_fails(tmp_path: Path, small_case: tuple[Path, FixtureCase]) -> None:
    artifact, case = small_case
    y = case.expected["y"]
    assert isinstance(y, SparseArrays)
    coords = y.coords.copy()
    coords[100, 3] = coords[:, 3].max() + 5  # a voxel no runtime produces
    data = _replay_one(tmp_path, artifact, _with_expected(case, coords, y.features))
    assert data["exit_code"] == 1
    out = data["cases"][0]["outputs"][0]
    c = out["coordinates"]
    assert not c["equal"] and c["missing"] == 1 and c["extra"] == 1 and c["rows_differing"] == 2
    assert c["first_missing"] == [coords[100].tolist()]
    assert c["first_extra"] == [y.coords[100].tolist()]
    assert any("coordinates: 2 rows differ" in r for r in out["reasons"])
    # The shared rows still agree: the failure is the support alone.
    assert out["violations"] == 0


def test_dropped_row_fails(tmp_path: Path, small_case: tuple[Path, FixtureCase]) -> None:
    artifact, case = small_case
    y = case.expected["y"]
    assert isinstance(y, SparseArrays)
    keep = np.arange(len(y.coords)) != 7
    data = _replay_one(tmp_path, artifact, _with_expected(case, y.coords[keep], y.features[keep]))
    assert data["exit_code"] == 1
    c = data["cases"][0]["outputs"][0]["coordinates"]
    assert (c["missing"], c["extra"]) == (0, 1)
    assert c["first_extra"] == [y.coords[7].tolist()]
    assert c["actual_rows"] == c["expected_rows"] + 1


def test_feature_past_tolerance_fails(tmp_path: Path, small_case: tuple[Path, FixtureCase]) -> None:
    artifact, case = small_case
    y = case.expected["y"]
    assert isinstance(y, SparseArrays)
    feats = y.features.copy()
    feats[42, 2] += np.float16(4 * case.atol + 0.5)
    data = _replay_one(tmp_path, artifact, _with_expected(case, y.coords, feats))
    assert data["exit_code"] == 1
    out = data["cases"][0]["outputs"][0]
    assert out["coordinates"]["equal"]
    assert out["violations"] == 1
    assert out["worst"]["coords"] == y.coords[42].tolist() and out["worst"]["channel"] == 2
    assert any(r.startswith("features: 1 of") for r in out["reasons"])
    # Just inside the tolerance still passes.
    feats[42, 2] = y.features[42, 2] + np.float16(case.atol / 2)
    data = _replay_one(tmp_path, artifact, _with_expected(case, y.coords, feats))
    assert data["exit_code"] == 0


def _inject(source: Path, target: Path, info: tarfile.TarInfo, data: bytes | None) -> Path:
    buf = io.BytesIO()
    with tarfile.open(source, "r:gz") as src, tarfile.open(fileobj=buf, mode="w") as dst:
        dst.addfile(info, None if data is None else io.BytesIO(data))
        for member in src.getmembers():
            dst.addfile(member, src.extractfile(member))
    target.write_bytes(gzip.compress(buf.getvalue()))
    return target


@pytest.mark.parametrize(
    ("member", "kind", "reason"),
    [
        ("../../escaped.txt", tarfile.REGTYPE, "parent_reference"),
        ("cases/link", tarfile.SYMTYPE, "link"),
    ],
)
def test_hostile_member_fails_with_reason(
    tmp_path: Path, member: str, kind: bytes, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    info = tarfile.TarInfo(member)
    info.type = kind
    data = None
    if kind == tarfile.REGTYPE:
        data = b"owned"
        info.size = len(data)
    else:
        info.linkname = "/etc/passwd"
    (tmp_path / "work").mkdir()
    source = seg.fixture_path("minkunet", "int8")
    bad = _inject(source, tmp_path / "work" / "bad.tar.gz", info, data)
    report = tmp_path / "r.json"
    assert replay_main([str(bad), "--report", str(report)]) == 2
    data_out = json.loads(report.read_text())
    assert data_out["error"].endswith(f"[{reason}]")
    assert data_out["cases"] == []
    assert f"[{reason}]" in capsys.readouterr().err
    assert not (tmp_path / "escaped.txt").exists()


def test_truncated_archive_fails(tmp_path: Path) -> None:
    raw = seg.fixture_path("spvcnn", "f16").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    result = replay_archive(cut)
    assert result.exit_code == 2
    assert result.error is not None and "[truncated_or_corrupt]" in result.error
    # The summary says nothing ran instead of claiming statistics about cases never read.
    table = format_table(result)
    assert table.splitlines()[-1] == "no case replayed on mlx (cpu)"
    assert "cases passed" not in table and "coordinates equal" not in table


def test_gpu_request_without_gpu_is_a_clear_error(tmp_path: Path) -> None:
    import mlx.core as mx

    if any(getattr(mx, b).is_available() for b in ("metal", "cuda") if hasattr(mx, b)):
        pytest.skip("this MLX has a GPU backend")
    result = replay_archive(seg.fixture_path("spvcnn", "int8"), device="gpu")
    assert result.exit_code == 2 and result.error is not None and "--device cpu" in result.error


# ---------------------------------------------------------------------------
# A longer suite from a small torch model.


def _tiny_model() -> torch.nn.Module:
    torch.manual_seed(3)
    model = nn.Sequential(
        nn.SubmConv3d(4, 16, 3, bias=False),
        nn.BatchNorm(16),
        nn.ReLU(),
        nn.Conv3d(16, 8, 2, stride=2),
    )
    return model.eval()


def _tiny_inputs(count: int, voxels: int) -> list[SparseTensor]:
    inputs = []
    for i in range(count):
        scene = seg.make_scene(3000 + i, n_voxels=voxels)
        feats = torch.from_numpy(scene.features)
        inputs.append(SparseTensor(torch.from_numpy(scene.coords), feats))
    return inputs


def test_twenty_case_suite_shows_progress_bar(tmp_path: Path) -> None:
    archive = write_torch_fixture_archive(
        tmp_path / "suite.tar.gz", _tiny_model(), _tiny_inputs(20, 300), atol=1e-4, rtol=1e-4
    )
    stream = io.StringIO()
    result = replay_archive(archive, progress_stream=stream)
    assert result.passed and len(result.cases) == 20
    lines = [line for line in stream.getvalue().replace("\r", "\n").splitlines() if line]
    assert lines, "a 20-case suite must draw a progress bar"
    assert all(line.startswith("replay:") for line in lines)  # tqdm's bar
    assert "20/20" in lines[-1] and "100%" in lines[-1] and "failed 0" in lines[-1]
    assert len(lines) <= 21
    # Short suites stay quiet unless asked.
    quiet = io.StringIO()
    short = write_torch_fixture_archive(
        tmp_path / "short.tar.gz", _tiny_model(), _tiny_inputs(2, 300), atol=1e-4, rtol=1e-4
    )
    assert replay_archive(short, progress_stream=quiet).passed
    assert quiet.getvalue() == ""
    forced = io.StringIO()
    assert replay_archive(short, progress=True, progress_stream=forced).passed
    assert "2/2" in forced.getvalue()


def test_large_model_archive_shows_progress_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lattice_conformance.replay as replay_module

    short = write_torch_fixture_archive(
        tmp_path / "short.tar.gz", _tiny_model(), _tiny_inputs(2, 300), atol=1e-4, rtol=1e-4
    )
    monkeypatch.setattr(replay_module, "PROGRESS_MIN_WEIGHT_BYTES", 1)  # every model is large
    stream = io.StringIO()
    assert replay_archive(short, progress_stream=stream).passed
    assert "2/2" in stream.getvalue()


def test_runtime_refusal_is_a_rejected_case_not_a_crash(tmp_path: Path) -> None:
    # Inputs that violate SPEC §4 (duplicate rows) are refused by the MLX ABI
    # check; replay records that case as rejected (exit 2) and goes on.
    archive = write_torch_fixture_archive(
        tmp_path / "a.tar.gz", _tiny_model(), _tiny_inputs(2, 300), atol=1e-4, rtol=1e-4
    )
    with open_fixture_archive(archive) as fixtures:
        cases = [fixtures.load_case(i) for i in range(2)]
        artifact = fixtures.root / "artifact"
        bad_coords = cases[0].inputs["x_coords"].copy()
        bad_coords[1] = bad_coords[0]
        cases[0] = dataclasses.replace(cases[0], inputs=dict(cases[0].inputs, x_coords=bad_coords))
        tampered = write_fixture_archive(tmp_path / "b.tar.gz", artifact, cases)
    result = replay_archive(tampered)
    assert result.exit_code == 2
    assert result.cases[0].status == "rejected" and result.summary()["rejected"] == 1
    assert result.cases[0].reasons[0].startswith("runtime: ")
    assert "duplicate" in result.cases[0].reasons[0]
    assert result.cases[1].passed


def test_mlx_replay_never_loads_torch() -> None:
    # A deployment machine replays with MLX alone; torch must stay unloaded.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from lattice_conformance import segmentation as seg\n"
        "from lattice_conformance.replay import replay_archive\n"
        "r = replay_archive(seg.fixture_path('spvcnn', 'int8'))\n"
        "assert r.passed, r.error\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)
