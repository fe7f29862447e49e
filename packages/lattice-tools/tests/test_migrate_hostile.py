"""``lattice migrate`` on hostile trees and careless paths: trees read like archives.

A fixture tree is a directory of plain files: a link in it (to a file
outside the tree, to ``/proc/self/environ``) used to be followed and its
target copied into DST.  A tree listing one case twice, a DST of ``.``, and
a ``--manifest`` that already exists are refused with a message; nothing is
written.  The trees are one upstream case (read in place) staged into
``tmp_path`` and altered here.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from lattice_tools.cli import lattice_main
from lattice_tools.migrate import MigrationError, migrate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lattice-conformance" / "tests"))
from upstream_data import upstream_root

FIXTURES = upstream_root() / "fixtures"
SCHEMA = "torch_lattice_e2e_fixtures/v1"
CASE = "sparse_reindex"


def _tree(tmp_path: Path, cases: list[str] | None = None) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copytree(FIXTURES / CASE, tree / CASE)
    entry = {"name": CASE, "output_kind": "sparse", "atol": 0, "rtol": 0}
    listed = [{**entry, "name": name} for name in (cases or [CASE])]
    (tree / "manifest.json").write_text(json.dumps({"schema": SCHEMA, "cases": listed}))
    return tree


@pytest.mark.parametrize(
    "target",
    ["outside", "/proc/self/environ", "dir"],
    ids=["file-outside-the-tree", "proc-environ", "case-directory"],
)
def test_a_link_in_a_tree_is_refused_not_followed(tmp_path: Path, target: str) -> None:
    tree = _tree(tmp_path)
    if target == "dir":
        real = tmp_path / "elsewhere"
        (tree / CASE).rename(real)
        (tree / CASE).symlink_to(real, target_is_directory=True)
    else:
        secret = tmp_path / "secret.safetensors"
        shutil.copyfile(tree / CASE / "expected.safetensors", secret)
        victim = tree / CASE / "expected.safetensors"
        victim.unlink()
        victim.symlink_to(secret if target == "outside" else Path(target))
    dst = tmp_path / "out"
    with pytest.raises(MigrationError, match="symbolic link"):
        migrate(tree, dst)
    assert not dst.exists() and not (tmp_path / "out.migration.json").exists()


def test_a_tree_listing_a_case_twice_is_refused(tmp_path: Path) -> None:
    tree = _tree(tmp_path, [CASE, CASE])
    with pytest.raises(MigrationError, match="listed twice"):
        migrate(tree, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_case_file_that_is_not_what_it_claims_is_refused(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / CASE / "expected.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(MigrationError, match=r"expected\.safetensors"):
        migrate(tree, tmp_path / "out")


def test_an_existing_manifest_is_not_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    args = ["migrate", str(tree), str(tmp_path / "out"), "--manifest", str(notes)]
    assert lattice_main(args) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert notes.read_text() == "mine" and not (tmp_path / "out").exists()
    default = tmp_path / "out2.migration.json"
    default.write_text("also mine")
    assert lattice_main(["migrate", str(tree), str(tmp_path / "out2")]) == 2
    assert default.read_text() == "also mine"
    assert lattice_main([*args, "--force"]) == 0  # named and forced: replaced
    assert json.loads(notes.read_text())["kind"] == "fixture-tree"


def test_dst_dot_is_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert lattice_main(["migrate", str(tree), ".", "--force"]) == 2
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert "names no new file or directory" in err and "Traceback" not in err


def test_case_names_with_terminal_escapes_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "case\x1b[2J"
    tree = _tree(tmp_path, [name])
    (tree / CASE).rename(tree / name)
    assert lattice_main(["migrate", str(tree), str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "case\\x1b[2J" in out


def test_paths_with_terminal_escapes_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SRC, DST and the manifest's path are printed in the summary (a name from a glob)."""
    tree = _tree(tmp_path).rename(tmp_path / "tree\x1b]0;owned\x07")
    assert lattice_main(["migrate", str(tree), str(tmp_path / "out\x1b[2J")]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "tree\\x1b]0;owned\\x07" in out and out.count("out\\x1b[2J") == 2


def test_an_archive_or_a_fifo_as_src_is_named_as_what_it_is(tmp_path: Path) -> None:
    """An archive was read as a graph (a UTF-8 error); a FIFO was said not to exist."""
    archive = tmp_path / "fixtures.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + bytes(20))
    with pytest.raises(MigrationError, match=r"is an archive; .* extract the archive"):
        migrate(archive, tmp_path / "out")
    fifo = tmp_path / "graph.mlir"
    os.mkfifo(fifo)
    with pytest.raises(MigrationError, match=r"is a FIFO \(named pipe\); name a bundle"):
        migrate(fifo, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fixtures.tar.gz", "graph.mlir"]
