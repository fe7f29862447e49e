"""The ``conformance`` command line, and the dispatcher the project's commands share.

Each subcommand lives in its own module and exposes ``main(argv) -> int``;
this file only dispatches, so subcommands import their heavy dependencies
(MLX, torch) lazily and ``--help`` stays fast.  The ``lattice`` command
(``demo``, ``inspect``, ``migrate``, ``view``) is :mod:`lattice_tools.cli`'s,
built on the same :func:`dispatch`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence

from lattice_contract.artifact import version_report

__all__ = ["conformance_main", "dispatch"]

_CONFORMANCE = {
    "replay": ("lattice_conformance.replay", "replay a fixture archive on MLX"),
    "geometry-profile": (
        "lattice_conformance.geometry",
        "neural bpp estimate of the fixed occupancy-hierarchy model",
    ),
}


def dispatch(prog: str, table: Mapping[str, tuple[str, str]], argv: Sequence[str] | None) -> int:
    """Run ``prog``'s subcommand named by ``argv[0]``: ``table`` maps it to (module, help).

    ``--version`` prints every installed Lattice distribution's version; no
    argument, ``-h``/``--help`` or an unknown command prints the command list
    (exit status 0 for a help request, 2 otherwise).  The subcommand's module
    is imported only when it runs.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        print(version_report(prog))
        return 0
    if not args or args[0] in {"-h", "--help"} or args[0] not in table:
        width = max(map(len, table))
        lines = [f"usage: {prog} [--version] <command> [ARGS...]", "", "commands:"]
        lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in table.items()]
        print(
            "\n".join(lines),
            file=sys.stdout if args and args[0] in {"-h", "--help"} else sys.stderr,
        )
        if args and args[0] not in {"-h", "--help"}:
            print(f"\n{prog}: unknown command {args[0]!r}", file=sys.stderr)
        return 0 if args and args[0] in {"-h", "--help"} else 2
    module = importlib.import_module(table[args[0]][0])
    result: int = module.main(args[1:])
    return result


def conformance_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance``."""
    return dispatch("conformance", _CONFORMANCE, argv)
