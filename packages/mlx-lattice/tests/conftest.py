"""pytest set-up for the mlx_lattice tests: helper-module path and shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

# Tests run with --import-mode=importlib, so sibling helper modules are not
# importable by default; the oracle helpers live beside the tests.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator, so example-based tests are reproducible."""
    return np.random.default_rng(12345)
