"""pytest set-up for the torch_lattice tests: the helper-module path.

``one_thread`` (spconv's oracle tests) and the Triton interpreter switch
(``TRITON_INTERPRET=1`` without CUDA, set once per session) are in the
repository's root conftest.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Tests run with --import-mode=importlib, so sibling helper modules (the
# framework references) are not importable by default; they live beside the tests.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
