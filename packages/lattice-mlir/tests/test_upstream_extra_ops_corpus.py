"""Upstream's corpus files of the normalised and upsampling ops, against this dialect.

The four valid files must verify and import as plans, and the four invalid
ones must be rejected for the defect their first line names (upstream's
digest substituted by this dialect's first: the only change migration makes
to them).  ``normalized_subm_conv3d_basic`` names its one sparse input
``coords``/``features``/``active``, which the artifact ABI check refuses (a
separate rule, not this op's); its module is verified op by op here, the
artifact check belongs to the migration tests.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import lattice_mlir
import pytest

UPSTREAM_DIGEST = "1380f1e819fc0eb1af587202ecec3c14ec2c981d249333c5061f0263f82072ad"


def _corpus() -> Path:
    """``$LATTICE_UPSTREAM/corpus``, else the nearest ``shared/upstream/corpus`` above the repo."""
    if os.environ.get("LATTICE_UPSTREAM"):
        return Path(os.environ["LATTICE_UPSTREAM"]) / "corpus"
    repo = Path(__file__).resolve().parents[3]
    for parent in repo.parents:
        if (parent / "shared" / "upstream" / "corpus").is_dir():
            return parent / "shared" / "upstream" / "corpus"
    raise AssertionError(f"upstream corpus not found above {repo}; set LATTICE_UPSTREAM")


def _text(kind: str, name: str) -> str:
    text = (_corpus() / kind / f"{name}.mlir").read_text(encoding="utf-8")
    assert UPSTREAM_DIGEST in text
    return text.replace(UPSTREAM_DIGEST, lattice_mlir.SCHEMA_DIGEST)


INVALID = {
    "normalized_conv_bad_eps": (
        "'lattice.normalized_subm_conv3d' op attribute 'eps' = 0 must be > 0"
    ),
    "target_normalized_conv_transpose_bad_eps": (
        "'lattice.target_normalized_conv_transpose3d' op attribute 'eps' = 0 must be > 0"
    ),
    "pool_transpose_bad_stride": (
        "'lattice.pool_transpose3d' op attribute 'stride' = (2, 0, 2) must have every component"
    ),
    "trilinear_upsample_bad_stride": (
        "'lattice.trilinear_upsample3d' op attribute 'stride' = (2, 0, 2) must have every component"
    ),
}
VALID = (
    "pool_transpose3d_target",
    "target_normalized_conv_transpose3d",
    "trilinear_upsample3d_target",
)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_file_is_rejected_for_its_defect(name: str) -> None:
    text = _text("invalid", name)
    first = text.splitlines()[0]
    assert first.startswith("// Invalid:"), first
    status = lattice_mlir.verify(text)
    assert not status.valid
    assert INVALID[name] in status.diagnostics, status.diagnostics


@pytest.mark.parametrize("name", VALID)
def test_valid_file_verifies_and_imports(name: str) -> None:
    text = _text("valid", name)
    status = lattice_mlir.verify(text)
    assert status.valid, status.diagnostics
    plan = lattice_mlir.import_plan(text)
    assert any(op["name"].startswith("lattice.") for op in plan["ops"])


def test_normalized_subm_basic_ops_verify() -> None:
    text = _text("valid", "normalized_subm_conv3d_basic")
    run = subprocess.run(
        [lattice_mlir.lattice_opt_path(), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "lattice.normalized_subm_conv3d" in run.stdout
