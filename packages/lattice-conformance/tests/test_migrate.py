"""``lattice migrate``: bundles, upstream fixture trees and bare graphs; refusals write nothing.

Sources are upstream's own files (read in place, staged into ``tmp_path``
where a test needs to change one); results are checked with the native
verifier, the plan importer, the bundle rules and byte comparisons of the
copied tensors.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import lattice_mlir
import numpy as np
import pytest
from lattice_conformance.cli import lattice_main
from lattice_conformance.migrate import (
    FIXTURE_CASE_FILES,
    MANIFEST_SCHEMA,
    MigrationError,
    migrate,
    migrate_graph,
)
from lattice_contract import SCHEMA_DIGEST
from lattice_contract.bundle import check_bundle_dir
from lattice_contract.plan import RuntimePlan
from lattice_contract.verify import LatticeValidationError
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_data import UPSTREAM_DIGEST, upstream_root

FIXTURES = upstream_root() / "fixtures"
CORPUS = upstream_root() / "corpus" / "valid"


def _bundle(tmp_path: Path, case: str = "sparse_classifier") -> Path:
    """An upstream artifact bundle: a fixture case's graph and weights."""
    bundle = tmp_path / "upstream.lattice"
    bundle.mkdir()
    for name in ("graph.mlir", "weights.safetensors"):
        shutil.copyfile(FIXTURES / case / name, bundle / name)
    return bundle


def _readable_by_others(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IROTH)


def test_bundle_migrates_and_loads(tmp_path: Path) -> None:
    src = _bundle(tmp_path)
    dst = tmp_path / "model.lattice"
    report = migrate(src, dst)
    assert report.kind == "bundle" and report.producer == "mlx-lattice 0.6.x"
    paths = check_bundle_dir(dst)  # the bundle rules hold (no JSON inside)
    assert sorted(p.name for p in dst.iterdir()) == ["graph.mlir", "weights.safetensors"]
    assert paths.weights.read_bytes() == (src / "weights.safetensors").read_bytes()
    text = paths.graph.read_text()
    assert SCHEMA_DIGEST in text and UPSTREAM_DIGEST not in text
    plan = RuntimePlan.from_native(lattice_mlir.import_plan(text))
    assert plan.schema_digest == SCHEMA_DIGEST
    manifest = json.loads(report.manifest.read_text())
    assert report.manifest == tmp_path / "model.lattice.migration.json"
    assert manifest["schema"] == MANIFEST_SCHEMA and manifest["kind"] == "bundle"
    (changes,) = (g["changes"] for g in manifest["graphs"].values())
    assert changes == [
        {"what": "lattice.schema_digest", "before": UPSTREAM_DIGEST, "after": SCHEMA_DIGEST}
    ]
    assert manifest["copied_unchanged"] == ["weights.safetensors"]
    for path in (dst, paths.graph, paths.weights, report.manifest):
        assert _readable_by_others(path), oct(path.stat().st_mode)
    # the migrated bundle is a Lattice artifact: the MLX runtime loads it
    from mlx_lattice.artifact import load_lattice_program

    assert load_lattice_program(dst) is not None


def test_fixture_tree_migrates_case_by_case(tmp_path: Path) -> None:
    dst = tmp_path / "upstream-migrated"
    report = migrate(FIXTURES, dst, manifest=tmp_path / "changes.json")
    assert report.kind == "fixture-tree"
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    names = [c["name"] for c in manifest["cases"]]
    assert list(report.cases) == names and len(names) == 8
    assert (dst / "manifest.json").read_bytes() == (FIXTURES / "manifest.json").read_bytes()
    for name in names:
        for file in FIXTURE_CASE_FILES[1:]:
            assert (dst / name / file).read_bytes() == (FIXTURES / name / file).read_bytes()
        status = lattice_mlir.verify((dst / name / "graph.mlir").read_text())
        assert status.valid, status.diagnostics
    changes = json.loads((tmp_path / "changes.json").read_text())
    assert set(changes["graphs"]) == set(names)
    assert changes["kind"] == "fixture-tree"


