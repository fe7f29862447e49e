"""Console entry point ``lattice-opt``: runs the bundled native executable."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Replace this process with the bundled ``lattice-opt`` binary."""
    from lattice_mlir import lattice_opt_path

    exe = str(lattice_opt_path())
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":  # pragma: no cover
    main()
