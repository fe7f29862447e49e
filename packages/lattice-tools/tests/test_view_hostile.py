"""``lattice view`` on hostile names, and the page written through the atomic writer.

Names come from the artifact: a weight key or an output ABI name holding
``<!--<script>`` used to stop the HTML parser from ever closing the data
element (the page stayed blank while the command reported success).  The
page is rendered in headless Chromium here with such names and must draw
every node.  The page is written by the project's atomic writer: never
through a fixed temporary name (a planted link there replaced a victim
file), never over the artifact it draws.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy as stn
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE
from lattice_tools.cli import lattice_main
from lattice_tools.graph_model import load_graph_model
from lattice_tools.view import json_for_html

HOSTILE = "<!--<script>"


def _hostile_bundle(tmp_path: Path) -> Path:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(
        storage_key="enc.conv", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 1, 1, 1, 4)
    )
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
    key = f"enc.{HOSTILE}</script>&amp;"
    graph = (
        b.build().replace('"enc.conv"', json.dumps(key)).replace('"y"', json.dumps("y" + HOSTILE))
    )
    root = tmp_path / "hostile.lattice"
    root.mkdir()
    (root / GRAPH_FILE).write_text(graph, encoding="utf-8")
    stn.save_file({key: np.ones((2, 1, 1, 1, 4), np.float32)}, str(root / WEIGHT_FILE))
    return root


def test_json_for_html_escapes_every_html_significant_character() -> None:
    value = {"k": "<!--<script></script>&\u2028\u2029"}
    text = json_for_html(value)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == value


def test_a_page_with_hostile_names_renders_every_node(tmp_path: Path) -> None:
    root = _hostile_bundle(tmp_path)
    model = load_graph_model(str(root))
    page = tmp_path / "page.html"
    assert lattice_main(["view", str(root), "--html", str(page)]) == 0
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("headless Chromium is missing: install Debian's chromium (./dev test does)")
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert f'data-rendered-nodes="{len(model.nodes)}"' in done.stdout
    assert len(re.findall(r'<g class="node ', done.stdout)) == len(model.nodes)


def test_the_page_is_never_written_through_a_planted_link(tmp_path: Path) -> None:
    root = _hostile_bundle(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    page = tmp_path / "page.html"
    (tmp_path / ".page.html.tmp").symlink_to(victim)  # the old fixed temporary name
    assert lattice_main(["view", str(root), "--html", str(page)]) == 0
    assert victim.read_text() == "keep me"
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_the_page_never_replaces_what_it_draws(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _hostile_bundle(tmp_path)
    graph = (root / GRAPH_FILE).read_bytes()
    assert lattice_main(["view", str(root), "--html", str(root / GRAPH_FILE)]) != 0
    assert "refusing to write" in capsys.readouterr().err
    assert (root / GRAPH_FILE).read_bytes() == graph
