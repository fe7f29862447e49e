"""lattice_mlir: the native lattice MLIR dialect, in process.

Real MLIR (LLVM 19, the C++ dialect generated from ``lattice_contract``'s
schema) parses and verifies lattice artifacts here; Python never parses MLIR
text itself.  ``verify`` reports whether a module is a valid artifact and why
not; ``import_plan`` returns the structured payload that
``RuntimePlan.from_native`` freezes, and ``verify_and_import`` gives both
from one parse.  Diagnostics are captured, never printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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
    "ModuleRewrite",
    "Status",
    "__version__",
    "dialect_ops",
    "import_plan",
    "lattice_opt_path",
    "rewrite_module",
    "verify",
    "verify_and_import",
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
    valid, diagnostics, _ = _native.check(_check_text(text), False)
    return Status(valid, diagnostics)


def verify_and_import(text: str) -> tuple[Status, dict[str, Any] | None]:
    """Verify ``text`` and, when it is valid, return its plan payload, from one parse.

    The one call for a caller that needs both the verdict and the plan (an
    artifact's validation, then its compilation): the module is parsed and
    verified once, and the payload is built from that parse.  Never raises
    for bad MLIR: the payload is None and the reasons are in the status.
    """
    valid, diagnostics, plan = _native.check(_check_text(text), True)
    return Status(valid and plan is not None, diagnostics), plan


def import_plan(text: str) -> dict[str, Any]:
    """Verify ``text`` and return its native plan payload.

    Raises :class:`LatticeMLIRError` (a ``ValueError``) carrying MLIR's
    diagnostics when the module is not a valid artifact.
    """
    status, plan = verify_and_import(text)
    if plan is None:
        raise LatticeMLIRError(status.diagnostics)
    return plan


@dataclass(frozen=True)
class ModuleRewrite:
    """What :func:`rewrite_module` found and produced.

    ``attributes`` are the module attributes as parsed (strings, string lists,
    integers; anything else as ``"<attribute TEXT>"``), ``results`` the kind
    of each ``@forward`` result (``sparse``, ``tensor`` or ``other``), and
    ``printed`` the module after the edits, as MLIR prints it.
    """

    attributes: dict[str, Any]
    results: list[str]
    printed: str


def rewrite_module(text: str, attributes: Mapping[str, str | Sequence[str]]) -> ModuleRewrite:
    """Parse ``text``, verify every op, set module ``attributes`` and print the module.

    The op verifiers run, the artifact rules do not (a module written by
    another producer carries that producer's schema digest until it is
    rewritten); verify the printed text with :func:`verify` afterwards.
    Raises :class:`LatticeMLIRError` with MLIR's diagnostics when the text
    does not parse or an op does not verify.
    """
    edits: dict[str, str | list[str]] = {}
    for name, value in attributes.items():
        if isinstance(value, str):
            edits[name] = value
        elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
            edits[name] = list(value)
        else:
            raise TypeError(f"module attribute {name!r} must be a str or a sequence of str")
    ok, diagnostics, info = _native.rewrite_module(_check_text(text), edits)
    if not ok or info is None:
        raise LatticeMLIRError(diagnostics)
    return ModuleRewrite(info["attributes"], info["results"], info["printed"])


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
