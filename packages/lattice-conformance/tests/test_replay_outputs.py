"""``conformance replay`` never writes over what it replays, and prints names escaped.

``--report`` or ``--plot`` naming the archive, the tree or a file inside the
tree used to replace it with JSON; ``--plot x.gz`` ended in a traceback; a
case name holding terminal escapes reached the terminal raw.  Archives with
member names no file system can hold, or with more members than any fixture
needs, are refused by name.  The trees are one upstream case staged into
``tmp_path`` (read in place) and altered here; archives are built here.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from lattice_conformance.replay import main
from lattice_conformance.safe_extract import ArchiveLimits, FixtureArchiveError, extract_members
from lattice_contract.testing import SPECIAL_KINDS, special_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_data import upstream_root

# Subcommands are called here without the command entry that sets up logging.
pytestmark = pytest.mark.usefixtures("command_logging")

CASE = "sparse_reindex"
SCHEMA = "torch_lattice_e2e_fixtures/v1"


def _tree(tmp_path: Path, name: str = CASE) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copytree(upstream_root() / "fixtures" / CASE, tree / name)
    case = {"name": name, "output_kind": "sparse", "atol": 1e-3, "rtol": 1e-3}
    (tree / "manifest.json").write_text(json.dumps({"schema": SCHEMA, "cases": [case]}))
    return tree


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["tree/manifest.json", "tree", "tree/sparse_reindex/graph.mlir"])
def test_a_report_never_replaces_the_tree_or_a_file_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    tree = _tree(tmp_path)
    before = _snapshot(tree)
    assert main([str(tree), "--report", str(tmp_path / where)]) == 2
    assert "refusing to write" in capsys.readouterr().err
    assert _snapshot(tree) == before


def test_a_report_never_replaces_the_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    archive = tmp_path / "fixtures.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=".")
    data = archive.read_bytes()
    assert main([str(archive), "--report", str(archive)]) == 2
    assert archive.read_bytes() == data


def test_a_plot_of_an_unknown_format_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    assert main([str(tree), "--plot", str(tmp_path / "x.gz")]) == 2
    err = capsys.readouterr().err
    assert "suffix picks the format" in err and "Traceback" not in err


def test_case_names_with_terminal_escapes_print_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path, "case\x1b]0;owned\x07")
    main([str(tree), "--no-progress"])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "case\\x1b]0;owned\\x07" in out


def _archive(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 0
            tar.addfile(info, io.BytesIO(b""))
    return path


def test_a_member_name_no_file_system_holds_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "a.tar.gz", ["case/" + "n" * 300])
    (tmp_path / "out").mkdir()
    with pytest.raises(FixtureArchiveError, match="over 255 bytes") as caught:
        extract_members(archive, tmp_path / "out", ArchiveLimits())
    assert caught.value.reason == "bad_name"


def test_an_archive_of_more_members_than_any_fixture_is_refused_early(tmp_path: Path) -> None:
    """The default cap keeps a 1 MB archive of empty members from costing tens of seconds."""
    assert ArchiveLimits().max_members <= 10_000  # 99,000 empty members took 10-38 s
    limits = ArchiveLimits(max_members=50)
    archive = _archive(tmp_path / "a.tar.gz", [f"m{i}" for i in range(51)])
    (tmp_path / "out").mkdir()
    with pytest.raises(FixtureArchiveError) as caught:
        extract_members(archive, tmp_path / "out", limits)
    assert caught.value.reason == "too_many_members"


def test_names_with_tex_markup_still_draw_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``$...$`` in a tree or case name was parsed as TeX: the plot failed with a traceback."""
    tree = _tree(tmp_path, "case$\\foo{$")
    tree = tree.rename(tmp_path / "tree$\\bar{$\x1b[2J")
    plot = tmp_path / "errors.png"
    # 1: the staged upstream case needs `lattice migrate`; its verdict and reason are drawn
    assert main([str(tree), "--no-progress", "--plot", str(plot)]) == 1
    out, err = capsys.readouterr()
    assert "case$\\foo{$: artifact:" in out and "Traceback" not in err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib

    # the setting was scoped to our figure: a caller's own figures keep their maths
    assert matplotlib.rcParams["text.parse_math"] is True


def test_report_and_plot_on_one_path_are_refused_before_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    both = tmp_path / "out.png"
    assert main([str(tree), "--report", str(both), "--plot", str(both)]) == 2
    assert "name a separate path for each output" in capsys.readouterr().err
    assert not both.exists()


def test_a_plot_that_cannot_be_written_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    (tmp_path / "plain").write_text("x")  # a folder that is a file: no account can write there
    code = main([str(tree), "--no-progress", "--plot", str(tmp_path / "plain" / "p.png")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot write the plot" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_an_archive_that_is_not_a_file_is_named_and_never_read(tmp_path: Path, kind: str) -> None:
    """Hashing the archive blocked on a FIFO and never ended on a link to ``/dev/zero``.

    Run as a process: the old behaviour never returns.
    """
    import subprocess

    archive = tmp_path / "fixtures.tar.gz"
    what = special_file(archive, kind)
    done = subprocess.run(
        [sys.executable, "-m", "lattice_conformance", "replay", str(archive)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and f"is {what}; name a regular file" in done.stderr
    assert "Traceback" not in done.stderr
