"""pytest set-up for the torch_lattice tests: the helper-module path."""

from __future__ import annotations

import sys
from pathlib import Path

# Tests run with --import-mode=importlib, so sibling helper modules (the
# framework references) are not importable by default; they live beside the tests.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