def test_bare_graph_rewrites_roles_and_bare_sparse_names(tmp_path: Path) -> None:
    dst = tmp_path / "conv.mlir"
    report = migrate(CORPUS / "conv3d_basic.mlir", dst)
    (changes,) = report.cases.values()
    assert [c.what for c in changes] == ["lattice.schema_digest", "lattice.output_roles"]
    assert changes[1].before == ["tensor"] and changes[1].after == ["sparse_tensor"]
    assert lattice_mlir.verify(dst.read_text()).valid
    graph = migrate_graph((CORPUS / "normalized_subm_conv3d_basic.mlir").read_text())
    assert graph.renamed_inputs == {
        "coords": "input_coords",
        "features": "input_features",
        "active": "input_active",
    }
    plan = RuntimePlan.from_native(lattice_mlir.import_plan(graph.text))
    assert [a.abi_name for a in plan.args] == ["input_coords", "input_features", "input_active"]


def test_fixture_tree_inputs_follow_renamed_sparse_names(tmp_path: Path) -> None:
    """A case whose sparse input has upstream's bare names gets its inputs renamed too."""
    src = tmp_path / "tree"
    shutil.copytree(FIXTURES, src, ignore=shutil.ignore_patterns("*"))
    case = "sparse_classifier"
    shutil.copytree(FIXTURES / case, src / case)
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    manifest["cases"] = [c for c in manifest["cases"] if c["name"] == case]
    (src / "manifest.json").write_text(json.dumps(manifest))
    graph = src / case / "graph.mlir"
    graph.write_text(
        graph.read_text()
        .replace('"x_coords"', '"coords"')
        .replace('"x_features"', '"features"')
        .replace('"x_active"', '"active"')
    )
    inputs = load_file(str(src / case / "inputs.safetensors"))
    bare = {k.removeprefix("x_"): v for k, v in inputs.items()}
    save_file(bare, str(src / case / "inputs.safetensors"))
    dst = tmp_path / "out"
    report = migrate(src, dst)
    assert [c.what for c in report.cases[case]][-1] == "lattice.input_names"
    migrated = load_file(str(dst / case / "inputs.safetensors"))
    assert set(migrated) == {f"input_{k}" for k in bare}
    for key, value in bare.items():
        np.testing.assert_array_equal(migrated[f"input_{key}"], value)
        assert migrated[f"input_{key}"].dtype == value.dtype


