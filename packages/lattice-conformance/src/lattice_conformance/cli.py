"""The ``lattice`` and ``conformance`` command lines.

Each subcommand lives in its own module and exposes ``main(argv) -> int``;
this file only dispatches, so subcommands import their heavy dependencies
(MLX, torch) lazily and ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from lattice_contract.artifact import version_report

_LATTICE = {
    "demo": ("lattice_conformance.demo", "export, verify, run and replay the shipped example"),
    "inspect": (
        "lattice_conformance.inspect_cmd",
        "print an artifact's (or fixture archive's) ABI, ops and weights",
    ),
    "migrate": (
        "lattice_conformance.migrate",
        "migrate a known producer's bundle, fixture tree or graph.mlir (once, explicitly)",
    ),
    "view": ("lattice_conformance.view", "write an HTML page drawing an artifact's graph"),
}
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


def _dispatch(prog: str, table: dict[str, tuple[str, str]], argv: Sequence[str] | None) -> int:
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


def lattice_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice``."""
    return _dispatch("lattice", _LATTICE, argv)


def conformance_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance``."""
    return _dispatch("conformance", _CONFORMANCE, argv)
