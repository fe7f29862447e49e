"""``python -m torch_lattice.convert``: the ``convert-checkpoint`` command."""

from .checkpoint import main

raise SystemExit(main())
