"""Fixtures shared by every package's tests (pytest loads this for all test paths)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # an install without torch runs no Triton code
        return False
    return bool(torch.cuda.is_available())


# Triton fixes each kernel's mode (compiled or interpreted) when its decorator
# runs, at first import, so the mode is chosen once for the whole session,
# before any test module imports torch_lattice.triton: on a machine without
# CUDA the interpreter is the only way Triton runs, so every Triton test uses it.
if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: spconv's CPU scatter-add races with more (its oracle tests use it)."""
    import torch  # imported here: the contract's tests never need torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
