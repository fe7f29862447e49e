"""Replay of upstream's own fixture tree (mlx-lattice 0.6, ``../shared/upstream/fixtures``).

Upstream's numbers are an independent oracle: every case that uses only ops
shared with upstream must replay within its manifest tolerances on MLX and on
torch.  The tree is read where it lies (never copied into the repository); it
is migrated into a temporary directory first, as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from lattice_conformance.replay import main, replay_archive
from lattice_conformance.upstream_tree import UPSTREAM_DIGESTS, is_upstream_tree

SHARED_OPS_CASES = (
    "sparse_classifier",
    "point_voxel",
    "quantized_classifier_int8",
    "transpose_convolution",
    "sparse_reindex",
)
"""The upstream cases that use only ops Lattice shares with upstream."""


def _upstream_fixtures() -> Path:
    """``$LATTICE_UPSTREAM/fixtures``, else ``shared/upstream/fixtures`` above the repository."""
    if os.environ.get("LATTICE_UPSTREAM"):
        return Path(os.environ["LATTICE_UPSTREAM"]) / "fixtures"
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "shared" / "upstream" / "fixtures").is_dir():
            return parent / "shared" / "upstream" / "fixtures"
    pytest.fail(
        "upstream's fixtures (shared/upstream/fixtures) are not found above the repository; "
        "set LATTICE_UPSTREAM to the upstream data folder"
    )


def _migrate(src: Path, dst: Path) -> Path:
    """``lattice migrate SRC DST`` when the CLI has it, else the digest substitution it performs."""
    lattice = Path(sys.executable).with_name("lattice")
    probe = subprocess.run([str(lattice), "--help"], capture_output=True, text=True, check=False)
    if "migrate" in probe.stdout + probe.stderr:
        subprocess.run([str(lattice), "migrate", str(src), str(dst)], check=True)
        return dst
    from lattice_contract import SCHEMA_DIGEST

    shutil.copytree(src, dst)
    for graph in dst.glob("*/graph.mlir"):
        text = graph.read_text()
        for digest in UPSTREAM_DIGESTS:
            text = text.replace(digest, SCHEMA_DIGEST)
        graph.write_text(text)
    return dst


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _migrate(_upstream_fixtures(), tmp_path_factory.mktemp("upstream") / "fixtures")


@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_shared_op_cases_replay_within_upstream_tolerances(migrated: Path, runtime: str) -> None:
    result = replay_archive(migrated, runtime=runtime, coords="lattice-units")
    assert result.error is None, result.error
    cases = {c.name: c for c in result.cases}
    assert set(SHARED_OPS_CASES) <= set(cases)
    for name in SHARED_OPS_CASES:
        case = cases[name]
        assert case.passed, (name, case.reasons)
        for out in case.outputs:
            assert out.abs_error is not None and out.abs_error.max <= case.atol + 1e-12
            if out.coordinates is not None:
                assert out.coordinates.equal
    assert result.producer == {
        "tree_schema": "torch_lattice_e2e_fixtures/v1",
        "coords": "lattice-units",
    }


def test_lattice_unit_coordinates_need_the_flag_and_an_archive_of_the_tree_replays(
    migrated: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "tree.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(migrated, arcname="fixtures")
    assert is_upstream_tree(packed) and is_upstream_tree(migrated)
    plain = replay_archive(packed, runtime="mlx")
    reasons = {c.name: " ".join(c.reasons) for c in plain.cases}
    assert "--coords lattice-units" in reasons["pool_transpose"]  # stride-2 input at x = 1
    assert all(c.passed for c in plain.cases if c.name in SHARED_OPS_CASES)


def test_an_unmigrated_tree_is_refused_with_the_fix() -> None:
    result = replay_archive(_upstream_fixtures(), runtime="torch")
    assert result.cases and not any(c.passed for c in result.cases)
    assert all("lattice migrate" in " ".join(c.reasons) for c in result.cases)
    assert result.exit_code == 1


def test_cli_report_and_plot(
    migrated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, plot = tmp_path / "r.json", tmp_path / "e.png"
    code = main(
        [str(migrated), "--runtime", "torch", "--coords", "lattice-units",
         "--report", str(report), "--plot", str(plot)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "lattice units" in out and "sparse_reindex" in out
    payload = json.loads(report.read_text())
    assert payload["archive"]["producer"]["coords"] == "lattice-units"
    assert {c["name"] for c in payload["cases"] if c["passed"]} >= set(SHARED_OPS_CASES)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert code == (0 if payload["summary"]["all_passed"] else 1)
