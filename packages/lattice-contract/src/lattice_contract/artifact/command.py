"""The manners every Lattice command shares: exit codes, logging, closed pipes, path words.

Every console script of the project (``lattice``, ``conformance``,
``convert-checkpoint``, ``lattice-opt``) follows one convention, so a script
that calls them can tell the three outcomes apart without reading messages:

* ``EXIT_OK`` (0): the command did what was asked and every check passed;
* ``EXIT_FAILED`` (1): it ran, and a check it performs failed (a replay case
  out of tolerance, a graph the verifier refuses, a demo that did not pass);
* ``EXIT_USAGE`` (2): it could not do what was asked: a bad option, an input
  that is missing or of the wrong kind, an output it may not write.

A reader that closes the pipe early (``lattice inspect m.lattice | head``)
ends the command quietly with status 0: the reader asked for no more.

Diagnostics go through the standard :mod:`logging` module, never through
``print``: each package logs under its own name (``lattice_tools.demo``,
``torch_lattice.export``...), a library user silences or captures them as for
any Python library, and a command's ``--quiet`` (warnings and errors only) and
``--verbose`` (debug detail) set the level.  Stage times are logged at INFO.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from lattice_contract.artifact.untrusted import printable

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "configure_logging",
    "describe_path",
    "run_command",
    "split_verbosity",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_ROOTS = (
    "lattice_contract",
    "lattice_mlir",
    "mlx_lattice",
    "torch_lattice",
    "lattice_conformance",
    "lattice_tools",
)
_HANDLER_FLAG = "_lattice_command_handler"


def split_verbosity(argv: Sequence[str]) -> tuple[list[str], int]:
    """``argv`` without ``-q/--quiet/-v/--verbose``, and the level they ask for.

    The flags are taken out wherever they stand before a ``--``, so
    ``lattice --quiet inspect m`` and ``lattice inspect m --quiet`` mean the
    same; no subcommand uses ``-q`` or ``-v`` for anything else.
    """
    rest: list[str] = []
    level = logging.INFO
    passthrough = False
    for arg in argv:
        if passthrough:
            rest.append(arg)
        elif arg == "--":
            passthrough = True
            rest.append(arg)
        elif arg in {"-q", "--quiet"}:
            level = logging.WARNING
        elif arg in {"-v", "--verbose"}:
            level = logging.DEBUG
        else:
            rest.append(arg)
    return rest, level


def configure_logging(level: int) -> None:
    """Send the project's log records at ``level`` and above to stderr, as plain lines.

    Only commands call this (a library never configures logging); calling it
    again replaces the handler it installed before, so tests that run several
    commands in one process do not print each line twice.  Records still
    propagate to the root logger, so an application's own handlers see them.
    """
    handler = _CurrentStderr()
    handler.setFormatter(_PrintableFormatter("%(message)s"))
    setattr(handler, _HANDLER_FLAG, True)
    for name in _ROOTS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, _HANDLER_FLAG, False)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(level)


class _PrintableFormatter(logging.Formatter):
    """Log lines with every control character escaped but their own line breaks.

    Messages quote names and diagnostics from the files a command reads (case
    names, weight keys, an archive's ``producer``); a terminal escape in one
    of them is printed as ``\\x1b``, never obeyed
    (:func:`lattice_contract.artifact.untrusted.printable`).
    """

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), multiline=True)


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes, not when it was made.

    A test harness swaps ``sys.stderr`` per test; a handler holding the old
    stream would write to a closed file once the test is over.
    """

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        del value  # always the current sys.stderr


def describe_path(path: str | os.PathLike[str]) -> str:
    """What ``path`` is, in the words an error message should use.

    ``"directory"``, ``"fixture archive"`` (a ``.tar.gz``/``.tgz`` name),
    ``"file"``, or ``"missing path"``: a message that calls a missing archive
    an "artifact directory" sends the user looking for the wrong thing.
    """
    p = Path(path)
    archive = p.name.endswith((".tar.gz", ".tgz", ".tar"))
    if p.is_dir():
        return "directory"
    if not p.exists():
        return "missing fixture archive" if archive else "missing path"
    return "fixture archive" if archive else "file"


def run_command(main: Callable[[list[str]], int], argv: Sequence[str] | None, prog: str) -> int:
    """Run ``main`` with the shared manners; return its exit status.

    Takes ``--quiet``/``--verbose`` out of ``argv`` and configures logging,
    turns a closed stdout into a quiet exit 0, and a ``KeyboardInterrupt``
    into status 130 with one line instead of a traceback.
    """
    args, level = split_verbosity(list(sys.argv[1:] if argv is None else argv))
    configure_logging(level)
    try:
        status = main(args)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        logging.getLogger("lattice_contract").error("%s: interrupted", prog)
        return 130
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a descriptor (a test's StringIO)
        pass
