"""The manners every console script shares, run as real processes.

``lattice``, ``conformance``, ``convert-checkpoint`` and ``lattice-opt`` each
get the same three checks (docs/index.md, "Command-line conventions"): the
exit status says ok (0), a failed check (1) or a usage/input error (2); a
reader that closes the pipe first gets no traceback and status 0; and
``--quiet`` leaves stderr empty on success where the default run logs there.
Each runs as a subprocess because a closed pipe and the logging set-up only
show in a real process.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import lattice_mlir
import pytest
import torch
from lattice_conformance import segmentation as seg

ROOT = Path(__file__).resolve().parents[3]
GEOMETRY = ROOT / "examples/geometry/model.lattice"
BLOCK = ROOT / "packages/lattice-conformance/src/lattice_conformance/data/geometry-block.tar.gz"
# The checkout's wrapper, run as a file: it imports the installed native module.
LATTICE_OPT = [sys.executable, str(ROOT / "packages/lattice-mlir/src/lattice_mlir/_cli.py")]
LATTICE = [sys.executable, "-m", "lattice_tools"]
CONFORMANCE = [sys.executable, "-m", "lattice_conformance"]
CONVERT = [sys.executable, "-m", "torch_lattice.convert"]


def _run(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, timeout=300, check=False
    )


def _closed_pipe(cmd: list[str], *args: str | Path) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is gone before the first write (``| head -0``)."""
    proc = subprocess.Popen([*cmd, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and "BrokenPipe" not in err and "Broken pipe" not in err, err


def _strict_archive(tmp_path: Path) -> Path:
    """The geometry fixture archive with every tolerance 0: its cases must now fail."""
    buf = io.BytesIO()
    with tarfile.open(BLOCK, "r:gz") as src, tarfile.open(fileobj=buf, mode="w") as dst:
        for member in src.getmembers():
            f = src.extractfile(member)
            data = f.read() if f is not None else b""
            if member.name == "manifest.json":
                data = data.replace(b'"atol": 0.0001', b'"atol": 0.0')
                data = data.replace(b'"rtol": 0.0001', b'"rtol": 0.0')
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if f is not None else None)
    path = tmp_path / "strict.tar.gz"
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


# ---------------------------------------------------------------------------
# lattice


def test_lattice_exit_codes_name_what_was_given(tmp_path: Path) -> None:
    assert _run(LATTICE, "inspect", GEOMETRY).returncode == 0
    missing = _run(LATTICE, "inspect", "--json", tmp_path / "missing.tar.gz")
    assert missing.returncode == 2
    assert (
        "missing fixture archive" in missing.stdout and "artifact directory" not in missing.stdout
    )
    text = tmp_path / "notes.txt"
    text.write_text("not an artifact")
    wrong = _run(LATTICE, "inspect", text)
    assert wrong.returncode == 2 and "is a file that is not a fixture archive" in wrong.stdout
    broken = tmp_path / "broken.lattice"
    broken.mkdir()
    for name in ("graph.mlir", "weights.safetensors"):
        (broken / name).write_bytes((GEOMETRY / name).read_bytes())
    graph = (broken / "graph.mlir").read_text()
    (broken / "graph.mlir").write_text(graph.replace("lattice.linear", "lattice.linear2"))
    refused = _run(LATTICE, "inspect", broken)
    assert refused.returncode == 1 and "INVALID" in refused.stdout  # a check that failed
    usage = _run(LATTICE, "inspect", "--no-such-option", GEOMETRY)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    assert _run(LATTICE, "no-such-command").returncode == 2


def test_lattice_closed_pipe_and_quiet(tmp_path: Path) -> None:
    status, err = _closed_pipe(LATTICE, "inspect", GEOMETRY)
    assert status == 0
    _no_traceback(err)
    status, err = _closed_pipe(LATTICE, "inspect", "--json", GEOMETRY)
    assert status == 0
    _no_traceback(err)
    page = tmp_path / "g.html"
    loud = _run(LATTICE, "view", GEOMETRY, "--html", page)
    # the op count is the shipped model's own (it changes when the model is retrained)
    assert loud.returncode == 0 and re.match(r"lattice view: [1-9]\d* ops", loud.stderr)
    quiet = _run(LATTICE, "--quiet", "view", GEOMETRY, "--html", page)
    assert quiet.returncode == 0 and quiet.stderr == ""
    after = _run(LATTICE, "view", GEOMETRY, "--html", page, "-q")  # after the command too
    assert after.returncode == 0 and after.stderr == ""
    failing = _run(LATTICE, "-q", "view", tmp_path / "absent", "--html", page)
    assert failing.returncode == 2 and "missing path" in failing.stderr  # errors stay


# ---------------------------------------------------------------------------
# conformance


def test_conformance_exit_codes_pipe_and_quiet(tmp_path: Path) -> None:
    ok = _run(CONFORMANCE, "replay", BLOCK, "--no-progress")
    assert ok.returncode == 0 and "3/3 cases passed" in ok.stdout
    assert "stage times: open" in ok.stderr  # stage times at INFO
    quiet = _run(CONFORMANCE, "replay", BLOCK, "--no-progress", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "" and "3/3 cases passed" in quiet.stdout
    failed = _run(CONFORMANCE, "replay", _strict_archive(tmp_path), "--no-progress")
    assert failed.returncode == 1 and "FAIL" in failed.stdout
    missing = _run(CONFORMANCE, "replay", tmp_path / "missing.tar.gz")
    assert missing.returncode == 2
    assert _run(CONFORMANCE, "replay", "--no-such-option").returncode == 2
    status, err = _closed_pipe(CONFORMANCE, "replay", BLOCK, "--no-progress")
    assert status == 0
    _no_traceback(err)


# ---------------------------------------------------------------------------
# convert-checkpoint


def test_convert_checkpoint_exit_codes_pipe_and_quiet(tmp_path: Path) -> None:
    src = tmp_path / "ckpt.pt"
    torch.save({"a.kernel": torch.zeros(27, 3, 5)}, src)
    spec = tmp_path / "spec.json"
    spec.write_text(
        '{"format": "lattice-kernel-spec", "version": 1, "kernels": '
        '{"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}}}'
    )
    dst = tmp_path / "w.safetensors"
    done = _run(CONVERT, src, dst, "--kernel-spec", spec)
    assert done.returncode == 0, done.stderr
    assert "1 kernel(s) converted" in done.stderr
    dst.unlink()
    dst.with_name("w.manifest.json").unlink(missing_ok=True)
    quiet = _run(CONVERT, "--quiet", src, dst, "--kernel-spec", spec)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    missing = _run(
        CONVERT, tmp_path / "absent.pt", tmp_path / "x.safetensors", "--kernel-spec", spec
    )
    assert missing.returncode == 2 and "absent.pt" in missing.stderr
    assert _run(CONVERT, src).returncode == 2  # argparse: DST and --kernel-spec missing
    status, err = _closed_pipe(CONVERT, "--version")
    assert status == 0
    _no_traceback(err)


# ---------------------------------------------------------------------------
# lattice-opt


def test_lattice_opt_exit_codes_pipe_and_quiet(tmp_path: Path) -> None:
    graph = GEOMETRY / "graph.mlir"
    ok = _run(LATTICE_OPT, graph, "--lattice-verify-artifact")
    assert ok.returncode == 0 and ok.stderr == ""
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { lattice.bogus }\n")
    refused = _run(LATTICE_OPT, bad, "--lattice-verify-artifact")
    assert refused.returncode == 1 and "lattice.bogus" in refused.stderr
    missing = _run(LATTICE_OPT, tmp_path / "absent.mlir")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    bundle = _run(LATTICE_OPT, GEOMETRY, "--lattice-verify-artifact")  # a model.lattice/ bundle
    assert bundle.returncode == 0 and "lattice.sparse.make" in bundle.stdout
    empty = tmp_path / "empty.lattice"
    empty.mkdir()
    folder = _run(LATTICE_OPT, empty)
    assert folder.returncode == 1 and "without graph.mlir" in folder.stderr
    assert _run(LATTICE_OPT, graph, "--no-such-option").returncode == 2
    verbose = _run(LATTICE_OPT, "-v", graph, "--lattice-verify-artifact")
    assert verbose.returncode == 0 and "native tool took" in verbose.stderr
    quiet = _run(LATTICE_OPT, "--quiet", graph)
    assert quiet.returncode == 0 and quiet.stderr == "" and "lattice.sparse.make" in quiet.stdout
    status, err = _closed_pipe(LATTICE_OPT, graph)
    assert status == 0
    _no_traceback(err)


# lattice-opt installed alone: its wrapper needs nothing of lattice_contract.
LATTICE_OPT_ALONE = [
    sys.executable,
    "-c",
    "import runpy, sys; sys.modules['lattice_contract'] = None; sys.argv.pop(0); "
    "runpy.run_path(sys.argv[0], run_name='__main__')",
    LATTICE_OPT[1],
]


@pytest.mark.parametrize("wrapper", [LATTICE_OPT, LATTICE_OPT_ALONE], ids=["project", "alone"])
def test_lattice_opt_escapes_what_the_native_diagnostics_quote(
    tmp_path: Path, wrapper: list[str]
) -> None:
    """MLIR quotes the graph's line and file name in a diagnostic: escapes there are shown."""
    graph = tmp_path / "g\x1b[2J.mlir"
    graph.write_text('module {\n  "foo\x1b]0;owned\x07"() : () -> ()\n}\n')
    refused = _run(wrapper, graph)
    assert refused.returncode == 1
    assert "\x1b" not in refused.stderr and "\x07" not in refused.stderr, refused.stderr
    assert "g\\x1b[2J.mlir:2:" in refused.stderr
    assert '"foo\\x1b]0;owned\\x07"()' in refused.stderr


@pytest.mark.parametrize("wrapper", [LATTICE_OPT, LATTICE_OPT_ALONE], ids=["project", "alone"])
def test_lattice_opt_output_never_replaces_an_input_or_a_file_on_failure(
    tmp_path: Path, wrapper: list[str]
) -> None:
    """The native tool truncates ``-o`` first and deletes it when the graph fails.

    ``lattice-opt bad.mlir -o bad.mlir`` deleted the user's graph; ``-o notes.txt``
    on a failing graph deleted ``notes.txt``.  Now ``-o`` naming an input (or a
    file in an input bundle) is refused, and the output changes only on success.
    """
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { lattice.bogus }\n")
    link = tmp_path / "link.mlir"
    link.symlink_to(bad)
    for output in (bad, link, f"-o={bad}"):
        args = [bad, output] if str(output).startswith("-o=") else [bad, "-o", output]
        clash = _run(wrapper, *args)
        assert clash.returncode == 2 and "refusing to write" in clash.stderr, clash.stderr
    inside = _run(wrapper, GEOMETRY, "-o", GEOMETRY / "graph.mlir")
    assert inside.returncode == 2 and "refusing to write" in inside.stderr
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    failed = _run(wrapper, bad, "-o", notes)
    assert failed.returncode == 1 and notes.read_text() == "mine"
    assert bad.read_text() == "module { lattice.bogus }\n"
    good = _run(wrapper, GEOMETRY / "graph.mlir", "-o", tmp_path / "out.mlir")
    assert good.returncode == 0 and good.stdout == ""
    assert "lattice.sparse.make" in (tmp_path / "out.mlir").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.mlir",
        "link.mlir",
        "notes.txt",
        "out.mlir",
    ]


def test_the_convention_is_documented_once() -> None:
    text = (ROOT / "docs/index.md").read_text()
    section = text.split("## Command-line conventions", 1)[1]
    for status in ("| 0 |", "| 1 |", "| 2 |"):
        assert status in section
    for command in ("`lattice`", "`conformance`", "`convert-checkpoint`", "`lattice-opt`"):
        assert command in section
    assert lattice_mlir is not None and seg is not None  # both stacks importable here


@pytest.mark.parametrize("package", ["lattice_tools", "lattice_conformance", "torch_lattice"])
def test_no_bare_print_for_diagnostics(package: str) -> None:
    """Nothing in the packages prints to stderr: diagnostics go through ``logging``."""
    src = next((ROOT / "packages").glob(f"*/src/{package}"))
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in src.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "print(" in line and "sys.stderr" in line
    ]
    assert offenders == []


