"""``python -m lattice_tools ...`` runs the ``lattice`` command (no console script needed)."""

import sys

from lattice_tools.cli import lattice_main

sys.exit(lattice_main())
