"""Release metadata: our own distribution names, one version, exact sibling pins.

Upstream publishes ``mlx-lattice``, ``torch-lattice`` and ``lattice-contract``
on PyPI.  Had we kept those names, pip would have resolved a newer upstream
release in place of ours; these tests pin what prevents it: every
distribution has the ``latticekit-`` prefix, all six carry one version, each
sibling requirement is ``==`` that version, and the packages and commands
report the version that pip installed.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest
from lattice_contract.artifact import DISTRIBUTIONS, version_report

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = (
    "lattice-contract",
    "lattice-mlir",
    "mlx-lattice",
    "torch-lattice",
    "lattice-conformance",
    "lattice-tools",
)


def _project(folder: str) -> dict[str, object]:
    data = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())
    project: dict[str, object] = data["project"]
    return project


def _requirements(project: dict[str, object]) -> list[str]:
    reqs = list(project.get("dependencies", []))  # type: ignore[call-overload]
    for extra in dict(project.get("optional-dependencies", {})).values():  # type: ignore[call-overload]
        reqs += extra
    return reqs


def test_names_are_ours_and_versions_agree() -> None:
    projects = {f: _project(f) for f in FOLDERS}
    names = {str(p["name"]) for p in projects.values()}
    assert names == set(DISTRIBUTIONS.values())
    assert all(n.startswith("latticekit-") for n in names)
    assert not names & {"mlx-lattice", "torch-lattice", "lattice-contract", "lattice-mlir"}
    versions = {str(p["version"]) for p in projects.values()}
    assert len(versions) == 1, f"the six distributions disagree on their version: {versions}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_siblings_are_pinned_exactly(folder: str) -> None:
    project = _project(folder)
    version = project["version"]
    for req in _requirements(project):
        name = re.match(r"[A-Za-z0-9._-]+", req)
        assert name is not None
        if name.group(0).startswith("latticekit-"):
            assert req == f"{name.group(0)}=={version}", f"{folder}: {req!r} is not an exact pin"
        for old in ("mlx-lattice", "torch-lattice", "lattice-contract", "lattice-mlir"):
            assert name.group(0) != old, f"{folder} still requires upstream's {old}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_license_readme_and_urls(folder: str) -> None:
    project = _project(folder)
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    package_dir = ROOT / "packages" / folder
    assert "MIT License" in (package_dir / "LICENSE").read_text()
    readme = package_dir / str(project["readme"])
    assert str(project["name"]) in readme.read_text()
    urls = dict(project["urls"])  # type: ignore[call-overload]
    assert {"Homepage", "Documentation", "Changelog"} <= set(urls)
    assert all(str(u).startswith("https://") for u in urls.values())


def test_changelog_names_the_release() -> None:
    version = _project("lattice-contract")["version"]
    assert f"## {version}" in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.parametrize("package", sorted(DISTRIBUTIONS))
def test_dunder_version_is_the_installed_one(package: str) -> None:
    from importlib import metadata

    module = importlib.import_module(package)
    assert module.__version__ == metadata.version(DISTRIBUTIONS[package])
    assert module.__version__ == _project(FOLDERS[list(DISTRIBUTIONS).index(package)])["version"]


@pytest.mark.parametrize(
    ("entry", "prog"),
    [
        ("lattice_tools.cli:lattice_main", "lattice"),
        ("lattice_conformance.cli:conformance_main", "conformance"),
        ("torch_lattice.convert:main", "convert-checkpoint"),
    ],
)
def test_version_flag(entry: str, prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    module, func = entry.split(":")
    main = getattr(importlib.import_module(module), func)
    try:
        code = main(["--version"])
    except SystemExit as exc:  # argparse's version action exits
        code = exc.code
    assert code == 0
    out = capsys.readouterr().out
    version = _project("lattice-contract")["version"]
    assert out.splitlines()[0] == f"{prog} {version}"
    assert f"latticekit-torch {version}" in out
    assert version_report(prog).splitlines()[0] == out.splitlines()[0]
