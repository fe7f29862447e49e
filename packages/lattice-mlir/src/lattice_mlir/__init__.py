"""lattice_mlir: the native lattice MLIR dialect, in process.

Real MLIR (LLVM 19, the C++ dialect generated from ``lattice_contract``'s
schema) parses and verifies lattice artifacts here; Python never parses MLIR
text itself.  ``verify`` reports whether a module is a valid artifact and why
not; ``import_plan`` returns the structured payload that
``RuntimePlan.from_native`` freezes.  Diagnostics are captured, never printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata as _metadata
from pathlib import Path
from typing import Any

from lattice_mlir import _native

try:  # the pyproject is the one source; this package has no Python dependency to ask
    __version__: str = _metadata.version("latticekit-mlir")
except _metadata.PackageNotFoundError:  # pragma: no cover - source tree, never installed
    __version__ = "0+unknown"

__all__ = [
    "IR_VERSION",
    "SCHEMA_DIGEST",
    "LatticeMLIRError",
    "Status",
    "__version__",
    "dialect_ops",
    "import_plan",
    "lattice_opt_path",
    "verify",
]

SCHEMA_DIGEST: str = _native.SCHEMA_DIGEST
"""Schema digest compiled into this build; modules must carry exactly this one."""

IR_VERSION: int = _native.IR_VERSION
"""The only ``lattice.ir_version`` this build accepts."""


@dataclass(frozen=True)
class Status:
    """Outcome of :func:`verify`: validity plus MLIR's diagnostics text."""

    valid: bool
    diagnostics: str = ""

    def __bool__(self) -> bool:
        return self.valid


class LatticeMLIRError(ValueError):
    """A module failed to parse or verify; ``diagnostics`` holds MLIR's text."""

    def __init__(self, diagnostics: str) -> None:
        text = diagnostics.strip() or "lattice MLIR module rejected (no diagnostic text)"
        super().__init__(text)
        self.diagnostics = diagnostics


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(
            f"lattice MLIR must be given as str (the text of graph.mlir), got {type(text).__name__}"
        )
    return text


def verify(text: str) -> Status:
    """Parse and verify ``text`` as a lattice artifact graph.

    Every op verifier and the artifact rules (IR version, schema digest,
    weight file, the single ``@forward`` entry and its ABI metadata) run.
    Never raises for bad MLIR: the reasons come back in ``Status.diagnostics``.
    """
    valid, diagnostics = _native.verify(_check_text(text))
    return Status(valid, diagnostics)


def import_plan(text: str) -> dict[str, Any]:
    """Verify ``text`` and return its native plan payload.

    Raises :class:`LatticeMLIRError` (a ``ValueError``) carrying MLIR's
    diagnostics when the module is not a valid artifact.
    """
    valid, diagnostics, plan = _native.import_plan(_check_text(text))
    if not valid or plan is None:
        raise LatticeMLIRError(diagnostics)
    return plan


def dialect_ops() -> list[dict[str, Any]]:
    """Describe every op the compiled dialect registers.

    Each entry has ``name``, ``operand_names`` (schema order),
    ``min_operands`` and ``variadic_operands`` (from ODS's count traits),
    ``num_results`` and ``attribute_names`` (ODS's inherent attributes), so a
    test can hold the built dialect against the schema.
    """
    return _native.dialect_ops()


def lattice_opt_path() -> Path:
    """Path of the ``lattice-opt`` executable bundled with this module."""
    exe = Path(_native.__file__).resolve().parent / "bin" / "lattice-opt"
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise FileNotFoundError(
            f"lattice-opt is missing at {exe}; reinstall lattice-mlir "
            "(CMAKE_PREFIX_PATH=$(llvm-config-19 --prefix) pip install -e packages/lattice-mlir)"
        )
    return exe
