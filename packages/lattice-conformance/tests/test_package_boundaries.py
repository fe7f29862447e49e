"""SPEC §2's dependency arrows, checked on what is declared and on what is imported.

The arrows are what keeps a deployment light: an MLX install must never drag
in torch, a torch install never MLX, and the contract must stay importable
with the standard library alone.  Declared dependencies are read from each
distribution's ``pyproject.toml``; actual imports are observed in a fresh
interpreter after importing every submodule of a package, so a stray
top-level import anywhere in the tree is caught.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]

# Distribution -> the project distributions and third-party distributions it
# may declare (SPEC §2, "may depend on").  ``None`` leaves third-party
# dependencies unrestricted (the conformance package's reporting needs).
_PROJECT = {"latticekit-contract", "latticekit-mlir", "latticekit-mlx", "latticekit-torch"}
ALLOWED: dict[str, tuple[set[str], set[str] | None]] = {
    "lattice-contract": (set(), {"numpy"}),
    "lattice-mlir": (set(), set()),
    "mlx-lattice": ({"latticekit-contract", "latticekit-mlir"}, {"mlx", "safetensors", "numpy"}),
    "torch-lattice": ({"latticekit-contract", "latticekit-mlir"}, {"torch", "safetensors"}),
    "lattice-conformance": (_PROJECT, None),
    "lattice-tools": (_PROJECT | {"latticekit-conformance"}, None),
}
"""Keyed by the folder under packages/; the sets hold distribution names."""


def _dist_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match is not None, requirement
    return match.group(1).lower().replace("_", "-")


def _declared(dist: str) -> set[str]:
    project = tomllib.loads((PACKAGES / dist / "pyproject.toml").read_text())["project"]
    names = {_dist_name(r) for r in project.get("dependencies", [])}
    for extra in project.get("optional-dependencies", {}).values():
        names |= {_dist_name(r) for r in extra}
    return names


@pytest.mark.parametrize("dist", sorted(ALLOWED))
def test_declared_dependencies_follow_the_arrows(dist: str) -> None:
    project_ok, third_party_ok = ALLOWED[dist]
    declared = _declared(dist)
    project = declared & (_PROJECT | {"latticekit-conformance", "latticekit-tools"})
    assert project <= project_ok, f"{dist} declares project dependencies {project - project_ok}"
    if third_party_ok is not None:
        other = declared - project
        assert other <= third_party_ok, f"{dist} declares {other - third_party_ok}"


def _imported_after_walking(package: str) -> set[str]:
    code = (
        "import importlib, pkgutil, sys\n"
        f"root = importlib.import_module({package!r})\n"
        "for info in pkgutil.walk_packages(root.__path__, root.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_mlx_lattice_never_imports_torch() -> None:
    imported = _imported_after_walking("mlx_lattice")
    assert "mlx" in imported
    assert "torch" not in imported


def test_torch_lattice_never_imports_mlx() -> None:
    imported = _imported_after_walking("torch_lattice")
    assert "torch" in imported
    assert "mlx" not in imported and "mlx_lattice" not in imported


def test_lattice_contract_imports_only_the_standard_library() -> None:
    imported = _imported_after_walking("lattice_contract")
    foreign = {
        name
        for name in imported
        if name not in sys.stdlib_module_names
        and name != "lattice_contract"
        and not name.startswith("_")
    }
    assert not foreign, f"lattice_contract pulled in {sorted(foreign)}"


def test_lattice_conformance_never_imports_the_tools() -> None:
    # The tools (the ``lattice`` command) are the top layer: conformance must
    # stay installable and importable without them.
    imported = _imported_after_walking("lattice_conformance")
    assert "lattice_conformance" in imported
    assert "lattice_tools" not in imported
