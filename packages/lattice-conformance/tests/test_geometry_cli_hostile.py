"""``geometry-profile`` and ``geometry-codec`` never write over what they read; names print escaped.

``--report`` naming the cloud, the weights or a file inside the model used
to replace it with JSON (the report went through the atomic writer without
its inputs); ``geometry-codec`` wrote ``--output`` or ``--report`` over its
``--input``, or the report over the coded file; a file name holding a
terminal escape reached the terminal raw.  Clouds and model copies are
built here, in ``tmp_path``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lattice_conformance.codec.cli import main as codec_main
from lattice_conformance.geometry import main as profile_main
from lattice_conformance.ply import write_ply
from lattice_contract.testing import SPECIAL_KINDS, special_file

# Subcommands are called here without the command entry that sets up logging.
pytestmark = pytest.mark.usefixtures("command_logging")

MODEL = Path(__file__).resolve().parents[3] / "examples" / "geometry" / "model.lattice"
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e"
"""A window-title escape, a screen clear and a right-to-left override."""


def _cloud(path: Path, levels: int = 4, count: int = 60) -> Path:
    rng = np.random.default_rng(5)
    write_ply(path, rng.integers(0, 1 << levels, (count, 3)).astype(np.float32))
    return path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("victim", ["cloud", "weights", "inside_model", "model"])
def test_profile_report_never_replaces_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], victim: str
) -> None:
    model = Path(shutil.copytree(MODEL, tmp_path / "model.lattice"))
    cloud = _cloud(tmp_path / "cloud.ply")
    report = {
        "cloud": cloud,
        "weights": model / "weights.safetensors",
        "inside_model": model / "report.json",
        "model": model,
    }[victim]
    before = _snapshot(tmp_path)
    argv = ["--weights", str(model), "--input", str(cloud), "--levels", "4", "--report"]
    assert profile_main([*argv, str(report), "--runtime", "torch"]) == 2
    err = capsys.readouterr().err
    assert "refusing to write" in err and "Traceback" not in err
    assert _snapshot(tmp_path) == before


def test_profile_prints_the_cloud_name_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cloud = _cloud(tmp_path / f"cloud{HOSTILE}.ply")
    argv = ["--weights", str(MODEL), "--input", str(cloud), "--levels", "4", "--runtime", "torch"]
    assert profile_main([*argv, "--repeat", "1", "--warmup", "0", "--codec", "off"]) == 0
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in "\x1b\x07\u202e"), out
    assert "cloud\\x1b]0;owned\\x07\\x1b[2J\\u202e.ply" in out


def _encode(cloud: Path, output: Path, *extra: str) -> list[str]:
    return ["encode", "--input", str(cloud), "--output", str(output), "--levels", "4", *extra]


@pytest.mark.parametrize("clash", ["output_is_input", "report_is_input", "report_is_output"])
def test_codec_encode_never_writes_over_an_input_or_its_own_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clash: str
) -> None:
    cloud = _cloud(tmp_path / "cloud.ply")
    coded = tmp_path / "cloud.lgc"
    argv = {
        "output_is_input": _encode(cloud, cloud),
        "report_is_input": _encode(cloud, coded, "--report", str(cloud)),
        "report_is_output": _encode(cloud, coded, "--report", str(coded)),
    }[clash]
    before = _snapshot(tmp_path)
    assert codec_main(argv) == 2
    err = capsys.readouterr().err
    assert "refusing to write" in err and "Traceback" not in err
    assert _snapshot(tmp_path) == before


def test_codec_decode_never_writes_over_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cloud = _cloud(tmp_path / "cloud.ply")
    coded = tmp_path / "cloud.lgc"
    assert codec_main(_encode(cloud, coded)) == 0
    before = _snapshot(tmp_path)
    for argv in (
        ["decode", "--input", str(coded), "--output", str(coded)],
        ["decode", "--input", str(coded), "--output", str(cloud), "--report", str(coded)],
    ):
        assert codec_main(argv) == 2, argv
        assert "refusing to write" in capsys.readouterr().err
        assert _snapshot(tmp_path) == before


def test_codec_prints_file_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cloud = _cloud(tmp_path / f"in{HOSTILE}.ply")
    coded = tmp_path / f"coded{HOSTILE}.lgc"
    assert codec_main(_encode(cloud, coded)) == 0
    assert codec_main(["decode", "--input", str(coded), "--output", str(tmp_path / "b.ply")]) == 0
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in "\x1b\x07\u202e"), out
    assert out.count("in\\x1b]0;owned") == 1 and out.count("coded\\x1b]0;owned") == 2


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_inputs_that_are_not_files_are_named_and_never_read(tmp_path: Path, kind: str) -> None:
    """``decode`` blocked on a FIFO and read ``/dev/zero`` until memory ran out; the profile
    said such a cloud did not exist.  Run as processes: the old behaviour never returns."""
    coded, cloud = tmp_path / "c.lgc", tmp_path / "c.ply"
    what = special_file(coded, kind)
    special_file(cloud, kind)
    conformance = [sys.executable, "-m", "lattice_conformance"]
    commands = [
        ["geometry-codec", "decode", "--input", str(coded), "--output", str(tmp_path / "o.ply")],
        ["geometry-profile", "--weights", str(MODEL), "--input", str(cloud), "--runtime", "torch"],
    ]
    for command in commands:
        done = subprocess.run(
            [*conformance, *command], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 2 and f"is {what}; name a regular file" in done.stderr
        assert "Traceback" not in done.stderr
