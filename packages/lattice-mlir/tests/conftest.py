"""Shared fixtures of the lattice-mlir tests: the valid corpus and lattice-opt."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lattice_mlir
import pytest

TEST_DIR = Path(__file__).resolve().parent.parent / "test"


def stamp(text: str) -> str:
    """A corpus file made concrete: the built dialect's digest, no lit comments."""
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("//"))
    return body.replace("@SCHEMA_DIGEST@", lattice_mlir.SCHEMA_DIGEST)


@pytest.fixture(scope="session")
def valid_modules() -> dict[str, str]:
    """Every valid lit file as a verifiable artifact module, by file stem."""
    files = sorted((TEST_DIR / "valid").glob("*.mlir"))
    assert files, f"no valid corpus under {TEST_DIR / 'valid'}"
    return {f.stem: stamp(f.read_text(encoding="utf-8")) for f in files}


@pytest.fixture(scope="session")
def lattice_opt() -> Path:
    """The lattice-opt console script of this environment (never skipped)."""
    script = Path(sys.executable).with_name("lattice-opt")
    found = script if script.exists() else shutil.which("lattice-opt")
    assert found, "lattice-opt is not installed; pip install -e packages/lattice-mlir"
    return Path(found)


OptRunner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="session")
def run_opt(lattice_opt: Path) -> OptRunner:
    """Run lattice-opt with arguments (and stdin text); never raises on exit status."""

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(lattice_opt), *args],
            input=stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
            check=False,
        )

    return run
