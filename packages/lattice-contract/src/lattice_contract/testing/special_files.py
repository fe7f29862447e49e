"""Paths that are not regular files, as a hostile user hands them to a command.

A FIFO blocks a reader forever and ``/dev/zero`` never ends, so a command
that opens either without looking first hangs or fills memory.  The tests
make one with :func:`special_file` and expect the refusal to name it with
the words it returns (those of :func:`lattice_contract.artifact.untrusted`'s
file check).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SPECIAL_KINDS", "special_file"]

SPECIAL_KINDS = ("fifo", "dev-zero")
"""The kinds :func:`special_file` makes: a FIFO, and a link to ``/dev/zero``."""


def special_file(path: Path, kind: str) -> str:
    """Make ``path`` a FIFO (``"fifo"``) or a link to ``/dev/zero`` (``"dev-zero"``).

    Returns what a command's refusal calls it (``"a FIFO (named pipe)"``,
    ``"a character device"``).
    """
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO (named pipe)"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
        return "a character device"
    raise ValueError(f"kind must be one of {SPECIAL_KINDS}, got {kind!r}")
