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
from lattice_contract import SCHEMA_DIGEST
from lattice_contract.artifact import atomic, check_bundle_dir, path_lock
from lattice_contract.plan import LatticeValidationError, RuntimePlan
from lattice_contract.testing import kill_writer_at
from lattice_tools.cli import lattice_main
from lattice_tools.migrate import (
    FIXTURE_CASE_FILES,
    MANIFEST_SCHEMA,
    MigrationError,
    migrate,
    migrate_graph,
)
from safetensors.numpy import load_file, save_file

# upstream_data (where the upstream corpus and fixtures are) is the conformance tests' helper.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lattice-conformance" / "tests"))
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
    assert manifest["destination_sha256"] == atomic.fingerprint(dst)  # the DST it describes
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


def _bare_name_tree(tmp_path: Path) -> tuple[Path, str]:
    """A one-case tree whose sparse input carries upstream's bare names (graph and inputs)."""
    src = tmp_path / "tree"
    src.mkdir()
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
    return src, case


def test_fixture_tree_inputs_follow_renamed_sparse_names(tmp_path: Path) -> None:
    """A case whose sparse input has upstream's bare names gets its inputs renamed too."""
    src, case = _bare_name_tree(tmp_path)
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


def test_renamed_inputs_keep_bf16_bytes_and_metadata(tmp_path: Path) -> None:
    """Renaming rewrites the header only: bf16 entries and ``__metadata__`` survive."""
    import torch
    from safetensors.torch import load_file as load_torch
    from safetensors.torch import save_file as save_torch

    src, case = _bare_name_tree(tmp_path)
    inputs = load_torch(str(src / case / "inputs.safetensors"))
    bare = {k.removeprefix("x_"): v for k, v in inputs.items()}
    bare["features"] = bare["features"].to(torch.bfloat16)
    save_torch(bare, str(src / case / "inputs.safetensors"), metadata={"producer": "torch"})
    migrate(src, tmp_path / "out")
    out = tmp_path / "out" / case / "inputs.safetensors"
    migrated = load_torch(str(out))
    assert migrated["input_features"].dtype == torch.bfloat16
    for key, value in bare.items():
        assert torch.equal(migrated[f"input_{key}"], value)
    from safetensors import safe_open

    with safe_open(str(out), "pt") as handle:
        assert handle.metadata() == {"producer": "torch"}


