"""The atomic writer's one output check: outputs apart from inputs, from each other, and files.

Two outputs of one command on the same path (``--report x --plot x``) wrote
the second over the first.  A destination that is (or links to) a device, a
FIFO or a socket had its directory entry replaced by a regular file (for an
account allowed to write there, ``--report /dev/stdout`` swapped the device
node); a link to a regular file is replaced as a link, its target untouched.
Every path here lies in ``tmp_path``: links stand in for ``/dev`` entries.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from lattice_contract.artifact import OutputClashError, atomic_write_file, check_outputs


def test_two_outputs_on_one_path_or_one_inside_the_other_are_refused(tmp_path: Path) -> None:
    report = tmp_path / "out.png"
    with pytest.raises(OutputClashError, match="name a separate path for each output"):
        check_outputs([report, tmp_path / "sub" / ".." / "out.png"])
    with pytest.raises(OutputClashError, match="one would replace"):
        check_outputs([tmp_path / "bundle", tmp_path / "bundle" / "report.json"])
    check_outputs([tmp_path / "a.json", tmp_path / "a.png"], [tmp_path / "in.ply"])


def test_a_fifo_destination_is_refused_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputClashError, match=r"is a FIFO \(named pipe\), not a file"):
        atomic_write_file(fifo, lambda tmp: tmp.write_text("x"))
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no lock, no temp folder


def test_a_link_to_a_device_is_refused_and_stays_a_link(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to(os.devnull)
    with pytest.raises(OutputClashError, match=r"is a character device \(through a link\)"):
        atomic_write_file(link, lambda tmp: tmp.write_text("x"))
    assert link.is_symlink() and os.readlink(link) == os.devnull


def test_a_link_to_a_regular_file_is_replaced_as_a_link(tmp_path: Path) -> None:
    """The name the user gave gets the new file; the file it pointed to is left alone."""
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    atomic_write_file(link, lambda tmp: tmp.write_text("report"))
    assert not link.is_symlink() and link.read_text() == "report"
    assert victim.read_text() == "mine"


def test_a_directory_where_a_file_goes_is_named(tmp_path: Path) -> None:
    """It ended in ``[Errno 21] Is a directory`` naming the writer's hidden temporary path."""
    folder = tmp_path / "page.html"
    folder.mkdir()
    with pytest.raises(OutputClashError, match="it is a directory; name a file path"):
        atomic_write_file(folder, lambda tmp: tmp.write_text("x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


def test_a_missing_folder_is_named_not_the_lock_file(tmp_path: Path) -> None:
    """It ended in ``No such file or directory: '.../.page.html.lock'``."""
    with pytest.raises(FileNotFoundError) as caught:
        atomic_write_file(tmp_path / "no" / "page.html", lambda tmp: tmp.write_text("x"))
    message = str(caught.value)
    assert f"the folder {str(tmp_path / 'no')!r} does not exist" in message
    assert ".lock" not in message


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/dev/null", "/proc/self/fd/2"])
def test_entries_of_dev_and_proc_are_refused_before_anything_is_written(name: str) -> None:
    """``/dev/stdout`` links to the process's descriptor: a regular file when stdout is
    redirected to one, so the writer replaced the link (an account allowed to write in
    ``/dev`` lost ``/dev/stdout``).  Checked with ``check_outputs`` alone, which writes
    nothing even if the rule were gone."""
    with pytest.raises(OutputClashError, match="never files this command replaces"):
        check_outputs([name])
