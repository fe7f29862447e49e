"""Fixtures shared by every package's tests (pytest loads this for all test paths)."""

from __future__ import annotations

import logging
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


_PACKAGES = (
    "lattice_contract",
    "lattice_mlir",
    "mlx_lattice",
    "torch_lattice",
    "lattice_conformance",
    "lattice_tools",
)


@pytest.fixture(autouse=True)
def _package_logging_restored() -> Iterator[None]:
    """A command run in process configures the packages' loggers; undo it after each test.

    Commands (``lattice ...``) send INFO stage times to stderr for the rest of
    the process, as a CLI should; a later test that expects a library call to
    stay quiet must not see them.
    """
    loggers = [logging.getLogger(name) for name in _PACKAGES]
    saved = [(lg, lg.level, list(lg.handlers)) for lg in loggers]
    yield
    for lg, level, handlers in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers


@pytest.fixture
def command_logging() -> None:
    """The packages' loggers set up as a command sets them (INFO to stderr).

    For tests that call a subcommand's ``main`` directly, bypassing the
    command entry that configures logging, and read its messages from
    stderr; the autouse fixture above undoes it afterwards.
    """
    from lattice_contract.artifact import configure_logging

    configure_logging(logging.INFO)
