"""``lattice inspect`` on fixture archives, ``--json``, and the exporter's quantization report.

The shipped MinkUNet is exported as int8 and int4 here; ``lattice inspect``
must show the numbers the exporter measured (read back from the artifact),
and the numbers must be those of the artifact against the float model,
recomputed independently on the torch runtime.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.archive import open_fixture_archive
from lattice_contract.artifact import format_report
from lattice_tools.cli import lattice_main
from torch_lattice import canonical_order
from torch_lattice.artifact import load_lattice_program
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.quant_report import DenseWeightWarning

ARCHIVE = seg.fixture_path("minkunet", "int8")


def test_inspect_reads_a_fixture_archive(capsys: pytest.CaptureFixture[str]) -> None:
    assert lattice_main(["inspect", str(ARCHIVE)]) == 0
    out = capsys.readouterr().out
    with open_fixture_archive(ARCHIVE) as archive:
        names = [c.name for c in archive.cases]
    assert f"cases: {len(names)}" in out
    for name in names:
        assert f"    {name}: atol 0.02, rtol 0.01" in out
    assert "verification: valid (lattice_mlir)" in out and "compile (mlx): ok" in out
    assert "packed int8 group 32" in out

    assert lattice_main(["inspect", "--json", str(ARCHIVE)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in report["archive"]["cases"]] == names
    assert report["exit_status"] == 0
    assert sum(op["name"] == "lattice.subm_conv3d" for op in report["ops"]) > 4


def test_inspect_refuses_a_damaged_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.tar.gz"
    data = bytearray(ARCHIVE.read_bytes())
    bad.write_bytes(bytes(data[: len(data) // 2]))
    assert lattice_main(["inspect", str(bad)]) == 2  # unreadable input, not a failed check
    assert "error:" in capsys.readouterr().out


@pytest.fixture(scope="module")
def minkunet() -> tuple[torch.nn.Module, tuple[object, ...]]:
    model = seg.load_trained_model("minkunet")
    scene = seg.merge_scenes([seg.make_scene(s, n_voxels=1500) for s in (500, 501)])
    return model, seg.model_inputs("minkunet", scene)


@pytest.mark.parametrize("quantize", ["int8", "int4"])
def test_minkunet_quantization_report_is_shown_by_inspect(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    minkunet: tuple[torch.nn.Module, tuple[object, ...]],
    quantize: str,
) -> None:
    model, inputs = minkunet
    path = tmp_path / f"minkunet-{quantize}.lattice"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = save_lattice_model_artifact(model, inputs, path, quantize=quantize)
    assert any(
        issubclass(w.category, DenseWeightWarning) and "stem.0.0.weight" in str(w.message)
        for w in caught
    )
    q = report.quantization
    assert q is not None
    (out,) = q.outputs
    with torch.no_grad():
        want = model(*inputs)
    got = load_lattice_program(path)(*inputs)
    e = want.feats[canonical_order(want.coords)].double().numpy()
    a = got.feats[canonical_order(got.coords)].double().numpy()
    assert out.max_abs_error == pytest.approx(np.abs(a - e).max(), rel=1e-9)
    assert out.argmax_agreement == pytest.approx((a.argmax(1) == e.argmax(1)).mean())
    assert 0 < out.max_abs_error < (0.1 if quantize == "int8" else 1.0)
    assert out.argmax_agreement is not None and out.argmax_agreement > 0.99
    print("\n".join(format_report(q)))  # the closing note quotes these lines
    capsys.readouterr()

    assert lattice_main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    for line in format_report(q):
        assert line in text
    assert lattice_main(["inspect", "--json", str(path)]) == 0
    stored = json.loads(capsys.readouterr().out)["quantization_report"]
    assert stored["outputs"][0]["max_abs_error"] == out.max_abs_error
