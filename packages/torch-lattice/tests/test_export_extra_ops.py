"""The exporter traces the normalised, upsampling and lookup modules into verified artifacts.

Each model is exported with ``save_lattice_model_artifact`` (which itself runs
the artifact on torch and compares it with the eager model before writing),
then loaded back and run again here on a second input the exporter never saw.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.artifact import load_lattice_program
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.ops.reference import random_sparse


class Decoder(torch.nn.Module):
    """Every extra sparse module once: derived, target and generative supports."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.NormalizedSubmConv3d(3, 4, 3, eps=1e-6)
        self.down = nn.AvgPool3d(2, stride=2)
        self.up = nn.NormalizedConvTranspose3d(4, 4, 3, stride=2, padding=1)
        self.onto = nn.TargetNormalizedConvTranspose3d(4, 4, 2, stride=2)
        self.gen = nn.NormalizedGenerativeConvTranspose3d(4, 4, 2, stride=2)
        self.pool = nn.PoolTranspose3d(3, stride=2, padding=1)
        self.tri = nn.TrilinearUpsample3d(2)

    def forward(self, x: SparseTensor) -> tuple[SparseTensor, ...]:
        c = self.down(self.enc(x))
        return self.up(c), self.onto(c, x), self.gen(c), self.pool(c), self.tri(c), self.tri(c, x)


class Lookup(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(7, 3)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return ops.elementwise(ops.elementwise(self.table(idx), kind="exp"), kind="round")


def _same(a: SparseTensor, b: SparseTensor) -> None:
    assert a.stride == b.stride
    pa = torch.argsort(a.coords[:, 1] * 10**6 + a.coords[:, 2] * 10**3 + a.coords[:, 3])
    pb = torch.argsort(b.coords[:, 1] * 10**6 + b.coords[:, 2] * 10**3 + b.coords[:, 3])
    assert torch.equal(a.coords[pa], b.coords[pb])
    torch.testing.assert_close(a.feats[pa], b.feats[pb], rtol=1e-4, atol=1e-5)


def test_sparse_modules_export_and_replay(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Decoder().eval()
    g = torch.Generator().manual_seed(1)
    x = random_sparse(g, 40, 3, batch=1, extent=6)
    report = save_lattice_model_artifact(model, x, tmp_path / "decoder")
    ops_used = set(report.ops)
    for name in (
        "normalized_subm_conv3d",
        "normalized_conv_transpose3d",
        "target_normalized_conv_transpose3d",
        "normalized_generative_conv_transpose3d",
        "pool_transpose3d",
        "trilinear_upsample3d",
    ):
        assert f"lattice.{name}" in ops_used, name
    program = load_lattice_program(tmp_path / "decoder")
    other = random_sparse(torch.Generator().manual_seed(2), 40, 3, batch=1, extent=6)
    with torch.no_grad():
        for got, want in zip(program(other), model(other), strict=True):
            _same(got, want)


def test_embedding_and_elementwise_export(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Lookup().eval()
    idx = torch.tensor([0, 6, 2, 2], dtype=torch.int32)
    report = save_lattice_model_artifact(model, idx, tmp_path / "lookup")
    assert {"lattice.embedding_lookup", "lattice.elementwise"} <= set(report.ops)
    program = load_lattice_program(tmp_path / "lookup")
    other = torch.tensor([5, 1], dtype=torch.int32)
    torch.testing.assert_close(program(other), model(other).detach())
    with pytest.raises(IndexError, match=r"index 7 \(position 0\) is out of range"):
        program(torch.tensor([7], dtype=torch.int32))


def test_half_embedding_table_exports(tmp_path: Path) -> None:
    """The table's own dtype is the result's (the op has no float input to agree with)."""
    torch.manual_seed(0)
    model = nn.Embedding(5, 4).half().eval()
    idx = torch.tensor([4, 0, 1], dtype=torch.int32)
    report = save_lattice_model_artifact(model, idx, tmp_path / "half")
    assert "!lattice.weight<embedding, f16>" in report.graph
    out = load_lattice_program(tmp_path / "half")(idx)
    assert out.dtype == torch.float16
    assert torch.equal(out, model(idx).detach())