@pytest.mark.parametrize("wrapper", [LATTICE_OPT, LATTICE_OPT_ALONE], ids=["project", "alone"])
def test_lattice_opt_reads_files_and_writes_devices_as_devices(
    tmp_path: Path, wrapper: list[str]
) -> None:
    """A FIFO input blocked the native tool, ``/dev/zero`` filled memory; ``-o`` through a
    link to ``/dev/null`` replaced the link with a file instead of writing to the device."""
    fifo = tmp_path / "g.mlir"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero")):
        refused = _run(wrapper, source)
        assert refused.returncode == 2 and "is not a regular file" in refused.stderr
    null = tmp_path / "null.mlir"
    null.symlink_to(os.devnull)
    done = _run(wrapper, GEOMETRY / "graph.mlir", "-o", null)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert null.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == [
        "g.mlir",
        "null.mlir",
    ]


def test_lattice_opt_writes_to_its_own_stdout_when_asked_by_name(tmp_path: Path) -> None:
    """``-o /dev/fd/1`` with stdout redirected to a file: the stream, never a replaced link."""
    captured = tmp_path / "captured.mlir"
    with captured.open("w") as stdout:
        done = subprocess.run(
            [*LATTICE_OPT, str(GEOMETRY / "graph.mlir"), "-o", "/dev/fd/1"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "lattice.sparse.make" in captured.read_text()


def test_lattice_opt_on_a_full_output_is_a_usage_error() -> None:
    """``-o /dev/full``: the output could not be written (2), not a graph that failed (1)."""
    done = _run(LATTICE_OPT, GEOMETRY / "graph.mlir", "-o", "/dev/full")
    assert done.returncode == 2 and "No space left on device" in done.stderr
