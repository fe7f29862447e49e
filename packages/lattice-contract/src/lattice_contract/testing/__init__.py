"""Helpers for the project's own tests; not shipped in the wheel.

Killing an atomic writer at an exact step (:mod:`.atomic`), type-checking a
snippet of user code with mypy (:mod:`.mypy`) and making paths that are not
regular files (:mod:`.special_files`).
"""

from __future__ import annotations

from lattice_contract.testing.atomic import (
    kill_when_paused,
    kill_writer_at,
)
from lattice_contract.testing.mypy import (
    flagged_lines,
)
from lattice_contract.testing.special_files import SPECIAL_KINDS, special_file

__all__ = [
    "SPECIAL_KINDS",
    "flagged_lines",
    "kill_when_paused",
    "kill_writer_at",
    "special_file",
]
