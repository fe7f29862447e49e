"""The coverage-guided fuzz run (Atheris + libFuzzer) and its regression inputs.

``fuzz/fuzz_native.py`` feeds mutated MLIR text through the native importer,
the plan freezer and the type checker, and corrupted payloads of every
module that verifies through the freezer.  CI runs a fixed number of
executions with a fixed seed; the run fails on a crash, an escaped exception
other than ``PlanError``, a rejection without a diagnostic, an input slower
than a second per megabyte, or memory that keeps growing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import atheris  # noqa: F401  (a test requirement: a missing one fails, never skips)

FUZZ_DIR = Path(__file__).resolve().parent.parent / "fuzz"
CI_RUNS = 20_000


def test_ci_fuzz_run_passes(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(FUZZ_DIR / "fuzz_native.py"),
            "--workdir",
            str(tmp_path),
            "--runs",
            str(CI_RUNS),
            "--seed",
            "20261201",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    crashes = sorted((tmp_path / "crashes").glob("*"))
    assert run.returncode == 0 and not crashes, (
        f"fuzz run failed ({run.returncode}); saved inputs {crashes}:\n{run.stderr[-4000:]}"
    )
    assert f"Done {CI_RUNS} runs" in run.stderr, run.stderr[-2000:]
    executed = re.search(r"stat::number_of_executed_units:\s+(\d+)", run.stderr)
    assert executed and int(executed.group(1)) == CI_RUNS
    seeds = list((tmp_path / "seeds").glob("*.mlir"))
    assert len(seeds) > 60  # the lit corpus and the upstream corpus, both read


def test_dictionary_is_generated_from_the_schema(tmp_path: Path) -> None:
    sys.path.insert(0, str(FUZZ_DIR))
    try:
        import fuzz_native
    finally:
        sys.path.remove(str(FUZZ_DIR))
    from lattice_contract.dialect import SCHEMA

    tokens = set(fuzz_native.dictionary_tokens())
    for op in SCHEMA.ops.values():
        assert op.mlir_name in tokens
        assert all(f"{a.name} = " in tokens for a in op.attributes)
    for enum in SCHEMA.enums:
        assert all(f"#lattice.{enum.__mnemonic__}<{m.value}>" in tokens for m in enum)
    lines = fuzz_native.write_dictionary(tmp_path / "d").read_text().splitlines()
    assert len(lines) == len(tokens)
    assert all(re.fullmatch(r'"(?:[ !#-\[\]-~]|\\x[0-9a-f]{2})*"', line) for line in lines)


_REPLAY = """
import json, sys, time
import lattice_mlir
from lattice_contract.plan import PlanError, RuntimePlan
out = []
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    text = data.decode("utf-8", errors="replace")
    start = time.perf_counter()
    status = lattice_mlir.verify(text)
    seconds = time.perf_counter() - start
    if status.valid:
        try:
            RuntimePlan.from_native(lattice_mlir.import_plan(text))
        except PlanError:
            pass
    out.append([path, len(data), status.valid, status.diagnostics, seconds])
print(json.dumps(out))
"""


def test_regression_inputs_replay_without_crash() -> None:
    inputs = sorted(p for p in (FUZZ_DIR / "regressions").glob("*") if p.suffix != ".md")
    assert len(inputs) >= 8
    run = subprocess.run(
        [sys.executable, "-c", _REPLAY, *map(str, inputs)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for path, size, valid, diagnostics, seconds in json.loads(run.stdout):
        assert not valid and diagnostics.strip(), path  # each one is hostile
        assert seconds <= 0.05 + size / 1e6, (path, seconds)
