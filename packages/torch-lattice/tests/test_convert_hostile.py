"""convert-checkpoint against hostile and careless inputs (each built here).

Outputs never replace inputs; a tensor claiming more bytes than its storage
holds, a pathological rename regex, a spec that is not UTF-8 or not a
regular file, tensors safetensors cannot hold and the ``__metadata__`` key
are refused with a message naming the problem; a killed conversion leaves no
temporary file that a later run would not remove.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch_lattice.convert import ConversionError, KernelSpec, main

SPEC: dict[str, Any] = {
    "format": "lattice-kernel-spec",
    "version": 2,
    "kernels": {"conv.kernel": {"framework": "minkowski", "kernel_size": 3}},
}


def _files(tmp_path: Path, state: dict[str, Any] | None = None, **spec: Any) -> tuple[Path, Path]:
    src = tmp_path / "model.pt"
    torch.save(state if state is not None else {"conv.kernel": torch.ones(27, 2, 3)}, src)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({**SPEC, **spec}), encoding="utf-8")
    return src, spec_path


def _run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("clash", ["manifest_is_src", "manifest_is_spec", "dst_is_src"])
def test_no_output_replaces_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clash: str
) -> None:
    src, spec = _files(tmp_path)
    if clash == "dst_is_src":
        src = src.rename(tmp_path / "model.safetensors")
        from safetensors.torch import save_file

        save_file({"conv.kernel": torch.ones(27, 2, 3)}, str(src))
        args: list[Any] = [src, src, "--kernel-spec", spec]
    else:
        victim = src if clash == "manifest_is_src" else spec
        args = [src, tmp_path / "out.safetensors", "--kernel-spec", spec, "--manifest", victim]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, err = _run(capsys, *args)
    assert code == 2 and "refusing to write" in err and "input" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_stride_zero_view_is_refused_before_anything_is_copied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = torch.zeros(1).expand(50_000_000)  # 200 MB claimed over 4 bytes of storage
    src, spec = _files(tmp_path, {"conv.kernel": torch.ones(27, 2, 3), "big": huge})
    assert src.stat().st_size < 4096
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and "big: shape [50000000] claims 200,000,000 bytes" in err
    assert not (tmp_path / "o.safetensors").exists()


@pytest.mark.parametrize(
    ("rename", "words"),
    [
        (["^(a+)+$", "x"], "exponential time"),
        (["(x|xx)*y", "z"], "exponential time"),
        (["(a)\\1", "z"], "backreferences"),
        ([".*.*.*.*", "z"], "unbounded repeats"),
        (["^conv", "\\9"], "invalid group reference 9"),
        (["a" * 300, "b"], "longer than 256"),
    ],
)
def test_rename_rules_that_could_hang_or_fail_late_are_refused_at_load(
    rename: list[str], words: str
) -> None:
    start = time.process_time()
    with pytest.raises(ConversionError, match="rename") as caught:
        KernelSpec.from_json({**SPEC, "rename": [rename]})
    assert words in str(caught.value)
    assert time.process_time() - start < 1.0


def test_a_bounded_rename_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, spec = _files(tmp_path, rename=[["^conv\\.(.*)$", "enc.\\1"]])
    dst = tmp_path / "o.safetensors"
    assert _run(capsys, src, dst, "--kernel-spec", spec)[0] == 0
    assert list(load_file(str(dst))) == ["enc.kernel"]


def test_a_spec_that_is_not_utf8_or_has_a_huge_number_gets_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, spec = _files(tmp_path)
    spec.write_bytes(b'{"format": "\xff\xfe"}')
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and "is not UTF-8 text" in err
    spec.write_text('{"version": ' + "9" * 5000 + "}", encoding="utf-8")
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and "is not valid JSON" in err


def test_a_spec_that_is_a_fifo_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = _files(tmp_path)
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", fifo)
    assert code == 2 and "is a FIFO" in err


@pytest.mark.parametrize(
    ("tensor", "words"),
    [
        (lambda: torch.ones(3, 3).to_sparse(), "sparse_coo tensor"),
        (
            lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8),
            "quantized qint8 tensor",
        ),
        (lambda: torch.ones(4, device="meta"), "meta-device tensor"),
    ],
)
def test_tensors_safetensors_cannot_hold_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tensor: Any, words: str
) -> None:
    state = {"conv.kernel": torch.ones(27, 2, 3), "odd": tensor()}
    src = tmp_path / "model.pt"
    _, spec = _files(tmp_path)
    try:
        torch.save(state, src)
    except Exception as exc:  # a torch that cannot save it at all leaves nothing to test
        pytest.fail(f"could not build the input: {exc}")
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and f"odd: a {words}" in err and "Traceback" not in err


def test_the_metadata_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, spec = _files(
        tmp_path, {"conv.kernel": torch.ones(27, 2, 3), "__metadata__": torch.ones(2)}
    )
    code, err = _run(capsys, src, tmp_path / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and "'__metadata__'" in err
    assert not (tmp_path / "o.safetensors").exists()


def test_an_unwritable_destination_gets_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A destination under a regular file (an OSError root cannot bypass, unlike modes)."""
    src, spec = _files(tmp_path)
    (tmp_path / "plain").write_text("x")
    code, err = _run(capsys, src, tmp_path / "plain" / "o.safetensors", "--kernel-spec", spec)
    assert code == 2 and "cannot write" in err and "Traceback" not in err


