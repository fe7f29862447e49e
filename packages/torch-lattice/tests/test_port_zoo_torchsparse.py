"""Zoo: TorchSparse's MinkUNet (``SparseResUNet42``) at SemanticKITTI widths, end to end.

TorchSparse's SemanticKITTI MinkUNet is the ``SparseResUNet42`` layout with
widths 32-32-64-128-256 / 256-128-96-96 (``torchsparse_layers``, declared with
``types=``).  Each case: convert the checkpoint and load it strictly into the
ported model, run it on a LiDAR-like scan (range-dependent density, voxels on
every face of the box, two batch items), compare every level with the NumPy
re-derivation of TorchSparse 2.1's maps (``test_port._Reference``): identical
coordinates, every feature within 1e-4 relative; then export (native verify +
self-check).  The full-width KITTI-size case is slow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import spconv_zoo
import torch
import torchsparse_layers as ts
from test_port import _Reference, _sorted
from torch_lattice import SparseTensor
from torch_lattice.convert import KernelSpec, convert_state_dict
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.port import from_torchsparse

pytestmark = pytest.mark.usefixtures("one_thread")


def _scan(shape_zyx: list[int], seed: int) -> SparseTensor:
    idx, feats = spconv_zoo.lidar_scan(shape_zyx, batch=2, seed=seed, faces=True)
    coords = torch.as_tensor(idx).to(torch.int32)[:, [0, 3, 2, 1]].contiguous()
    return SparseTensor(coords, torch.as_tensor(feats, dtype=torch.float32))


def _case(shape_zyx: list[int], width: float, tmp_path: Path) -> tuple[int, float]:
    torch.manual_seed(11)
    model = ts.randomise(ts.SparseResUNet42(width=width), 12)
    ported = from_torchsparse(model, version="2.1", types=ts.TYPES)
    spec = KernelSpec.from_json(
        {
            "format": "lattice-kernel-spec",
            "version": 2,
            "kernels": {
                f"{n}.kernel": {
                    "framework": "torchsparse",
                    "version": "2.1",
                    "kernel_size": list(m.kernel_size),
                    "stride": list(m.stride),
                }
                for n, m in model.named_modules()
                if isinstance(m, ts.Conv3d)
            },
            "rename": [[r"\.kernel$", ".weight"]],
        }
    )
    ported.load_state_dict(convert_state_dict(model.state_dict(), spec).tensors, strict=True)
    ported.eval()
    x = _scan(shape_zyx, seed=2)
    with torch.no_grad():
        outputs = ported(x)
    want = _Reference().unet(model, x.coords.numpy().astype(np.int64), x.feats.double().numpy())
    worst = 0.0
    for got, (c, f) in zip(outputs, want, strict=True):
        want_c, want_f = _sorted(c, f)
        got_c, got_f = _sorted(got.coords, got.feats)
        assert torch.equal(got_c, want_c)
        err = float((got_f.double() - want_f.double()).abs().max())
        worst = max(worst, err / max(1.0, float(want_f.abs().max())))
    assert worst < 1e-4, worst
    save_lattice_model_artifact(ported, (x,), tmp_path / "minkunet.lattice")
    return x.num_rows, worst


def test_torchsparse_minkunet_small_scan(tmp_path: Path) -> None:
    _case([11, 24, 24], 0.125, tmp_path)


@pytest.mark.slow
def test_torchsparse_minkunet_semantickitti_widths(tmp_path: Path) -> None:
    rows, err = _case([41, 200, 176], 1.0, tmp_path)
    print(f"TorchSparse MinkUNet full width, [41, 200, 176] scan: {rows} rows, max rel {err:.2e}")
