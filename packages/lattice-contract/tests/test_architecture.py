"""The house rules of the code base, checked: faces, private names, layers, the map of it.

``lattice_contract`` is a stack of subpackages (docs/architecture.md); each
subpackage's ``__init__`` is its face.  These tests hold the rules that keep
that stack readable: code outside a subpackage imports only the names its
face declares, no ``_private`` name crosses a subpackage, the import-linter
contracts of the workspace hold (and fail on a planted upward import), and
every path docs/architecture.md names exists.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp  # import-linter's import graph (requirements-dev)
import pytest

ROOT = Path(__file__).resolve().parents[3]
CONTRACT = ROOT / "packages/lattice-contract/src/lattice_contract"
SUBPACKAGES = sorted(p.name for p in CONTRACT.iterdir() if (p / "__init__.py").is_file())
CONSUMERS = [
    ROOT / "packages/mlx-lattice/src",
    ROOT / "packages/torch-lattice/src",
    ROOT / "packages/lattice-conformance/src",
    ROOT / "packages/lattice-tools/src",
]


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, []) for a in node.names)
    return found


def _subpackage_of(path: Path) -> str | None:
    rel = path.relative_to(CONTRACT).parts
    return rel[0] if len(rel) > 1 else None


def test_the_contract_is_layered_into_subpackages() -> None:
    assert set(SUBPACKAGES) == {
        "artifact",
        "builder",
        "codegen",
        "dialect",
        "frontend",
        "plan",
        "runtime",
        "testing",
    }
    # mlir.py is a public face of its own: mlx-lattice 0.6's graph-builder API
    # (lattice_contract.mlir), a thin layer over the builder and dialect faces.
    top = {"__init__.py", "_moved.py", "mlir.py"}
    loose = sorted(p.name for p in CONTRACT.glob("*.py") if p.name not in top)
    assert loose == [], f"modules outside any subpackage: {loose}"


def test_the_upstream_builder_face_imports_only_builder_and_dialect_faces() -> None:
    imported = {module for _, module, _ in _imports(CONTRACT / "mlir.py")}
    contract = {m for m in imported if m.startswith("lattice_contract")}
    assert contract <= {"lattice_contract.builder", "lattice_contract.dialect"}, contract


def test_consumers_import_only_what_a_face_declares() -> None:
    bad: list[str] = []
    for src in CONSUMERS:
        for path in sorted(src.rglob("*.py")):
            for line, module, names in _imports(path):
                parts = module.split(".")
                if parts[0] != "lattice_contract":
                    continue
                where = f"{path.relative_to(ROOT)}:{line}"
                if len(parts) > 2:
                    bad.append(f"{where}: imports {module} (import from its face)")
                    continue
                face = importlib.import_module(module)
                declared = set(getattr(face, "__all__", ()))
                bad.extend(
                    f"{where}: {module} does not declare {n!r} in __all__"
                    for n in names
                    if n not in declared
                )
    assert bad == [], "\n".join(bad)


def test_no_private_name_crosses_a_subpackage() -> None:
    bad: list[str] = []
    for path in sorted(CONTRACT.rglob("*.py")):
        here = _subpackage_of(path)
        for line, module, names in _imports(path):
            parts = module.split(".")
            if parts[0] != "lattice_contract" or len(parts) < 2 or parts[1] == here:
                continue
            if len(parts) > 2:
                bad.append(f"{path.relative_to(ROOT)}:{line}: deep import of {module}")
            bad.extend(
                f"{path.relative_to(ROOT)}:{line}: private {module}.{n}"
                for n in names
                if n.startswith("_") and not n.startswith("__")
            )
    assert bad == [], "\n".join(bad)


def test_no_module_import_cycle() -> None:
    """No two contract modules reach each other (a face and its own modules excepted).

    A subpackage's face imports its modules by construction; any other cycle,
    however lazy (an import inside a function counts), means two modules that
    cannot be read or changed one at a time.  Imports under ``TYPE_CHECKING``
    are annotations only and are left out.
    """
    graph = grimp.build_graph("lattice_contract", exclude_type_checking_imports=True)
    faces = {f"lattice_contract.{name}" for name in SUBPACKAGES} | {"lattice_contract"}
    edges = {
        m: {w for w in graph.find_modules_directly_imported_by(m) if w not in faces}
        for m in graph.modules
        if m not in faces
    }
    cycles = []
    for start in sorted(edges):
        seen, stack = {start}, [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt == start:
                    cycles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert cycles == [], "\n".join(sorted(set(cycles))[:10])


def _lint_imports(python_path: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.fail("lint-imports is missing: install requirements-dev.txt (import-linter)")
    env = {**os.environ, "PYTHONPATH": str(python_path)}
    return subprocess.run(
        [exe, "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_import_contracts_hold_and_catch_a_planted_upward_import(tmp_path: Path) -> None:
    sources = tmp_path / "src"
    for src in [CONTRACT.parent, *CONSUMERS, ROOT / "packages/lattice-mlir/src"]:
        for pkg in src.iterdir():
            if (pkg / "__init__.py").is_file():
                shutil.copytree(pkg, sources / pkg.name, ignore=shutil.ignore_patterns("*.so"))
    kept = _lint_imports(sources)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    planted = sources / "lattice_contract/dialect/kernel.py"
    planted.write_text(planted.read_text() + "\nfrom lattice_contract.runtime import RuntimeOps\n")
    broken = _lint_imports(sources)
    assert broken.returncode != 0
    assert "lattice_contract.dialect is not allowed to import lattice_contract.runtime" in (
        broken.stdout
    )


def test_every_path_the_architecture_map_names_exists() -> None:
    text = (ROOT / "docs/architecture.md").read_text()
    paths = set(re.findall(r"`((?:packages|docs|benchmarks|examples|dev)[\w./-]*)`", text))
    assert len(paths) >= 20, "docs/architecture.md names the files a maintainer edits"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_old_flat_paths_import_the_moved_module_and_say_where() -> None:
    from lattice_contract._moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(f"lattice_contract.{old}", None)
        with pytest.warns(DeprecationWarning, match=f"moved to lattice_contract.{new}"):
            alias = importlib.import_module(f"lattice_contract.{old}")
        assert alias is importlib.import_module(f"lattice_contract.{new}")
