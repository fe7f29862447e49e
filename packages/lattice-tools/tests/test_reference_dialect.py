"""Whether an artifact stays within the reference system's dialect, said and enforced.

``lattice_contract.dialect.LATTICE_ONLY`` is the one list of Lattice's extras
that the reference verifier (mlx-lattice 0.6) refuses.  Here: every entry
names a real op and real attribute values; docs/upstream.md's table is that
list; ``lattice inspect`` says within/outside for the shipped artifacts (the
SPVCNN ones are outside, for f16 voxelize features and trilinear
interpolation, as the reference verifier found); ``portable=True`` exports
what stays within and refuses, writing nothing, what does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from lattice_conformance import segmentation as seg
from lattice_contract.dialect import LATTICE_ONLY, SCHEMA, outside_reference
from lattice_contract.dialect.types import Interpolation, VoxelReduction
from lattice_tools.cli import lattice_main
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.export_trace import ExportError

ROOT = Path(__file__).resolve().parents[3]


def test_every_extra_names_a_real_op_and_value() -> None:
    for extra in LATTICE_ONLY:
        assert extra.op.removeprefix("lattice.") in SCHEMA.ops, extra
        assert extra.kind in {"op", "attribute value", "element type"}
    assert "max" in {v.value for v in VoxelReduction}
    assert "trilinear" in {v.value for v in Interpolation}
    # The SPEC's added ops are all listed.
    ops = {e.op for e in LATTICE_ONLY if e.kind == "op"}
    assert {
        "lattice.cast",
        "lattice.call",
        "lattice.full_conv3d",
        "lattice.full_pool3d",
        "lattice.sparse.crop",
        "lattice.sparse.to_dense",
    } <= ops


def test_docs_table_is_the_list() -> None:
    text = (ROOT / "docs/upstream.md").read_text()
    section = text.split("## Lattice-only ops and values", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    expected = [f"| `{e.op}` | {e.what} | {e.kind} | {e.instead} |" for e in LATTICE_ONLY]
    assert rows == expected


@pytest.mark.parametrize(
    ("model", "variant", "outside"),
    [
        ("minkunet", "f16", []),
        ("minkunet", "int8", []),
        ("spvcnn", "f16", ["lattice.voxelize: f16/bf16", "lattice.devoxelize: interpolation"]),
    ],
)
def test_inspect_says_within_or_outside(
    model: str, variant: str, outside: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    archive = seg.fixture_path(model, variant)
    assert lattice_main(["inspect", "--json", str(archive)]) == 0
    ref = json.loads(capsys.readouterr().out)["reference_dialect"]
    assert ref["within"] is (not outside)
    assert len(ref["outside"]) == len(outside)
    for line, start in zip(ref["outside"], outside, strict=True):
        assert line.startswith(start) and "portable form:" in line
    assert lattice_main(["inspect", str(archive)]) == 0
    text = capsys.readouterr().out
    assert ("reference dialect: within" in text) is (not outside)


def _scene() -> seg.Scene:
    return seg.make_scene(11, n_voxels=400)


def test_portable_export_refuses_extras_and_writes_nothing(tmp_path: Path) -> None:
    scene = _scene()
    model = seg.build_model("spvcnn").eval()
    inputs = seg.model_inputs("spvcnn", scene, torch.float16)
    target = tmp_path / "spvcnn.lattice"
    with pytest.raises(ExportError, match=r"portable=True.*\n.*lattice.voxelize") as info:
        save_lattice_model_artifact(model.half(), inputs, target, portable=True)
    assert "Nothing was written" in str(info.value) and "portable form" in str(info.value)
    assert not target.exists()


def test_portable_export_of_a_portable_model(tmp_path: Path) -> None:
    scene = _scene()
    model = seg.build_model("minkunet").eval()
    inputs = seg.model_inputs("minkunet", scene)
    report = save_lattice_model_artifact(model, inputs, tmp_path / "m.lattice", portable=True)
    assert report.path.is_dir()
    from lattice_contract.plan import RuntimePlan
    from mlx_lattice.artifact.io import load_lattice_artifact
    from mlx_lattice.artifact.validation import native_module

    artifact = load_lattice_artifact(str(report.path))
    native = native_module()
    assert native is not None
    plan = RuntimePlan.from_native(native.import_plan(artifact.graph))
    assert outside_reference(plan.ops) == []
