"""``python -m lattice_conformance``: the ``conformance`` command."""

from lattice_conformance.cli import conformance_main

if __name__ == "__main__":
    raise SystemExit(conformance_main())
