"""Short CI runs of the input fuzzer (``fuzz/fuzz_inputs.py``): each target, a fixed seed.

The targets are the artifact loader with a first call on both runtimes, the
PLY / ``.npy`` / SemanticKITTI readers and ``convert-checkpoint``'s kernel
spec and checkpoint.  A run fails on a crash, an exception other than a
refusal, an input slower than one second per megabyte (plus an allowance) or
growing memory; the long runs are reported in ``fuzz/README.md``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import atheris  # noqa: F401  (a test requirement: a missing one fails, never skips)
import pytest

FUZZ = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_inputs.py"
RUNS = {"ply": 600, "npy": 600, "kitti": 600, "convert": 200, "artifact": 150}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_ci_input_fuzz_run_passes(tmp_path: Path, target: str) -> None:
    runs = RUNS[target]
    cmd = [sys.executable, str(FUZZ), "--target", target, "--workdir", str(tmp_path)]
    run = subprocess.run(
        [*cmd, "--runs", str(runs), "--seed", "20261207"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    crashes = sorted((tmp_path / target / "crashes").glob("*"))
    assert run.returncode == 0 and not crashes, (
        f"fuzz run failed ({run.returncode}); saved inputs {crashes}:\n{run.stderr[-4000:]}"
    )
    assert f"Done {runs} runs" in run.stderr, run.stderr[-2000:]
    assert re.search(rf"fuzz_inputs\[{target}\]: {runs} executions", run.stderr)
    assert list((tmp_path / target / "seeds").glob("seed-*"))
