"""The ``conformance`` command line, and the dispatcher the project's commands share.

Each subcommand lives in its own module and exposes ``main(argv) -> int``;
this file only dispatches, so subcommands import their heavy dependencies
(MLX, torch) lazily and ``--help`` stays fast.  The ``lattice`` command
(``demo``, ``inspect``, ``migrate``, ``view``) is :mod:`lattice_tools.cli`'s,
built on the same :func:`dispatch`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence

from lattice_contract.artifact import EXIT_USAGE, run_command, version_report

__all__ = ["EXIT_CODES_HELP", "conformance_main", "dispatch"]

log = logging.getLogger(__name__)

EXIT_CODES_HELP = (
    "exit status: 0 ok; 1 a check failed (a case out of tolerance, a graph refused);\n"
    "             2 usage or input error (bad option, missing or wrong kind of input)"
)

_CONFORMANCE = {
    "replay": ("lattice_conformance.replay", "replay a fixture archive on MLX"),
    "geometry-profile": (
        "lattice_conformance.geometry",
        "neural bpp estimate of the fixed occupancy-hierarchy model",
    ),
    "geometry-codec": (
        "lattice_conformance.codec.cli",
        "lossless voxel-cloud codec: encode a PLY to a coded file, decode it back",
    ),
}


def dispatch(prog: str, table: Mapping[str, tuple[str, str]], argv: Sequence[str] | None) -> int:
    """Run ``prog``'s subcommand named by ``argv[0]``: ``table`` maps it to (module, help).

    ``--version`` prints every installed Lattice distribution's version; no
    argument, ``-h``/``--help`` or an unknown command prints the command list
    (exit status 0 for a help request, 2 otherwise).  The subcommand's module
    is imported only when it runs.  ``-q/--quiet`` and ``-v/--verbose`` (anywhere
    before ``--``) set the log level; a closed pipe ends the command quietly
    (:func:`lattice_contract.artifact.run_command`).
    """
    return run_command(lambda args: _dispatch(prog, table, args), argv, prog)


def _dispatch(prog: str, table: Mapping[str, tuple[str, str]], args: list[str]) -> int:
    if args[:1] == ["--version"]:
        print(version_report(prog))
        return 0
    if not args or args[0] in {"-h", "--help"} or args[0] not in table:
        width = max(map(len, table))
        lines = [f"usage: {prog} [--version] [-q|--quiet] [-v|--verbose] <command> [ARGS...]"]
        lines += ["", "commands:"]
        lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in table.items()]
        lines += ["", EXIT_CODES_HELP]
        if args and args[0] in {"-h", "--help"}:
            print("\n".join(lines))
            return 0
        log.error("\n".join(lines))
        if args:
            log.error("\n%s: unknown command %r", prog, args[0])
        return EXIT_USAGE
    module = importlib.import_module(table[args[0]][0])
    result: int = module.main(args[1:])
    return result


def conformance_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance``."""
    return dispatch("conformance", _CONFORMANCE, argv)
