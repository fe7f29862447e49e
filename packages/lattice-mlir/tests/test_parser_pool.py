"""The parser threads behind verify / import_plan: reused contexts, independent calls.

Every call runs on a long-lived parser thread that owns a ready MLIR context
and hands it to the next call (lib/LatticeParserPool.cpp).  These tests hold
the pool to what a fresh context per call gave: a call's verdict,
diagnostics and payload do not depend on the calls before it or beside it,
the number of threads and the memory the contexts keep are bounded, and a
forked child still verifies.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import lattice_mlir
import pytest

TEST_DIR = Path(__file__).resolve().parent.parent / "test"
MAX_THREADS = 8  # pool_limits::kMaxThreads in include/lattice/LatticeParserPool.h


def invalid_chunks() -> dict[str, str]:
    """Every module of the invalid corpus (split at its `// -----` markers), by file and index."""
    chunks: dict[str, str] = {}
    for path in sorted((TEST_DIR / "invalid").glob("*.mlir")):
        text = path.read_text(encoding="utf-8").replace(
            "@SCHEMA_DIGEST@", lattice_mlir.SCHEMA_DIGEST
        )
        for i, chunk in enumerate(text.split("// -----")):
            chunks[f"{path.stem}#{i}"] = chunk
    return chunks


@pytest.fixture(scope="module")
def bad() -> dict[str, str]:
    chunks = invalid_chunks()
    assert len(chunks) > 100
    return chunks


def outcome(text: str) -> tuple[bool, str, Any]:
    status, plan = lattice_mlir.verify_and_import(text)
    return status.valid, status.diagnostics, plan


def fresh_process_diagnostics(text: str) -> str:
    """The diagnostics of ``text`` as the very first call of a new process."""
    code = (
        "import json, sys, lattice_mlir; "
        "print(json.dumps(lattice_mlir.verify(sys.stdin.read()).diagnostics))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True
    )
    diagnostics: str = json.loads(done.stdout)
    return diagnostics


def test_a_bad_graph_after_good_ones_gives_its_first_call_diagnostics(
    valid_modules: dict[str, str], bad: dict[str, str]
) -> None:
    # One graph per kind of failure: a pre-check refusal, a parse error, an op
    # rule, a type rule, a stride rule and an artifact rule.
    samples = [
        "forward_reference#0",
        "unknown_op#0",
        "attr.minimum#0",
        "type.params#0",
        "stride.divides#0",
        "artifact_digest_mismatch#0",
    ]
    for name in samples:
        expected = fresh_process_diagnostics(bad[name])
        assert "error:" in expected, name
        for _ in range(3):
            for text in valid_modules.values():
                assert lattice_mlir.verify(text).valid
            assert outcome(bad[name]) == (False, expected, None), name


def test_outcomes_do_not_depend_on_the_calls_before(
    valid_modules: dict[str, str], bad: dict[str, str]
) -> None:
    texts = list(valid_modules.values()) + list(bad.values())
    first = [outcome(t) for t in texts]
    assert sum(valid for valid, _, _ in first) == len(valid_modules)
    assert all(diagnostics for valid, diagnostics, _ in first if not valid)
    order = list(range(len(texts)))
    for seed in range(3):  # past pool_limits::kContextMaxUses calls on one thread
        random.Random(seed).shuffle(order)
        for i in order:
            assert outcome(texts[i]) == first[i], i


def test_many_threads_at_once_get_the_sequential_outcomes(
    valid_modules: dict[str, str], bad: dict[str, str]
) -> None:
    texts = list(valid_modules.values()) + list(bad.values())[::4]
    expected = [outcome(t) for t in texts]
    errors: list[str] = []

    def work(seed: int) -> None:
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        for i in order:
            if outcome(texts[i]) != expected[i]:
                errors.append(f"text {i} differs under concurrency")

    # More callers than parser threads: the extra ones wait for a free thread.
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(2 * MAX_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert 1 <= parser_threads() <= MAX_THREADS


def parser_threads() -> int:
    """This process's parser threads (kParserThreadName in LatticeParserPool.h)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            count += (task / "comm").read_text(encoding="ascii").strip() == "lattice-parser"
        except OSError:  # a thread that ended meanwhile
            continue
    return count


def resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_stays_bounded_over_many_distinct_graphs(valid_modules: dict[str, str]) -> None:
    """2,000 graphs, each with its own 16 KiB of distinct strings (32 MiB in all).

    A context keeps every string it uniqued; the parser threads replace
    theirs after a bounded number of calls and bytes, so resident memory
    levels off instead of growing with everything ever parsed.
    """
    template = valid_modules["unet_block"]
    keys = sorted(set(re.findall(r'storage_key = "([^"]+)"', template)))
    assert keys

    def variant(i: int) -> str:
        text = template
        for key in keys:
            unique = f"{key}.{i}." + "k" * (16384 // len(keys))
            text = text.replace(f'"{key}"', f'"{unique}"')  # the storage key, a string
        return text

    count = 2000
    distinct = count * 16384
    for i in range(200):  # warm up: threads started, allocator pools grown
        assert lattice_mlir.verify(variant(i)).valid
    before = resident_bytes()
    start = time.perf_counter()
    for i in range(200, count):
        assert lattice_mlir.verify(variant(i)).valid
    grown = resident_bytes() - before
    assert time.perf_counter() - start < 60
    assert grown < distinct // 4, f"resident memory grew {grown >> 20} MiB"


def test_a_forked_child_verifies(valid_modules: dict[str, str]) -> None:
    text = valid_modules["unet_block"]
    assert lattice_mlir.verify(text).valid  # the parent's pool has a thread now
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 0 if lattice_mlir.verify(text).valid and lattice_mlir.import_plan(text) else 1
        os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung verifying a graph")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