def test_an_inputs_file_without_the_renamed_entry_is_refused(tmp_path: Path) -> None:
    src, _ = _bare_name_tree(tmp_path)  # the graph says "coords", the file "x_coords"
    with pytest.raises(MigrationError, match=r"has no entries 'active', 'coords', 'features'"):
        migrate(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


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
    """The tree's manifest is read by the replayer's own bounded rules (one reader)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    schema = "torch_lattice_e2e_fixtures/v1"

    def manifest(cases: object) -> None:
        (tree / "manifest.json").write_text(json.dumps({"schema": schema, "cases": cases}))

    (tree / "manifest.json").write_text(json.dumps({"schema": "other/v9", "cases": []}))
    with pytest.raises(MigrationError, match="torch_lattice_e2e_fixtures/v1"):
        migrate(tree, tmp_path / "out")
    case = {"name": "a", "output_kind": "sparse", "atol": 0, "rtol": 0}
    manifest([case])
    (tree / "a").mkdir()
    shutil.copyfile(FIXTURES / "sparse_reindex" / "graph.mlir", tree / "a" / "graph.mlir")
    with pytest.raises(MigrationError, match=r"lacks weights\.safetensors, inputs\.safetensors"):
        migrate(tree, tmp_path / "out")
    manifest([{**case, "name": "../a"}])
    with pytest.raises(MigrationError, match="is not a folder"):
        migrate(tree, tmp_path / "out")
    manifest(5)
    with pytest.raises(MigrationError, match="lists no cases"):  # not a TypeError
        migrate(tree, tmp_path / "out")
    (tree / "manifest.json").write_text(f'{{"schema": "{schema}", "cases": [{"[" * 40}]}}')
    with pytest.raises(MigrationError, match="nests 42 levels deep"):  # bounded, no RecursionError
        migrate(tree, tmp_path / "out")
    pad = " " * (1 << 20)
    (tree / "manifest.json").write_text(json.dumps({"schema": schema, "cases": [case]}) + pad)
    with pytest.raises(MigrationError, match="refused, not truncated"):
        migrate(tree, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lattice_main(["migrate", str(CORPUS / "voxelize_basic.mlir"), str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    assert "migrated graph" in out and "lattice.output_roles" in out
    assert lattice_main(["migrate", str(CORPUS / "voxelize_basic.mlir"), str(tmp_path / "v")]) == 2
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


# A child process runs `lattice migrate --force` over an existing DST and is
# killed with SIGKILL at one step of the atomic swap (lattice_contract.artifact.atomic's
# test hook; "fallback" forces the two-rename path used where RENAME_EXCHANGE
# is unavailable).
KILLED_MIGRATION = """
from lattice_tools.migrate import migrate
migrate(sys.argv[1], sys.argv[2], force=True)
"""


@pytest.mark.parametrize(
    ("mode", "step", "survivor"),
    [
        ("exchange", "before_swap", "old"),
        ("exchange", "before_companion", "new"),
        ("fallback", "between_renames", "old"),
    ],
)
def test_a_killed_forced_migration_keeps_dst_and_its_manifest_together(
    tmp_path: Path, mode: str, step: str, survivor: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old_src = _bundle(tmp_path / "a", "sparse_classifier")
    new_src = _bundle(tmp_path / "b", "transpose_convolution")
    dst = tmp_path / "out" / "model.lattice"
    dst.parent.mkdir()
    manifest = dst.with_name("model.lattice.migration.json")
    migrate(old_src, dst)
    kill_writer_at(step, KILLED_MIGRATION, str(new_src), str(dst), fallback=mode == "fallback")
    expected = {"old": old_src, "new": new_src}[survivor]
    if mode == "exchange":  # DST is a complete bundle at every instant
        assert (dst / "weights.safetensors").read_bytes() == (
            expected / "weights.safetensors"
        ).read_bytes()
    # The next run settles the leftovers first, even one refused because DST exists.
    with pytest.raises(MigrationError, match="pass --force"):
        migrate(new_src, dst)
    check_bundle_dir(dst)
    assert (dst / "weights.safetensors").read_bytes() == (
        expected / "weights.safetensors"
    ).read_bytes()
    record = json.loads(manifest.read_text())
    assert record["source"] == str(expected)
    assert record["destination_sha256"] == atomic.fingerprint(dst)
    migrate(new_src, dst, force=True)  # and the next run leaves nothing hidden behind
    hidden = [p.name for p in dst.parent.iterdir() if p.name.startswith(".")]
    assert hidden == [], hidden


def test_a_second_writer_is_refused_clearly(tmp_path: Path) -> None:
    src = _bundle(tmp_path)
    dst = tmp_path / "model.lattice"
    with path_lock(dst):
        with pytest.raises(MigrationError, match="another writer holds"):
            migrate(src, dst)
        assert lattice_main(["migrate", str(src), str(dst)]) == 2
    assert not dst.exists() and not dst.with_name("model.lattice.migration.json").exists()


def test_the_manifest_cannot_be_dst_or_inside_it(tmp_path: Path) -> None:
    src = _bundle(tmp_path)
    dst = tmp_path / "model.lattice"
    for manifest in (dst, dst / "changes.json"):
        with pytest.raises(MigrationError, match="would be DST or lie inside it"):
            migrate(src, dst, manifest=manifest)
    with pytest.raises(MigrationError, match="the manifest's directory"):
        migrate(src, dst, manifest=tmp_path / "nowhere" / "m.json")
    with pytest.raises(MigrationError, match="would be SRC or lie inside it"):
        migrate(src, dst, manifest=src / "graph.mlir")
    assert not dst.exists()
    assert (src / "graph.mlir").read_bytes() == (
        FIXTURES / "sparse_classifier" / "graph.mlir"
    ).read_bytes()


def test_src_and_dst_may_not_contain_each_other(tmp_path: Path) -> None:
    """--force over a tree holding SRC would delete the source with the old DST."""
    src = _bundle(tmp_path)
    with pytest.raises(MigrationError, match="lie inside one another"):
        migrate(src, src / "nested.lattice")
    tree = tmp_path / "tree"
    migrate(FIXTURES, tree)  # a previous migration's output, which --force may replace
    inner = tree / "inner.lattice"
    shutil.copytree(src, inner)
    with pytest.raises(MigrationError, match="lie inside one another"):
        migrate(inner, tree, force=True)
    assert check_bundle_dir(inner)
