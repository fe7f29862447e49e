"""Killing a writer at an exact step of :mod:`lattice_contract.artifact.atomic`'s swap, for tests.

Every tool that writes through the atomic writer (bundles, ``lattice migrate``,
``convert-checkpoint``) promises that a writer killed at any instant leaves
the old result or the new one.  The promise is only tested by really killing
one: :func:`kill_writer_at` runs a script in a child Python whose atomic
writer pauses at the named step, waits until it is there and sends SIGKILL.
The pause uses the writer's test hook, which is never set in normal use.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

__all__ = ["STEPS", "kill_when_paused", "kill_writer_at", "paused_writer"]

STEPS = ("before_swap", "between_renames", "after_swap", "before_companion")
"""The steps the writer can be paused at, in the order a swap passes them."""

_PRELUDE = """
import os, sys, time
from pathlib import Path
from lattice_contract.artifact import atomic

def _pause(name, _step=os.environ["LATTICE_TEST_PAUSE_AT"]):
    if name == _step:
        Path(os.environ["LATTICE_TEST_PAUSE_MARKER"]).write_text(name)
        time.sleep(120)

atomic._test_hook = _pause
if os.environ.get("LATTICE_TEST_NO_EXCHANGE") == "1":
    atomic._exchange_impl = lambda a, b: False
"""


def paused_writer(
    script: str, *args: str, step: str, marker: Path, fallback: bool = False
) -> subprocess.Popen[bytes]:
    """Start ``script`` (Python source reading ``sys.argv[1:]`` = ``args``) in a child.

    The child's atomic writer writes ``marker`` and sleeps when it reaches
    ``step``; ``fallback=True`` makes it use the two-rename swap of file
    systems without ``RENAME_EXCHANGE``.
    """
    if step not in STEPS and step != "none":
        raise ValueError(f"unknown atomic step {step!r}; choose one of {STEPS} or 'none'")
    env = dict(
        os.environ,
        LATTICE_TEST_PAUSE_AT=step,
        LATTICE_TEST_PAUSE_MARKER=str(marker),
        LATTICE_TEST_NO_EXCHANGE="1" if fallback else "0",
    )
    return subprocess.Popen(
        [sys.executable, "-c", _PRELUDE + script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def kill_when_paused(proc: subprocess.Popen[bytes], marker: Path, timeout: float = 60) -> None:
    """SIGKILL ``proc`` once its writer wrote ``marker`` (it is paused at its step).

    Fails with the child's output when it exits first (it never reached the
    step) or when ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(
                f"the writer exited ({proc.returncode}) before its pause: {(out + err).decode()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the writer did not reach its pause in {timeout} s")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    marker.unlink()


def kill_writer_at(step: str, script: str, *args: str, fallback: bool = False) -> None:
    """Run ``script`` with ``args`` in a child and kill it with SIGKILL at ``step``."""
    marker = Path(tempfile.gettempdir()) / f"lattice-pause-{uuid.uuid4().hex}"
    kill_when_paused(
        paused_writer(script, *args, step=step, marker=marker, fallback=fallback), marker
    )
