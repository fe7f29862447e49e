"""Console entry point ``lattice-opt``: runs the bundled native executable with Lattice's manners.

The native tool is an ``mlir-opt`` built with the lattice dialect; its own exit
status is 1 for everything (a refused graph, an unknown option, a missing
file), and a closed pipe ends it with an I/O error.  This wrapper gives it the
convention every Lattice command follows:

* 0 the graph parsed and verified (and the output was written);
* 1 the check failed: the graph does not parse or does not verify;
* 2 usage or input error: an unknown option, a missing input file, a
  directory where a ``graph.mlir`` file is expected.

A reader closing the pipe (``lattice-opt g.mlir | head``) ends it quietly with
status 0.  ``-q/--quiet`` keeps only errors, ``-v/--verbose`` logs the native
command line and its time.  This package has no Python dependency, so the
convention is written out here rather than imported from ``lattice_contract``.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("lattice_mlir.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

# Native options whose next argument is a value, not an input file.
_VALUE_OPTIONS = {"-o", "--split-input-file", "--mlir-print-op-on-diagnostic"}
# What LLVM's option parser prints for a bad command line.
_USAGE_MARKERS = (
    "Unknown command line argument",
    "for the -",
    "Not enough positional",
    "IO failure on output stream",  # -o a full disk or /dev/full: an output it could not write
)
# LLVM ends a tool whose stdout reader went away with EX_IOERR (74) or SIGPIPE.
_PIPE_STATUSES = {74, -13, 141}


def _inputs(args: Sequence[str]) -> list[str]:
    """The positional arguments: the files the native tool will read."""
    found: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif arg == "-" or arg.startswith("-"):
            continue
        else:
            found.append(arg)
    return found


def _input_problem(path: str) -> str | None:
    """A missing input, or one that is not a file or a directory, named here.

    A bundle directory goes to the native tool, which reads it.  A FIFO would
    block the native tool until a writer came, and ``/dev/zero`` would be
    read until memory ran out.
    """
    if not os.path.exists(path):
        return f"no such file or bundle directory {path!r}: give a graph.mlir or a model.lattice/"
    mode = os.stat(path).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"{path!r} is not a regular file or a bundle directory: give a graph.mlir file"
    return None


def _is_special(path: str) -> bool:
    """Whether ``path`` is a device or a stream rather than a file to replace.

    A device, FIFO or socket (or a link to one: ``-o /dev/null``), or an entry
    of ``/dev`` or ``/proc`` (``-o /dev/stdout`` links to the process's own
    descriptor, a regular file when stdout is redirected to one).
    """
    folder = os.path.realpath(os.path.dirname(path) or ".")
    if folder in ("/dev", "/proc") or folder.startswith("/proc/"):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _printable(text: str) -> str:
    """``text`` with control characters escaped, line breaks kept, for the terminal.

    MLIR's diagnostics quote the graph's source line and its file name, so a
    graph holding ``ESC ] 0 ;`` would retitle the window when its error is
    shown.  The rule is the one ``lattice_contract``'s printer follows
    (non-printable characters as Python escapes), written out here because
    this package sits below ``lattice_contract`` and imports nothing of it.
    """
    return "\n".join(
        "".join(c if c.isprintable() or c == "\t" else ascii(c)[1:-1] for c in line)
        for line in text.split("\n")
    )


def _take_output(args: list[str]) -> tuple[str | None, list[str]]:
    """The ``-o`` file (``-o F``, ``-o=F``, ``--o F``, ``--o=F``; ``-`` is stdout) and the rest."""
    output: str | None = None
    rest: list[str] = []
    items = iter(args)
    for arg in items:
        if arg in {"-o", "--o"}:
            output = next(items, None)
            if output is None:
                rest.append(arg)  # the native tool names the missing value
        elif arg.startswith(("-o=", "--o=")):
            output = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return (None if output == "-" else output), rest


def _output_problem(output: str, inputs: Sequence[str]) -> str | None:
    """Why ``-o`` may not be written: it is an input, or lies inside an input bundle.

    The native tool opens ``-o`` before it reads and deletes it when the graph
    fails: ``lattice-opt g.mlir -o g.mlir`` on a graph that did not verify
    used to delete ``g.mlir``.  Paths are compared resolved, so a link or a
    ``..`` spelling of an input is refused too.
    """
    target = os.path.realpath(output)
    for source in map(os.path.realpath, (p for p in inputs if p != "-")):
        if target == source or target.startswith(source.rstrip(os.sep) + os.sep):
            return (
                f"refusing to write {output!r}: it is (or lies inside) the input "
                f"{source!r}, which this command reads; name another output path"
            )
    if os.path.isdir(output):
        return f"refusing to write {output!r}: it is a directory; name a file for -o"
    return None


def _run_into(
    output: str, run: Callable[[str], subprocess.CompletedProcess[bytes]]
) -> subprocess.CompletedProcess[bytes]:
    """Run the native tool writing ``output`` through a private temporary file.

    ``output`` changes only when the tool succeeds, in one rename inside the
    output's folder: a graph that fails leaves the file the user had (the
    native tool alone truncates it, then deletes it), and a killed run leaves
    at most a private ``.NAME.tmp-*`` folder, never a half-written ``output``.
    """
    target = Path(output)
    box = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        done = run(str(box / target.name))
        if done.returncode == 0:
            os.replace(box / target.name, target)
    finally:
        shutil.rmtree(box, ignore_errors=True)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bundled ``lattice-opt`` on ``argv``; return the exit status (see the module)."""
    from lattice_mlir import lattice_opt_path

    args: list[str] = []
    level = logging.INFO
    for arg in sys.argv[1:] if argv is None else argv:
        if arg in {"-q", "--quiet"}:
            level = logging.WARNING
        elif arg in {"-v", "--verbose"}:
            level = logging.DEBUG
        else:
            args.append(arg)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(level)
    output, args = _take_output(args)
    inputs = _inputs(args)
    for path in inputs:
        problem = _input_problem(path)
        if problem is not None:
            log.error("lattice-opt: %s", problem)
            return EXIT_USAGE
    if output is not None and _is_special(output):
        args += ["-o", output]  # a device takes the stream as is; nothing there to lose
        output = None
    problem = None if output is None else _output_problem(output, inputs)
    if problem is not None:
        log.error("lattice-opt: %s", _printable(problem))
        return EXIT_USAGE
    exe = str(lattice_opt_path())
    log.debug("lattice-opt: running %s", _printable(" ".join([exe, *args])))
    started = time.perf_counter()

    def run(*extra: str) -> subprocess.CompletedProcess[bytes]:
        command = [exe, *args, *extra]
        return subprocess.run(command, stdout=sys.stdout.fileno(), stderr=subprocess.PIPE)

    try:
        sys.stdout.flush()
        done = run() if output is None else _run_into(output, lambda tmp: run("-o", tmp))
    except KeyboardInterrupt:
        log.error("lattice-opt: interrupted")
        return 130
    except (OSError, RuntimeError, ValueError) as exc:  # a lock held, an unwritable folder
        log.error("lattice-opt: cannot write %r: %s", output, _printable(str(exc)))
        return EXIT_USAGE
    log.debug("lattice-opt: native tool took %.3f s", time.perf_counter() - started)
    stderr = done.stderr.decode("utf-8", "replace")
    if done.returncode in _PIPE_STATUSES and (
        not stderr.strip() or "Broken pipe" in stderr or "IO failure" in stderr
    ):
        return EXIT_OK
    if stderr:  # the native diagnostics: errors when it failed, warnings otherwise
        level = logging.ERROR if done.returncode else logging.WARNING
        log.log(level, "%s", _printable(stderr.rstrip("\n")))
    if done.returncode == 0:
        return EXIT_OK
    if any(marker in stderr for marker in _USAGE_MARKERS):
        return EXIT_USAGE
    return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
