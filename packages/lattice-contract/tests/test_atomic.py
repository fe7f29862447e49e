"""Writes that never lose the destination: kill -9 in the swap window, at random
points, two writers at once, leftovers of interrupted saves.  (File modes: lattice-conformance's
test_file_modes.py, over every writer.)

Writers run in child processes (``sys.executable``) so that they can really be
killed with SIGKILL; the parent then looks at what is on disk.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lattice_contract.artifact import (
    WriterLockedError,
    atomic,
    atomic_bundle_write,
    atomic_write_file,
    path_lock,
    recover_interrupted,
)
from lattice_contract.testing import kill_when_paused

WEIGHT_BYTES = 2 << 20

# The child writes version VERSION of a bundle: graph.mlir names the version and
# the weights are WEIGHT_BYTES of that version's byte, written in 64 KiB pieces
# (so a save takes long enough to be killed in the middle of it).
CHILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from lattice_contract.artifact import atomic
    from lattice_contract.artifact.bundle import atomic_bundle_write

    target, mode, step, marker = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    size = int(sys.argv[5])

    def write_version(version):
        def write(tmp):
            (tmp / "graph.mlir").write_text(version)
            with open(tmp / "weights.safetensors", "wb") as f:
                for _ in range(size // 65536):
                    f.write(version.encode()[:1] * 65536)
        return write

    if step != "none":
        def pause(name):
            if name == step:
                Path(marker).write_text(name)
                time.sleep(60)
        atomic._test_hook = pause
    if mode == "fallback":
        atomic._exchange_impl = lambda a, b: False
    if mode == "loop":
        n = 0
        while True:
            atomic_bundle_write(target, write_version("AB"[n % 2]))
            n += 1
    elif mode == "race":
        locked = 0
        for n in range(int(step_count := marker)):
            try:
                atomic_bundle_write(target, write_version(sys.argv[6]))
            except atomic.WriterLockedError:
                locked += 1
        print(locked)
    else:
        atomic_bundle_write(target, write_version("N"))
    """
)


def _child(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _write_version(version: str, size: int = WEIGHT_BYTES) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        (tmp / "graph.mlir").write_text(version)
        (tmp / "weights.safetensors").write_bytes(version.encode()[:1] * size)

    return write


def _version(target: Path, size: int = WEIGHT_BYTES) -> str:
    """The version a complete bundle holds; fails on a missing or mixed/partial one."""
    assert target.is_dir(), f"{target} is missing"
    assert sorted(p.name for p in target.iterdir()) == ["graph.mlir", "weights.safetensors"]
    version = (target / "graph.mlir").read_text()
    assert (target / "weights.safetensors").read_bytes() == version.encode()[:1] * size
    return version


def _siblings(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name != target.name)


def _kill_at(target: Path, mode: str, step: str) -> None:
    marker = target.parent / "marker"
    kill_when_paused(_child(str(target), mode, step, str(marker), str(WEIGHT_BYTES)), marker)


@pytest.mark.parametrize(("step", "expected"), [("before_swap", "O"), ("after_swap", "N")])
def test_kill_inside_the_exchange_window_keeps_a_complete_bundle(
    tmp_path: Path, step: str, expected: str
) -> None:
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("O"))
    _kill_at(target, "exchange", step)
    assert _version(target) == expected
    # The dead writer's lock is gone with it; the next save removes its leftovers.
    assert any(name.startswith(".m.lattice.tmp-") for name in _siblings(target))
    atomic_bundle_write(target, _write_version("A"))
    assert _version(target) == "A"
    assert _siblings(target) == []


def test_kill_between_the_fallback_renames_is_recovered(tmp_path: Path) -> None:
    # Without RENAME_EXCHANGE the old tree is moved aside first; a kill exactly
    # there leaves it in a backup, which the next writer (under the lock) moves back.
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("O"))
    _kill_at(target, "fallback", "between_renames")
    assert not target.exists()
    assert any(name.startswith(".m.lattice.old-") for name in _siblings(target))
    with path_lock(target) as locked_at:
        recover_interrupted(target, before=locked_at)
    assert _version(target) == "O"
    assert _siblings(target) == []


def test_the_fallback_swap_replaces_and_cleans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic, "_exchange_impl", lambda a, b: False)
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("O", 16))
    atomic_bundle_write(target, _write_version("N", 16))
    assert _version(target, 16) == "N"
    assert _siblings(target) == []


