"""spconv's detector backbones as one artifact each: port, export, verify, replay on MLX and torch.

``from_spconv`` ports OpenPCDet's ``VoxelBackBone8x`` and CenterPoint's
``VoxelResBackBone8x`` with OpenPCDet's height compression (the BEV map a 2D
head reads) and PartA2's ``UNetV2`` (its two sparse outputs); the models and
the scans live beside the torch_lattice tests (``spconv_zoo.py``).  Each ported
model is written with ``save_lattice_model_artifact`` (which verifies the
graph natively and checks the artifact against the eager port), then replayed
by both runtimes and compared with real spconv 2.3.8 (CPU, one thread) on a
LiDAR-like scan whose voxels touch every face of the grid, two batch items:
identical coordinates, every value within 1e-4 relative.  The small grid
runs by default; KITTI's grid ``[41, 1600, 1408]`` is marked slow.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
import spconv.pytorch as spconv  # the oracle (requirements-dev): a missing oracle fails, not skips
import torch
import torch_lattice
from mlx_lattice import SparseTensor as MxSparse
from mlx_lattice.artifact import load_lattice_program as load_mlx
from torch_lattice.artifact import load_lattice_program as load_torch
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.port import from_spconv

pytestmark = pytest.mark.usefixtures("one_thread")

_TORCH_TESTS = Path(__file__).resolve().parents[2] / "torch-lattice" / "tests"
SMALL = [41, 50, 44]
KITTI = [41, 1600, 1408]


def _zoo() -> ModuleType:
    name = "lattice_spconv_zoo_grid"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _TORCH_TESTS / "spconv_zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _np(a: Any) -> np.ndarray:
    """An MLX or torch array as NumPy."""
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.array(a)


def _rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """Max abs difference over the largest output magnitude (at least 1)."""
    if want.size == 0:
        return 0.0
    return float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max())))


def _sparse_error(got: Any, want: Any) -> tuple[int, float]:
    """Rows of spconv's ``want`` and the relative error of ``got`` (either runtime) against it.

    spconv's indices are ``(b, z, y, x)`` on its grid; ``got``'s logical
    coordinates are ``(b, x, y, z)`` in cells of its stride.
    """
    i = want.indices.long().numpy()
    theirs = np.stack([i[:, 0], i[:, 3], i[:, 2], i[:, 1]], 1)
    coords = _np(got.coords).astype(np.int64)
    ours = np.concatenate([coords[:, :1], coords[:, 1:] // np.array(got.stride)], 1)
    assert len(ours) == len(theirs), f"{len(ours)} rows, spconv {len(theirs)}"
    po, pt = np.lexsort(ours.T[::-1]), np.lexsort(theirs.T[::-1])
    np.testing.assert_array_equal(ours[po], theirs[pt])
    return len(theirs), _rel_error(_np(got.feats)[po], _np(want.features)[pt])


def _case(kind: str, shape: list[int], seed: int, tmp_path: Path) -> dict[str, Any]:
    """Port, export, replay on both runtimes; each output's rows and max relative error."""
    zoo = _zoo()
    idx, feats = zoo.lidar_scan(shape, batch=2, seed=seed, faces=True)
    cls = {"plain": zoo.VoxelBackBone8x, "res": zoo.VoxelResBackBone8x, "unet": zoo.UNetV2}
    model = zoo.oracle_mode(zoo.randomise(cls[kind](), seed))
    source = model if kind == "unet" else torch.nn.Sequential(model, zoo.HeightCompression())
    with torch.no_grad():
        want = model(spconv.SparseConvTensor(feats, idx, shape, 2))
        rows = 0 if kind == "unet" else int(want.indices.shape[0])  # rows under the BEV map
        want = want if kind == "unet" else zoo.HeightCompression()(want)
    ported = from_spconv(
        source, axes="zyx", spatial_shape=shape, batch_size=2, types=zoo.PCDET_TYPES
    ).eval()
    x = torch_lattice.SparseTensor(idx[:, [0, 3, 2, 1]].contiguous(), feats)
    path = tmp_path / f"{kind}.lattice"
    report = save_lattice_model_artifact(ported, x, path)
    assert all(c.passed for c in report.checks)
    assert "lattice.sparse.crop" in report.ops
    got_torch = load_torch(path)(x)
    got_mlx = load_mlx(path)(MxSparse(mx.array(x.coords.numpy()), mx.array(x.feats.numpy())))
    out: dict[str, Any] = {"report": report}
    if kind == "unet":
        assert isinstance(got_torch, tuple) and isinstance(got_mlx, tuple)
        for name, w, t, m in zip(("conv_out", "up1"), want, got_torch, got_mlx, strict=True):
            out[name] = {"torch": _sparse_error(t, w), "mlx": _sparse_error(m, w)}
        return out
    assert "lattice.sparse.to_dense" in report.ops
    bev = want.numpy()
    assert tuple(got_torch.shape) == tuple(got_mlx.shape) == bev.shape
    assert int((np.abs(bev).sum(1) > 0).sum()) <= rows  # each BEV cell comes from a row
    out["bev"] = {
        "torch": (rows, _rel_error(_np(got_torch), bev)),
        "mlx": (rows, _rel_error(_np(got_mlx), bev)),
    }
    return out


def _assert_within(result: dict[str, Any]) -> None:
    for name, per in result.items():
        if name == "report":
            continue
        for runtime, (rows, err) in per.items():
            assert rows > 0, (name, runtime)
            assert err <= 1e-4, f"{name} on {runtime}: {err:.3g} relative"


@pytest.mark.parametrize("kind", ["plain", "res"])
def test_backbone_and_height_compression_is_one_artifact_giving_spconvs_bev(
    kind: str, tmp_path: Path
) -> None:
    _assert_within(_case(kind, SMALL, seed=1, tmp_path=tmp_path))


def test_unet_v2_is_one_artifact_giving_spconvs_outputs(tmp_path: Path) -> None:
    _assert_within(_case("unet", SMALL, seed=2, tmp_path=tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["plain", "res", "unet"])
def test_kitti_grid(kind: str, tmp_path: Path) -> None:
    result = _case(kind, KITTI, seed=0, tmp_path=tmp_path)
    for name, per in result.items():
        if name != "report":
            errors = ", ".join(f"{r}: rows {n}, rel {e:.3g}" for r, (n, e) in per.items())
            print(f"{kind} {name}: {errors}")
    _assert_within(result)
