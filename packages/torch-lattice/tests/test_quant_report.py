"""Quantization honesty: the exporter reports the artifact against the *float* model.

The conformance self-check compares a quantized artifact with the model
running its own dequantized weights (~0 by construction).  The report tested
here must instead measure the artifact against the untouched float model,
recomputed independently below from a reloaded artifact and a NumPy
quantile, and must warn about each weight it left dense.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from lattice_contract.artifact import METADATA_KEY, QuantizationReport, format_report
from safetensors import safe_open
from torch_lattice import SparseTensor, canonical_order, nn
from torch_lattice.artifact import load_lattice_program
from torch_lattice.export import ExportError, save_lattice_model_artifact
from torch_lattice.quant_report import DenseWeightWarning


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.SubmConv3d(4, 32, 3)  # C_in = 4: never packable
        self.mid = nn.SubmConv3d(32, 64, 3)
        self.act = nn.ReLU()
        self.head = nn.Linear(64, 5)

    def forward(self, x: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.head(self.act(self.mid(self.stem(x))))
        return out


def _input() -> SparseTensor:
    gen = torch.Generator().manual_seed(0)
    coords = torch.unique(
        torch.cat([torch.zeros(300, 1), torch.randint(0, 10, (300, 3), generator=gen)], 1), dim=0
    ).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), 4, generator=gen))


@pytest.mark.parametrize("quantize", ["int4", "int8"])
def test_report_measures_against_the_float_model(tmp_path: Path, quantize: str) -> None:
    torch.manual_seed(1)
    model = Net().eval()
    x = _input()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = save_lattice_model_artifact(model, x, tmp_path / "q.lattice", quantize=quantize)
    dense_warnings = [w for w in caught if issubclass(w.category, DenseWeightWarning)]
    assert len(dense_warnings) == 1
    assert "stem.weight" in str(dense_warnings[0].message)
    assert "4 input channels" in str(dense_warnings[0].message)
    assert dense_warnings[0].filename == __file__  # points at the caller's export line

    q = report.quantization
    assert q is not None and q.bits == int(quantize[3:]) and q.group_size == 32
    assert q.packed == ("mid.weight", "head.weight")
    assert [d.key for d in q.dense] == ["stem.weight"]

    # Independent recomputation: reloaded artifact vs float eager model.
    with torch.no_grad():
        want = model(x)
    got = load_lattice_program(tmp_path / "q.lattice")(x)
    e = want.feats[canonical_order(want.coords)].double().numpy()
    a = got.feats[canonical_order(got.coords)].double().numpy()
    diff = np.abs(a - e)
    (out,) = q.outputs
    assert out.name == "y" and out.rows == len(e)
    assert out.max_abs_error == pytest.approx(diff.max(), rel=1e-9)
    assert out.p99_abs_error == pytest.approx(
        np.quantile(diff, 0.99, method="inverted_cdf"), rel=1e-9
    )
    assert out.argmax_agreement == pytest.approx((a.argmax(1) == e.argmax(1)).mean())
    assert out.max_abs_error > 1e-4  # quantization moved the outputs ...
    assert report.checks[0].max_abs_error < out.max_abs_error  # ... beyond the self-check

    # The same report travels in the artifact's safetensors header.
    with safe_open(str(tmp_path / "q.lattice" / "weights.safetensors"), framework="pt") as f:
        stored = QuantizationReport.from_json(f.metadata()[METADATA_KEY])
    assert stored == q
    text = "\n".join(format_report(q))
    assert "left dense: stem.weight" in text and "argmax agrees on" in text


def test_int4_costs_more_than_int8(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = Net().eval()
    x = _input()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DenseWeightWarning)
        r4 = save_lattice_model_artifact(model, x, tmp_path / "a", quantize="int4")
        r8 = save_lattice_model_artifact(model, x, tmp_path / "b", quantize="int8")
    assert r4.quantization is not None and r8.quantization is not None
    assert r4.quantization.outputs[0].max_abs_error > 4 * r8.quantization.outputs[0].max_abs_error


def test_shorthand_equals_the_mapping_and_bad_ones_are_refused(tmp_path: Path) -> None:
    model = Net().eval()
    x = _input()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DenseWeightWarning)
        short = save_lattice_model_artifact(model, x, tmp_path / "a", quantize="int8")
        full = save_lattice_model_artifact(
            model, x, tmp_path / "b", quantize={"bits": 8, "group_size": 32}
        )
    assert short.graph == full.graph
    assert short.quantization == full.quantization
    with pytest.raises(ExportError, match="'int3' is not a known shorthand"):
        save_lattice_model_artifact(model, x, tmp_path / "c", quantize="int3")
    assert not (tmp_path / "c").exists()


def test_float_export_has_no_quantization_report(tmp_path: Path) -> None:
    report = save_lattice_model_artifact(Net().eval(), _input(), tmp_path / "f.lattice")
    assert report.quantization is None
    with safe_open(str(tmp_path / "f.lattice" / "weights.safetensors"), framework="pt") as f:
        assert METADATA_KEY not in (f.metadata() or {})


def test_export_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large models show the exporter's stage bar on stderr; small ones stay quiet."""
    import torch_lattice._progress as progress

    model = Net().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DenseWeightWarning)
        save_lattice_model_artifact(model, _input(), tmp_path / "a")
        assert capsys.readouterr().err == ""
        monkeypatch.setattr(progress, "LARGE_MODEL_PARAMETERS", 1)
        save_lattice_model_artifact(model, _input(), tmp_path / "b", quantize="int4")
    err = capsys.readouterr().err
    assert "export" in err and "5/5" in err and "written" in err
    save_lattice_model_artifact(model, _input(), tmp_path / "c", progress=False)
    assert capsys.readouterr().err == ""
