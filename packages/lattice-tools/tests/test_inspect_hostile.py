"""``lattice inspect`` prints what an artifact holds, never what its text would command.

Weight keys, quantization-report strings and MLIR diagnostics come from the
file; a key holding ``ESC [ 2 J`` cleared the terminal.  Control characters
are now printed escaped.  A report whose ``bits`` is ``1e999`` or whose JSON
is nested past Python's recursion limit is reported as unreadable instead of
ending in a traceback.  Every input is built here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy as stn
from lattice_contract.artifact import METADATA_KEY, printable
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE
from lattice_tools.cli import lattice_main

ESC_KEY = "enc.\x1b[2J\x1b]0;owned\x07conv"


def _bundle(tmp_path: Path, metadata: dict[str, str] | None = None) -> Path:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(
        storage_key="enc.conv", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 1, 1, 1, 4)
    )
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
    root = tmp_path / "m.lattice"
    root.mkdir()
    (root / GRAPH_FILE).write_text(b.build(), encoding="utf-8")
    # the verifier refuses control characters in the graph's keys; an extra entry of the
    # weight file is still listed by inspect (as unreferenced)
    weights = {"enc.conv": np.ones((2, 1, 1, 1, 4), np.float32), ESC_KEY: np.ones(1, np.float32)}
    stn.save_file(weights, str(root / WEIGHT_FILE), metadata=metadata)
    return root


def test_printable_escapes_controls_and_keeps_text() -> None:
    assert printable("a\x1b[2Jb\x9b\u202e\u2028c\té漢") == "a\\x1b[2Jb\\x9b\\u202e\\u2028c\\x09é漢"
    assert printable("one\ntwo\x1b", multiline=True) == "one\ntwo\\x1b"


def test_inspect_escapes_a_weight_entry_with_terminal_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _bundle(tmp_path)
    lattice_main(["inspect", str(root)])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "enc.\\x1b[2J\\x1b]0;owned\\x07conv" in out


@pytest.mark.parametrize(
    ("report", "words"),
    [
        ('{"version": 1, "bits": 1e999, "group_size": 32}', "float infinity"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            json.dumps(
                {
                    "version": 1,
                    "bits": 4,
                    "group_size": 32,
                    "packed": [],
                    "dense": [{"key": "\x1b[31mred", "reason": "kept \x1b[2J dense"}],
                    "outputs": [],
                }
            ),
            "\\x1b[31mred",
        ),
    ],
    ids=["overflow", "recursion", "escape"],
)
def test_a_hostile_quantization_report_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: str, words: str
) -> None:
    root = _bundle(tmp_path, {METADATA_KEY: report})
    lattice_main(["inspect", str(root)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "\x1b" not in out + err
    assert words in out


@pytest.mark.parametrize("kind", ["weights-dev-zero", "graph-fifo"])
def test_bundle_files_that_are_not_files_are_named_as_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A weight file linked to ``/dev/zero`` or a FIFO graph was reported as missing."""
    import os

    root = _bundle(tmp_path)
    if kind == "weights-dev-zero":
        (root / WEIGHT_FILE).unlink()
        (root / WEIGHT_FILE).symlink_to("/dev/zero")
        words = f"{WEIGHT_FILE} is a character device, not a file"
    else:
        (root / GRAPH_FILE).unlink()
        os.mkfifo(root / GRAPH_FILE)
        words = f"{GRAPH_FILE} is a FIFO (named pipe), not a file"
    assert lattice_main(["inspect", str(root)]) == 2
    assert words in capsys.readouterr().out  # inspect's report names the error
