"""Fixtures shared by every package's tests (pytest loads this for all test paths)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: spconv's CPU scatter-add races with more (its oracle tests use it)."""
    import torch  # imported here: the contract's tests never need torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
