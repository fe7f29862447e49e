"""lattice-opt as a user runs it: bundle directories, --help, --version."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

OptRunner = Callable[..., "subprocess.CompletedProcess[str]"]


def _bundle(tmp_path: Path, graph: str | None, weights: bool = True) -> Path:
    bundle = tmp_path / "model.lattice"
    bundle.mkdir()
    if graph is not None:
        (bundle / "graph.mlir").write_text(graph, encoding="utf-8")
    if weights:
        (bundle / "weights.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    return bundle


def test_bundle_directory_verifies_its_graph_as_an_artifact(
    tmp_path: Path, valid_modules: dict[str, str], run_opt: OptRunner
) -> None:
    bundle = _bundle(tmp_path, valid_modules["conv3d"])
    run = run_opt(str(bundle))
    assert run.returncode == 0, run.stderr
    assert "lattice.conv3d" in run.stdout and "func.func @forward" in run.stdout


def test_bundle_directory_applies_the_artifact_rules(
    tmp_path: Path, valid_modules: dict[str, str], run_opt: OptRunner
) -> None:
    # Valid ops, but no IR version: only the artifact rules reject it.
    graph = valid_modules["conv3d"].replace("lattice.ir_version = 2 : i64, ", "")
    bundle = _bundle(tmp_path, graph)
    assert run_opt(str(bundle / "graph.mlir")).returncode == 0  # a plain file: ops only
    run = run_opt(str(bundle))
    assert run.returncode == 1
    assert f"{bundle / 'graph.mlir'}:1:1: error: lattice artifact: module attribute " in run.stderr
    assert "lattice.ir_version is missing" in run.stderr


@pytest.mark.parametrize(
    ("graph", "weights", "words"),
    [
        (None, True, "is a directory without graph.mlir"),
        ("module {}", False, "has graph.mlir but no weights.safetensors"),
    ],
    ids=["no graph", "no weights"],
)
def test_incomplete_bundle_is_refused(
    tmp_path: Path, run_opt: OptRunner, graph: str | None, weights: bool, words: str
) -> None:
    bundle = _bundle(tmp_path, graph, weights)
    run = run_opt(str(bundle))
    assert run.returncode == 1
    assert words in run.stderr and str(bundle) in run.stderr


def test_help_lists_the_lattice_options_first(run_opt: OptRunner) -> None:
    run = run_opt("--help")
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert text.startswith("lattice-opt ")
    lattice = text.index("LATTICE OPTIONS:")
    assert lattice < text.index("--lattice-verify-artifact") < text.index("Color Options")
    assert "bundle directory" in text[:lattice]
    assert "256 nested brackets" in text  # the parser limits are documented
    hidden = run_opt("--help-hidden")
    assert hidden.returncode == 0
    assert len(hidden.stdout.splitlines()) > 2 * len(text.splitlines())  # LLVM's full list
    assert "--mlir-print-op-generic" in hidden.stdout


def test_version_is_the_distributions(run_opt: OptRunner) -> None:
    """The version pyproject.toml gives the lattice-mlir distribution (compiled in)."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    run = run_opt("--version")
    assert run.returncode == 0
    assert run.stdout.strip() == f"lattice-opt {version}"
