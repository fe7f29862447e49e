"""The main job end to end: ``lattice demo`` on the shipped model and a user cloud."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lattice_conformance import segmentation as seg
from lattice_conformance.ply import write_ply
from lattice_conformance.replay import replay_archive
from lattice_contract.testing import SPECIAL_KINDS, special_file
from lattice_tools.cli import lattice_main

REPO = Path(__file__).resolve().parents[3]


def test_demo_runs_the_whole_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert lattice_main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "RESULT: PASS" in printed
    for text in ("Artifact ABI:", "verified by native MLIR", "coordinates equal", "mIoU"):
        assert text in printed

    report = json.loads((out / "report.json").read_text())
    assert report["report_format"] == "lattice-demo-report" and report["report_version"] == 1
    assert report["passed"] and report["scene"]["labelled"]
    for variant in ("f16", "int8"):
        art = report["artifacts"][variant]
        assert art["verified"]
        assert art["op_counts"]["lattice.subm_conv3d"] > 0
        assert [i["name"] for i in art["abi"]["inputs"]] == ["x_coords", "x_features", "x_active"]
        agreement = art["torch_vs_mlx"]
        assert agreement["passed"] and agreement["coordinates"]["equal"]
        # A trained network, run by both runtimes, segments an unseen scene well.
        assert art["miou"]["torch"] > 0.7 and art["miou"]["mlx"] > 0.7
        assert abs(art["miou"]["torch"] - art["miou"]["mlx"]) < 0.01
    assert report["artifacts"]["int8"]["packed_weights"] > 0
    assert report["artifacts"]["f16"]["packed_weights"] == 0
    assert report["eager_f32_miou"] > 0.7
    for label in ("minkunet-f16", "minkunet-int8"):
        assert report["fixtures"][label]["summary"]["all_passed"]
    for stage in ("export f16", "verify f16 (native MLIR)", "compile f16 (mlx)", "run f16 (mlx)"):
        assert report["stages_s"][stage] >= 0.0
    png = (out / "demo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 1000 and height > 500
    for variant in ("f16", "int8"):
        assert (out / f"minkunet-{variant}.lattice" / "graph.mlir").is_file()


def test_demo_on_a_user_point_cloud(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scene = seg.make_scene(77, n_voxels=2500)
    cloud = tmp_path / "cloud.ply"
    write_ply(cloud, (scene.points * 0.02 + 3.0).astype(np.float32))  # metres, shifted
    out = tmp_path / "demo"
    code = lattice_main(
        ["demo", "--model", "spvcnn", "--input", str(cloud), "--out", str(out), "--no-fixtures"]
    )
    assert code == 0, capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    assert not report["scene"]["labelled"] and report["eager_f32_miou"] is None
    art = report["artifacts"]["f16"]
    assert art["abi"]["inputs"][0]["type"] == "tensor<?x3xf32>"
    assert art["torch_vs_mlx"]["coordinates"] is None and art["torch_vs_mlx"]["passed"]
    assert art["miou"] == {}
    assert "n/a (the input has no labels)" in capsys.readouterr().out
    assert (out / "demo.png").is_file()


def test_demo_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cloud.txt"
    bad.write_text("1 2 3\n")
    assert lattice_main(["demo", "--input", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert ".ply or .npy" in capsys.readouterr().err
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 3)))
    assert lattice_main(["demo", "--input", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "P > 0" in capsys.readouterr().err
    assert lattice_main(["demo", "--input", str(tmp_path / "no.ply"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "junk.ply").write_bytes(b"not a ply")
    assert (
        lattice_main(["demo", "--input", str(tmp_path / "junk.ply"), "--out", str(tmp_path)]) == 2
    )
    assert "not a readable PLY" in capsys.readouterr().err


def test_training_script_trains_and_writes_replayable_fixtures(tmp_path: Path) -> None:
    out = tmp_path / "trained"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "train_segmentation.py"),
            "--model",
            "minkunet",
            "--steps",
            "3",
            "--scenes",
            "3",
            "--val",
            "1",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    record = json.loads((out / "minkunet.json").read_text())
    assert record["training"]["steps"] == 3 and 0.0 <= record["validation"]["miou"] <= 1.0
    assert (out / "minkunet.safetensors").stat().st_size > 100_000
    for variant in seg.VARIANTS:
        result = replay_archive(out / f"minkunet-{variant}.tar.gz")
        assert result.passed, [c.reasons for c in result.cases]


def test_shipped_weights_reproduce_shipped_fixtures() -> None:
    """The shipped archives were generated from the shipped weights (torch side)."""
    import torch
    from lattice_conformance.archive import open_fixture_archive
    from torch_lattice.artifact import load_lattice_program

    model = seg.load_trained_model("minkunet").to(torch.float16)
    with open_fixture_archive(seg.fixture_path("minkunet", "f16")) as archive:
        spec = next(c for c in archive.cases if c.name.startswith("small"))
        case = archive.load_case(spec)
        program = load_lattice_program(archive.artifact_dir)
    coords = torch.from_numpy(case.inputs["x_coords"])
    feats = torch.from_numpy(case.inputs["x_features"])
    from torch_lattice import SparseTensor

    with torch.no_grad():
        eager = model(SparseTensor(coords, feats))
        via_artifact = program(SparseTensor(coords, feats))
    expected = case.expected["y"]
    for got in (eager, via_artifact):
        order = seg.align_rows(expected.coords, got.coords.numpy())  # type: ignore[union-attr]
        np.testing.assert_allclose(
            got.feats.float().numpy()[order],
            expected.features.astype(np.float32),  # type: ignore[union-attr]
            atol=case.atol,
            rtol=case.rtol,
        )


def test_demo_with_a_given_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lattice_conformance.archive import copy_artifact, open_fixture_archive

    with open_fixture_archive(seg.fixture_path("spvcnn", "int8")) as archive:
        artifact = copy_artifact(archive, tmp_path / "given.lattice")
    out = tmp_path / "out"
    args = ["demo", "--artifact", str(artifact), "--out", str(out), "--voxels", "3000"]
    assert lattice_main(args) == 0
    printed = capsys.readouterr().out
    assert "Artifact user: verified by native MLIR" in printed and "packed" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["artifacts"]["user"]["miou"]["mlx"] > 0.7
    assert report["fixtures"] == {}

    graph = artifact / "graph.mlir"
    graph.write_text(graph.read_text().replace("lattice.ir_version = 2", "lattice.ir_version = 1"))
    assert lattice_main(args) == 2
    assert "does not verify" in capsys.readouterr().err


HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e"
"""A window-title escape, a screen clear and a right-to-left override."""


def test_demo_prints_names_from_the_command_line_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """File names reach the summary (artifact, cloud, output folder): printed, never obeyed."""
    from lattice_conformance.archive import copy_artifact, open_fixture_archive

    with open_fixture_archive(seg.fixture_path("spvcnn", "int8")) as archive:
        artifact = copy_artifact(archive, tmp_path / f"given{HOSTILE}.lattice")
    scene = seg.make_scene(78, n_voxels=1500)
    cloud = tmp_path / f"cloud{HOSTILE}.ply"
    write_ply(cloud, scene.points.astype(np.float32))
    out = tmp_path / f"out{HOSTILE}"
    args = ["demo", "--artifact", str(artifact), "--input", str(cloud), "--out", str(out)]
    assert lattice_main(args) == 0, capsys.readouterr()
    printed = capsys.readouterr()
    for stream in (printed.out, printed.err):
        assert not any(c in stream for c in "\x1b\x07\u202e"), stream
    assert "given\\x1b]0;owned\\x07\\x1b[2J\\u202e.lattice" in printed.out
    assert "cloud\\x1b]0;owned" in printed.out and "out\\x1b]0;owned" in printed.out
    assert (out / "report.json").is_file()


@pytest.mark.parametrize("where", ["out_is_artifact", "out_inside_artifact"])
def test_demo_never_writes_into_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """``--out`` naming the given artifact (or a folder in it) added files to the user's bundle."""
    from lattice_conformance.archive import copy_artifact, open_fixture_archive

    with open_fixture_archive(seg.fixture_path("spvcnn", "int8")) as archive:
        artifact = copy_artifact(archive, tmp_path / "given.lattice")
    out = artifact if where == "out_is_artifact" else artifact / "demo"
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    args = ["demo", "--artifact", str(artifact), "--out", str(out), "--voxels", "1500"]
    assert lattice_main(args) == 2
    err = capsys.readouterr().err
    assert "refusing to write" in err and "Traceback" not in err
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before and not (artifact / "demo").exists()


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_demo_input_that_is_not_a_file_is_named(tmp_path: Path, kind: str) -> None:
    """``.npy`` went to ``np.load``: a FIFO blocked it, ``/dev/zero`` was called pickled data;
    now the project's one ``.npy`` reader refuses both, before any output folder is made."""
    cloud = tmp_path / "cloud.npy"
    what = special_file(cloud, kind)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "lattice_tools", "demo", "--input", str(cloud), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and f"is {what}; name a regular file" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


def test_demo_out_that_is_a_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_text("mine")
    assert lattice_main(["demo", "--out", str(out), "--no-fixtures"]) == 2
    assert "is a file; name a directory" in capsys.readouterr().err
    assert out.read_text() == "mine"
