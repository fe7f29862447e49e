"""Native verification of an untrusted graph in a child process.

Replay runs graphs that come from elsewhere.  If one of them crashes the
native parser (a segfault or stack overflow the parser's own limits miss),
the replayer must survive it: record the failure, write its report, remove
its extraction directory.  So before a graph is verified in process, a child
Python runs ``lattice_mlir.import_plan`` on it: when the child dies by a
signal or overruns its time limit, that is the verdict; when it returns
(accepted or rejected with diagnostics), the in-process verification that
follows is known not to crash and gives the real diagnostics.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ["CHILD_TIMEOUT_S", "native_verification_crash"]

CHILD_TIMEOUT_S: Final = 120.0

_CHILD: str = """
import sys
try:
    import lattice_mlir
except ImportError:
    sys.exit(3)
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    text = f.read()
try:
    lattice_mlir.import_plan(text)
except Exception:
    sys.exit(1)
"""
"""What the child runs (a module attribute, so a test can make the child crash for real)."""


def native_verification_crash(
    graph: str | Path, *, timeout_s: float = CHILD_TIMEOUT_S
) -> str | None:
    """Verify ``graph`` (a ``graph.mlir`` path) natively in a child; say why if it crashed.

    Returns None when the child finished (whatever its verdict, or when the
    native module is not installed there), else a message naming the signal
    or the time limit.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(graph)],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return (
            f"native verification of {Path(graph).name} ran past {timeout_s:g} s and was "
            "stopped; the graph is hostile or pathological"
        )
    if done.returncode >= 0:
        return None
    try:
        name = signal.Signals(-done.returncode).name
    except ValueError:
        name = f"signal {-done.returncode}"
    return (
        f"native verification of {Path(graph).name} crashed the parser ({name}); the graph "
        "was not loaded in process"
    )