def test_the_exchange_is_really_used_on_linux(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    assert atomic._exchange(a, b)
    assert (b / "x").read_text() == "a" and not (a / "x").exists()


def test_a_save_forks_no_process_while_it_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child forked under the lock shares it until it execs (the old libc lookup forked).

    ``ctypes.util.find_library`` runs ``ldconfig``; a writer killed while
    that child had not exec'd yet left the lock taken after its own death.
    """
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("O", 16))
    atomic._renameat2.cache_clear()  # the lookup a fresh process makes on its first save

    def no_fork(*args: object, **kwargs: object) -> None:
        raise AssertionError("a save started a process")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_fork)
    monkeypatch.setattr(os, "fork", no_fork)
    atomic_bundle_write(target, _write_version("N", 16))
    assert _version(target, 16) == "N"
    assert atomic._renameat2() is not None  # the exchange itself was available


KILL_TRIALS = 15


def test_kill_at_random_points_finds_the_old_or_the_new_bundle(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("B"))
    rng = random.Random(20)
    seen: dict[str, int] = {}
    for _ in range(KILL_TRIALS):
        proc = _child(str(target), "loop", "none", "-", str(WEIGHT_BYTES))
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        version = _version(target)
        seen[version] = seen.get(version, 0) + 1
    assert set(seen) <= {"A", "B"}
    atomic_bundle_write(target, _write_version("A"))
    assert _siblings(target) == []


def test_two_processes_saving_one_path_leave_one_complete_bundle(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    saves = 12
    procs = [
        _child(str(target), "race", "none", str(saves), str(WEIGHT_BYTES // 4), version)
        for version in ("P", "Q")
    ]
    locked = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()  # no bare OSError escaped
        locked.append(int(out))
    assert _version(target, WEIGHT_BYTES // 4) in {"P", "Q"}
    assert _siblings(target) == []
    assert sum(locked) < 2 * saves  # at least one save went through


def test_a_held_lock_gives_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    with path_lock(target):
        with pytest.raises(WriterLockedError, match=r"another writer holds .*m.lattice"):
            atomic_bundle_write(target, _write_version("N", 1))
        with pytest.raises(WriterLockedError, match=r"another writer holds"):
            atomic_write_file(target, lambda tmp: tmp.write_text("x"))
    assert not target.exists()
    assert _siblings(target) == []


def test_leftovers_of_interrupted_saves_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _write_version("O", 4))
    stale_tree = tmp_path / ".m.lattice.tmp-dead1"
    stale_tree.mkdir()
    (stale_tree / "weights.safetensors").write_bytes(b"x" * 100)
    (tmp_path / ".m.lattice.old-dead2").mkdir()
    (tmp_path / ".other.lattice.tmp-keep").mkdir()  # another destination's: not ours
    atomic_bundle_write(target, _write_version("N", 4))
    assert _siblings(target) == [".other.lattice.tmp-keep"]


# A companion (a manifest beside the destination) moves with it: the child
# writes version N of the bundle and a companion naming N and the bundle's
# fingerprint; it is killed at one step of the save.
COMPANION_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lattice_contract.artifact import atomic

    target, companion, mode, step, marker = (Path(a) for a in sys.argv[1:6])
    step = str(step)

    def pause(name):
        if name == step:
            Path(marker).write_text(name)
            time.sleep(60)

    atomic._test_hook = pause
    if str(mode) == "fallback":
        atomic._exchange_impl = lambda a, b: False

    def write(tmp):
        (tmp / "graph.mlir").write_text("N")
        (tmp / "weights.safetensors").write_bytes(b"N" * 1024)

    atomic.atomic_write_dir(
        target, write, companion=atomic.Companion(companion, lambda fp: "N " + fp)
    )
    """
)


def _companion_save(target: Path, companion: Path, version: str) -> None:
    atomic.atomic_write_dir(
        target,
        _write_version(version, 1024),
        companion=atomic.Companion(companion, lambda fp: f"{version} {fp}"),
    )


def _pair(target: Path, companion: Path) -> str:
    """The version of a consistent (destination, companion) pair; fails on any other state."""
    version = _version(target, 1024)
    assert companion.read_text() == f"{version} {atomic.fingerprint(target)}"
    return version


@pytest.mark.parametrize(
    ("mode", "step", "expected"),
    [
        ("exchange", "before_swap", "O"),
        ("exchange", "after_swap", "N"),
        ("exchange", "before_companion", "N"),
        ("fallback", "between_renames", "O"),
    ],
)
def test_a_companion_always_describes_the_destination_after_a_kill(
    tmp_path: Path, mode: str, step: str, expected: str
) -> None:
    target, companion = tmp_path / "m.lattice", tmp_path / "m.lattice.migration.json"
    _companion_save(target, companion, "O")
    assert _pair(target, companion) == "O"
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPANION_CHILD, str(target), str(companion), mode, step,
         str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    kill_when_paused(proc, marker)
    if mode == "exchange":  # the destination itself is complete at every instant
        assert _version(target, 1024) == expected
    # What any later writer does first, under the lock:
    with path_lock(target) as locked_at:
        recover_interrupted(target, before=locked_at, companion=companion)
    assert _pair(target, companion) == expected
    leftovers = [n for n in _siblings(target) if not n.endswith(".lock")]  # the dead writer's
    assert leftovers == [companion.name]
    _companion_save(target, companion, "A")
    assert _pair(target, companion) == "A"
    assert _siblings(target) == [companion.name]


def test_a_failed_write_leaves_the_old_pair_and_no_pending_companion(tmp_path: Path) -> None:
    target, companion = tmp_path / "m.lattice", tmp_path / "m.json"
    _companion_save(target, companion, "O")

    def broken(tmp: Path) -> None:
        (tmp / "graph.mlir").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.atomic_write_dir(target, broken, companion=atomic.Companion(companion, str))
    assert _pair(target, companion) == "O"
    assert _siblings(target) == [companion.name]
    file_target = tmp_path / "g.mlir"
    atomic_write_file(
        file_target,
        lambda tmp: tmp.write_text("g"),
        companion=atomic.Companion(tmp_path / "g.json", lambda fp: fp),
    )
    assert (tmp_path / "g.json").read_text() == atomic.fingerprint(file_target)


def test_the_fingerprint_depends_on_names_and_bytes_only(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root, order in ((a, ("x", "sub/y")), (b, ("sub/y", "x"))):
        for name in order:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(name.encode())
    assert atomic.fingerprint(a) == atomic.fingerprint(b)
    (b / "x").write_bytes(b"X")
    assert atomic.fingerprint(a) != atomic.fingerprint(b)
    (b / "x").write_bytes(b"x")
    (b / "sub" / "y").rename(b / "sub" / "z")
    assert atomic.fingerprint(a) != atomic.fingerprint(b)
