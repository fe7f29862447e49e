"""``python -m torch_lattice.convert``: the ``convert-checkpoint`` command."""

from .checkpoint import main

if __name__ == "__main__":  # importing the module (a package walk) runs nothing
    raise SystemExit(main())
