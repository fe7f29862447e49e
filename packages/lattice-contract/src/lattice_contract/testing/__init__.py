"""Helpers for the project's own tests; not shipped in the wheel.

Killing an atomic writer at an exact step (:mod:`.atomic`) and type-checking a
snippet of user code with mypy (:mod:`.mypy`).
"""

from __future__ import annotations

from lattice_contract.testing.atomic import (
    kill_when_paused,
    kill_writer_at,
)
from lattice_contract.testing.mypy import (
    flagged_lines,
)

__all__ = [
    "flagged_lines",
    "kill_when_paused",
    "kill_writer_at",
]