def test_a_killed_conversion_leaves_nothing_a_later_run_keeps(tmp_path: Path) -> None:
    """SIGKILL while safetensors writes: its own temporary file must not stay behind."""
    state = {"conv.kernel": torch.ones(27, 2, 3), "big": torch.rand(40_000_000)}
    src, spec = _files(tmp_path, state)
    dst = tmp_path / "out" / "o.safetensors"
    dst.parent.mkdir()
    cmd = [sys.executable, "-m", "torch_lattice.convert", str(src), str(dst)]
    child = subprocess.Popen([*cmd, "--kernel-spec", str(spec)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        written = [p for p in dst.parent.rglob("*") if p.is_file() and p.stat().st_size > 0]
        if written:
            break
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    # whatever the kill left is hidden under the destination's temp prefix ...
    names = [p.name for p in dst.parent.iterdir()]
    assert all(n.startswith((".o.safetensors.", ".o.manifest.json.")) for n in names), names
    # ... and the next run to the same destination removes it
    assert main([str(src), str(dst), "--kernel-spec", str(spec)]) == 0
    left = sorted(p.name for p in dst.parent.iterdir())
    assert left == ["o.manifest.json", "o.safetensors"]


FULL_DISK_CHILD = """
import resource, signal, sys
from torch_lattice.convert import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG, as ENOSPC would
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("destination", ["new", "existing"])
def test_a_full_disk_is_a_message_and_leaves_the_tree_as_it_was(
    tmp_path: Path, destination: str
) -> None:
    """The disk fills while safetensors writes (``RLIMIT_FSIZE`` in a child process).

    Exit status 2 (the output could not be written), one line naming the
    destination, no traceback; afterwards the tree holds exactly what it held
    before: no partial destination, no temporary file, no manifest, no empty
    folder the command created, and an existing destination is untouched.
    """
    state = {"conv.kernel": torch.ones(27, 64, 64), "head": torch.ones(64, 64)}
    src, spec = _files(tmp_path, state)
    if destination == "new":
        dst = tmp_path / "out" / "deep" / "o.safetensors"
    else:
        dst = tmp_path / "o.safetensors"
        assert main([str(src), str(dst), "--kernel-spec", str(spec)]) == 0
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    folders = sorted(p for p in tmp_path.rglob("*") if p.is_dir())
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHILD, str(src), str(dst), "--kernel-spec", str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"convert-checkpoint: error: cannot write {str(dst)!r}")
    assert "File too large" in done.stderr and done.stderr.count("\n") == 1
    after = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p for p in tmp_path.rglob("*") if p.is_dir()) == folders
