"""pytest set-up for the torch_lattice tests: the helper-module path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# Tests run with --import-mode=importlib, so sibling helper modules (the
# framework references) are not importable by default; they live beside the tests.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: spconv's CPU scatter-add races with more (its oracle tests use it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
