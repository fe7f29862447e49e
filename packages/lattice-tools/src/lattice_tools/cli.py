"""The ``lattice`` command line: ``demo``, ``inspect``, ``migrate`` and ``view``.

Each subcommand lives in its own module of this package and exposes
``main(argv) -> int``; this file only names them, so a subcommand imports its
heavy dependencies (MLX, torch) when it runs and ``lattice --help`` stays
fast.  The dispatching (``--version``, the command list, unknown commands) is
the one :func:`lattice_conformance.cli.dispatch` that ``conformance`` uses too.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice_conformance.cli import dispatch

__all__ = ["lattice_main"]

_LATTICE = {
    "demo": ("lattice_tools.demo", "export, verify, run and replay the shipped example"),
    "inspect": (
        "lattice_tools.inspect",
        "print an artifact's (or fixture archive's) ABI, ops and weights",
    ),
    "migrate": (
        "lattice_tools.migrate",
        "migrate a known producer's bundle, fixture tree or graph.mlir (once, explicitly)",
    ),
    "view": ("lattice_tools.view", "write an HTML page drawing an artifact's graph"),
}


def lattice_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice``."""
    return dispatch("lattice", _LATTICE, argv)