def _upstream_graph(tmp_path: Path, source: Path, old: str = "", new: str = "") -> Path:
    path = tmp_path / source.name
    path.write_text(source.read_text().replace(old, new) if old else source.read_text())
    return path


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ((UPSTREAM_DIGEST, "0" * 64), "is not a known producer's; only artifacts of a known"),
        ((UPSTREAM_DIGEST, SCHEMA_DIGEST), "needs no migration"),
        (
            ("kernel_size = array<i64: 2, 2, 2>", "kernel_size = array<i64: 3, 2, 2>"),
            "upstream emits a duplicate row for each, Lattice sums them into one row",
        ),
        (("accumulation", "acumulation"), "does not parse or an op does not verify"),
    ],
)
def test_refusals_say_why_and_write_nothing(
    tmp_path: Path, edit: tuple[str, str], words: str
) -> None:
    src = _upstream_graph(tmp_path, CORPUS / "generative_conv_transpose3d_basic.mlir", *edit)
    dst = tmp_path / "out.mlir"
    with pytest.raises(MigrationError) as info:
        migrate(src, dst)
    assert words in str(info.value)
    assert not dst.exists() and not (tmp_path / "out.mlir.migration.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_dense_output_declared_sparse_is_refused(tmp_path: Path) -> None:
    src = _upstream_graph(
        tmp_path,
        CORPUS / "global_pool_basic.mlir",
        'lattice.output_roles = ["tensor"]',
        'lattice.output_roles = ["sparse_tensor"]',
    )
    with pytest.raises(MigrationError, match=r"output #0 has role sparse_tensor but is a tensor"):
        migrate(src, tmp_path / "out.mlir")


def test_destination_and_source_rules(tmp_path: Path) -> None:
    src = _bundle(tmp_path)
    dst = tmp_path / "model.lattice"
    migrate(src, dst)
    with pytest.raises(MigrationError, match="exists; choose a new path or pass --force"):
        migrate(src, dst)
    before = (dst / "graph.mlir").read_text()
    migrate(src, dst, force=True)
    assert (dst / "graph.mlir").read_text() == before
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep")
    with pytest.raises(MigrationError, match="refusing to replace"):
        migrate(src, tmp_path / "notes", force=True)
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep"
    with pytest.raises(MigrationError, match="same path"):
        migrate(src, src)
    with pytest.raises(MigrationError, match="does not exist"):
        migrate(tmp_path / "missing", tmp_path / "x")
    (src / "extra.safetensors").write_bytes(b"")
    with pytest.raises(MigrationError, match=r"extra\.safetensors"):
        migrate(src, tmp_path / "again.lattice")


def test_fixture_tree_rules(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "manifest.json").write_text(json.dumps({"schema": "other/v9", "cases": []}))
    with pytest.raises(MigrationError, match="torch_lattice_e2e_fixtures/v1"):
        migrate(tree, tmp_path / "out")
    (tree / "manifest.json").write_text(
        json.dumps({"schema": "torch_lattice_e2e_fixtures/v1", "cases": [{"name": "a"}]})
    )
    (tree / "a").mkdir()
    shutil.copyfile(FIXTURES / "sparse_reindex" / "graph.mlir", tree / "a" / "graph.mlir")
    with pytest.raises(MigrationError, match=r"lacks weights\.safetensors, inputs\.safetensors"):
        migrate(tree, tmp_path / "out")
    (tree / "manifest.json").write_text(
        json.dumps({"schema": "torch_lattice_e2e_fixtures/v1", "cases": [{"name": "../a"}]})
    )
    with pytest.raises(MigrationError, match="plain 'name'"):
        migrate(tree, tmp_path / "out")
    (tree / "manifest.json").write_text(
        json.dumps({"schema": "torch_lattice_e2e_fixtures/v1", "cases": 5})
    )
    with pytest.raises(MigrationError, match="must list its cases"):  # not a TypeError
        migrate(tree, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lattice_main(["migrate", str(CORPUS / "voxelize_basic.mlir"), str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "migrated graph" in out and "lattice.output_roles" in out
    assert lattice_main(["migrate", str(CORPUS / "voxelize_basic.mlir"), str(tmp_path / "v")]) == 1
    assert "lattice migrate: refused: DST" in capsys.readouterr().err
    assert lattice_main(["--help"]) == 0
    assert "migrate" in capsys.readouterr().out


def test_umask_is_honoured(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        migrate(CORPUS / "pool3d_basic.mlir", tmp_path / "p.mlir")
    finally:
        os.umask(old)
    assert not _readable_by_others(tmp_path / "p.mlir")


def test_nothing_migrates_at_load_time(tmp_path: Path) -> None:
    """Loading an unmigrated upstream bundle fails, naming the producer and the command."""
    from mlx_lattice.artifact import load_lattice_program

    src = _bundle(tmp_path)
    with pytest.raises(LatticeValidationError, match=r"mlx-lattice 0\.6\.x") as info:
        load_lattice_program(src)
    assert "lattice migrate SRC DST" in str(info.value)
    assert (src / "graph.mlir").read_bytes() == (
        FIXTURES / "sparse_classifier" / "graph.mlir"
    ).read_bytes()
