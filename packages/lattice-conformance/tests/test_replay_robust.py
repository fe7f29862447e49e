"""``conformance replay`` survives hostile archives: a report always, exit 2, no leftovers.

A checksum-consistent archive can still carry a graph that crashes the native
parser, or a manifest with absurd numbers or nesting; before, replay died with
a traceback (or a segfault), wrote no report and left its extraction
directory in the temporary folder.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy as stnp
from lattice_conformance import native_check, replay
from lattice_conformance.archive import FixtureCase, SparseArrays, write_fixture_archive
from lattice_conformance.replay import main as replay_main


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Replay's extraction directories go here, so the test can see any left behind."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def _archive(tmp_path: Path, graph: str, **case: Any) -> Path:
    art = tmp_path / "model.lattice"
    art.mkdir(exist_ok=True)
    (art / "graph.mlir").write_text(graph)
    (art / "weights.safetensors").write_bytes(stnp.save({"w": np.ones((2, 2), np.float32)}))
    coords = np.array([[0, 0, 0, 0]], np.int32)
    feats = np.ones((1, 2), np.float32)
    fixture = FixtureCase(
        name="c0",
        inputs={"x_coords": coords, "x_features": feats, "x_active": np.array([1], np.int32)},
        expected={"y": SparseArrays(coords, feats)},
        atol=case.get("atol", 1e-3),
        rtol=1e-3,
    )
    return write_fixture_archive(tmp_path / "a.tar.gz", art, [fixture])


def _run(archive: Path, tmp_path: Path, scratch: Path) -> dict[str, Any]:
    report = tmp_path / "report.json"
    code = replay_main([str(archive), "--report", str(report), "--no-progress"])
    assert report.is_file(), "a report is always written"
    data: dict[str, Any] = json.loads(report.read_text())
    data["exit_code"] = code
    assert list(scratch.iterdir()) == [], "the extraction directory must be removed"
    return data


# An attribute array 10,000 deep: it segfaulted the native parser before its
# nesting limit (issue 15); with the limit it is a clean rejection.  Either way
# replay must end with a report, exit 2 and no leftovers.
HOSTILE_GRAPH = "module attributes {x = " + "[" * 10_000 + "]" * 10_000 + "} {}\n"


def test_a_hostile_graph_gives_a_report_and_exit_2(tmp_path: Path, private_tmp: Path) -> None:
    data = _run(_archive(tmp_path, HOSTILE_GRAPH), tmp_path, private_tmp)
    assert data["exit_code"] == 2
    assert data["cases"] == []
    assert "crashed the parser" in data["error"] or "does not load" in data["error"], data


def test_a_parser_crash_is_one_recorded_failure(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child really dies by SIGSEGV (a NULL read), whatever graph it gets.
    monkeypatch.setattr(native_check, "_CHILD", "import ctypes; ctypes.string_at(0)")
    data = _run(_archive(tmp_path, "module {}\n"), tmp_path, private_tmp)
    assert data["exit_code"] == 2
    assert "crashed the parser (SIGSEGV)" in data["error"]


def test_a_stalled_verification_is_stopped(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_check, "_CHILD", "import time; time.sleep(60)")
    message = native_check.native_verification_crash(tmp_path / "graph.mlir", timeout_s=0.5)
    assert message is not None and "ran past 0.5 s" in message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("9" * 401, "integer of 401 digits"),
        ("9" * 5001, "integer of 5001 digits"),
        ("NaN", "holds NaN"),
        ("[" * 100_000 + "]" * 100_000, "nests 100003 levels deep"),
    ],
)
def test_absurd_manifests_give_a_report_and_exit_2(
    tmp_path: Path, private_tmp: Path, raw: str, message: str
) -> None:
    import gzip
    import io
    import tarfile

    good = _archive(tmp_path, "module {}\n", atol=0.125)
    buf = io.BytesIO()
    with tarfile.open(good, "r:gz") as src, tarfile.open(fileobj=buf, mode="w") as dst:
        for member in src.getmembers():
            f = src.extractfile(member)
            assert f is not None
            data = f.read()
            if member.name == "manifest.json":
                data = data.replace(b'"atol": 0.125', f'"atol": {raw}'.encode())
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(gzip.compress(buf.getvalue()))
    out = _run(bad, tmp_path, private_tmp)
    assert out["exit_code"] == 2
    assert message in out["error"] and out["error"].endswith("[bad_manifest]")


def test_an_internal_error_still_writes_the_report(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("simulated")

    monkeypatch.setattr(replay, "native_verification_crash", broken)
    data = _run(_archive(tmp_path, "module {}\n"), tmp_path, private_tmp)
    assert data["exit_code"] == 2
    assert data["error"] == "replay failed: MemoryError: simulated"
