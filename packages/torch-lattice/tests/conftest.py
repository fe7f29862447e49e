"""pytest set-up for the torch_lattice tests: the helper-module path and the Triton interpreter.

``one_thread`` (spconv's oracle tests) is in the repository's root conftest.py.
"""

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


@pytest.fixture(scope="module")
def triton_interpreter() -> Iterator[None]:
    """``TRITON_INTERPRET=1`` for one test module on a machine without CUDA, restored after it.

    The Triton tests run their kernels on the interpreter there (torch_lattice's
    kernels choose it themselves when no GPU is present); the variable is set
    for Triton's own code too, and never outlives the module that asked for it.
    """
    with pytest.MonkeyPatch.context() as patch:
        if not torch.cuda.is_available():
            patch.setenv("TRITON_INTERPRET", "1")
        yield
