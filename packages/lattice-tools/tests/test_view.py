"""``lattice view``: the folded graph model, and the HTML page in headless Chromium.

The model is checked against the natively imported plan it folds (every op
is either drawn or accounted for as a weight / wrapper of a drawn op, every
weight lands in exactly one node).  The page is loaded in Debian's headless
``chromium`` (``./dev`` installs it): it must log nothing to the console,
draw one SVG group per node and per edge, open a node's attributes on click,
and leave a screenshot (``view-*.png`` under pytest's tmp dir).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lattice_conformance import segmentation as seg
from lattice_contract.plan import RuntimePlan
from lattice_tools.artifact_source import open_artifact_source
from lattice_tools.cli import lattice_main
from lattice_tools.graph_model import load_graph_model
from mlx_lattice.artifact.io import load_lattice_artifact
from mlx_lattice.artifact.validation import native_module

FOLDED = {"lattice.weight", "lattice.sparse.decompose", "lattice.sparse.with_features"}
ARCHIVES = [seg.fixture_path("minkunet", "int8"), seg.fixture_path("spvcnn", "f16")]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("headless Chromium is missing: install Debian's chromium (./dev test does)")
    return found


def _run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"  # never share a profile with another run
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1500,1000",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.name)
def test_model_folds_every_plan_op(archive: Path) -> None:
    with open_artifact_source(archive) as source:
        model = load_graph_model(str(source.artifact_dir))
        native = native_module()
        assert native is not None
        plan = RuntimePlan.from_native(
            native.import_plan(load_lattice_artifact(str(source.artifact_dir)).graph)
        )
    drawn = [n for n in model.nodes if n.kind == "op"]
    kept = [op for op in plan.ops if op.name not in FOLDED]
    makes = [n for n in model.nodes if n.kind == "input" and "lattice.sparse.make" in n.folded]
    assert len(drawn) + len(makes) == len(kept)
    weight_keys = sorted(op.attrs["storage_key"] for op in plan.ops if op.name == "lattice.weight")
    assert sorted(w["storage_key"] for n in drawn for w in n.weights) == weight_keys
    wrappers = sum(op.name == "lattice.sparse.with_features" for op in plan.ops)
    assert sum(f == "lattice.sparse.with_features" for n in model.nodes for f in n.folded) == (
        wrappers
    )
    for node in drawn:
        if node.weights:  # module name = storage keys' prefix
            assert all(w["storage_key"].startswith(node.module + ".") for w in node.weights)
    assert {n.kind for n in model.nodes} == {"input", "op", "output"}
    ids = {n.id for n in model.nodes}
    assert all(e.source in ids and e.target in ids for e in model.edges)
    assert all("stride" in e.label for e in model.edges if e.label.startswith("sparse"))
    strided = [n for n in drawn if n.op == "lattice.conv3d"]
    if strided:  # a stride-2 conv's output edge says so
        out = next(e for e in model.edges if e.source == strided[0].id)
        assert "stride 2" in out.label


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda p: p.name)
def test_page_renders_in_headless_chromium(tmp_path: Path, archive: Path) -> None:
    page = tmp_path / f"view-{archive.name.split('.')[0]}.html"
    assert lattice_main(["view", str(archive), "--html", str(page)]) == 0
    text = page.read_text()
    assert "<script src" not in text and "<link" not in text  # self-contained
    assert "dagre" in text and "Chris Pettitt" in text  # the vendored library, with its licence
    with open_artifact_source(archive) as source:
        model = load_graph_model(str(source.artifact_dir))

    done = _run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    dom = done.stdout
    assert f'data-rendered-nodes="{len(model.nodes)}"' in dom
    assert f'data-rendered-edges="{len(model.edges)}"' in dom
    assert len(re.findall(r'<g class="node ', dom)) == len(model.nodes)

    conv = next(n for n in model.nodes if n.kind == "op" and n.weights)
    clicked = _run_chromium(tmp_path, "--dump-dom", f"{page.as_uri()}#node={conv.id}")
    details = clicked.stdout.split('<aside id="details">', 1)[1].split("</aside>", 1)[0]
    assert conv.op in details and f"module {conv.module}" in details
    assert conv.weights[0]["storage_key"] in details and "kernel_size" in details
    assert 'class="node op selected' in clicked.stdout

    shot = tmp_path / f"view-{archive.name.split('.')[0]}.png"
    taken = _run_chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert taken.returncode == 0 and shot.stat().st_size > 20_000, taken.stderr[-2000:]


def test_view_errors_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lattice_main(["view", str(tmp_path / "absent"), "--html", str(tmp_path / "x")]) == 2
    assert "missing path" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert lattice_main(["view", str(tmp_path)]) == 2  # --html is required


def test_netron_recipe_generic_form_round_trips(tmp_path: Path) -> None:
    """docs/viewing.md's ``lattice-opt --mlir-print-op-generic`` gives a file MLIR reads back."""
    from lattice_mlir import lattice_opt_path, verify

    with open_artifact_source(ARCHIVES[0]) as source:
        out = tmp_path / "model.generic.mlir"
        done = subprocess.run(
            [
                str(lattice_opt_path()),
                "--mlir-print-op-generic",
                str(source.artifact_dir / "graph.mlir"),
                "-o",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert '"lattice.subm_conv3d"(' in text and '"func.func"()' in text
    assert verify(text).valid  # the same artifact, only spelled generically


def test_labels_say_n_and_use_the_models_names() -> None:
    """Dynamic row counts read ``N`` (never ``-1``); values carry the model's names."""
    with open_artifact_source(seg.fixture_path("spvcnn", "f16")) as source:
        model = load_graph_model(str(source.artifact_dir))
    labels = [e.label for e in model.edges]
    assert not any("-1" in label for label in labels), labels
    assert any(label.startswith("N×32 f16") for label in labels)
    names = {e.name for e in model.edges}
    assert not any(re.fullmatch(r"(v|arg)\d+", n) for n in names), names  # no plan labels
    modules = {n.module for n in model.nodes if n.module}
    assert modules and modules <= {n.split("/")[0] for n in names} | modules
    assert {"stem.0", "stem.1", "x0"} <= names  # module paths from the graph's locations
