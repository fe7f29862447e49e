"""Zoo: SPVNAS's SPVCNN at SemanticKITTI widths, ported from TorchSparse, end to end.

The stand-in ``torchsparse_layers.SPVCNN`` is declared with ``types=``; the
oracle is the NumPy re-derivation of TorchSparse 2.1's maps (``test_port``'s
``_Reference`` for the voxel branch) plus SPVNAS's point transforms written
here from ``core/models/utils.py``: ``voxel_to_point`` hashes the eight corners
``floor(p / s) * s + {0, s}^3`` (x slowest, as ``get_kernel_offsets(2)``),
weighs them with ``calc_ti_weights`` (hat weights, absent corners zeroed,
divided by ``sum + 1e-8``), and ``point_to_voxel`` averages the points of
each voxel of the given tensor.  Each case ports the model, converts the
checkpoint and loads it with ``strict=True``, compares every per-point logit
(points in input order: a LiDAR-like scan with voxels on every face, two batch
items) within 1e-4 relative, then exports (native verify + self-check) and
replays the artifact on torch and MLX.  Full width is slow.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
import spconv_zoo
import torch
import torchsparse_layers as ts
from framework_reference import _lookup
from mlx_lattice.artifact import load_lattice_program as load_mlx
from test_port import _Reference
from test_port_zoo_torchsparse import checkpoint_spec
from torch_lattice.artifact import load_lattice_program as load_torch
from torch_lattice.convert import convert_state_dict
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.port import PortError, from_torchsparse

pytestmark = pytest.mark.usefixtures("one_thread")


def _voxel_to_point(coords: Any, feats: Any, points: Any, s: int) -> Any:
    """SPVNAS ``voxel_to_point(x, z, nearest=False)`` at tensor stride ``s``."""
    base = np.floor_divide(points[:, 1:], s) * s
    p = points[:, 1:].astype(np.float64)
    acc = np.zeros((len(points), feats.shape[1]))
    total = np.zeros(len(points))
    for corner in itertools.product((0, 1), repeat=3):  # x slowest: get_kernel_offsets(2)
        c = np.asarray(corner)
        row = _lookup(coords, np.c_[points[:, :1], base + c * s])
        w = np.prod(np.where(c == 1, p - base, base + s - p), axis=1) / s**3
        w = np.where(row >= 0, w, 0.0)
        acc += w[:, None] * feats[np.maximum(row, 0)]
        total += w
    return acc / (total + 1e-8)[:, None]


def _point_to_voxel(coords: Any, points: Any, pf: Any, s: int) -> Any:
    """SPVNAS ``point_to_voxel(x, z)``: the mean of the points in each of ``coords``' voxels."""
    keys = np.c_[points[:, :1], np.floor_divide(points[:, 1:], s) * s]
    row = _lookup(coords, keys)
    hit = row >= 0
    out = np.zeros((len(coords), pf.shape[1]))
    count = np.zeros(len(coords))
    np.add.at(out, row[hit], pf[hit])
    np.add.at(count, row[hit], 1.0)
    return out / np.maximum(count, 1.0)[:, None]


def _dense(m: torch.nn.Module, f: Any) -> Any:
    """A point transform or the classifier (Linear, BatchNorm1d, ReLU) in float64."""
    for layer in m:  # type: ignore[attr-defined]
        if isinstance(layer, torch.nn.Linear):
            f = f @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()
        elif isinstance(layer, torch.nn.BatchNorm1d):
            assert layer.running_mean is not None and layer.running_var is not None
            mean, var = layer.running_mean.double().numpy(), layer.running_var.double().numpy()
            w, b = layer.weight.detach().double().numpy(), layer.bias.detach().double().numpy()
            f = (f - mean) / np.sqrt(var + layer.eps) * w + b
        else:
            assert isinstance(layer, torch.nn.ReLU)
            f = np.maximum(f, 0)
    return f


def spvcnn_reference(m: ts.SPVCNN, c: Any, f: Any) -> Any:
    """What SPVCNN computes (eval mode) for unique voxel coords ``c`` (b, x, y, z)."""
    r = _Reference()
    x0c, x0f, _ = r.run(m.stem, c, f, 1)
    z0 = _voxel_to_point(x0c, x0f, c, 1)
    level = [(x0c, _point_to_voxel(x0c, c, z0, 1), 1)]
    for k in range(1, 5):
        level.append(r.run(getattr(m, f"stage{k}"), *level[-1]))
    z = z0 + 0  # point features
    y = level[4]
    for k in range(1, 5):
        if k in (1, 3):
            pt = m.point_transforms[k // 2]
            z = _voxel_to_point(y[0], y[1], c, y[2]) + _dense(pt, z)
            y = (y[0], _point_to_voxel(y[0], c, z, y[2]), y[2])
        up = getattr(m, f"up{k}")
        uc, uf, t = r.run(up[0], *y)
        skip = level[4 - k]
        assert np.array_equal(uc, skip[0])
        y = r.run(up[1], uc, np.concatenate([uf, skip[1]], 1), t)
    z = _voxel_to_point(y[0], y[1], c, 1) + _dense(m.point_transforms[2], z)
    return _dense(m.classifier, z)


def _inputs(shape_zyx: list[int], seed: int) -> tuple[torch.Tensor, ...]:
    idx, feats = spconv_zoo.lidar_scan(shape_zyx, batch=2, seed=seed, faces=True)
    coords = torch.as_tensor(idx).to(torch.int32)[:, [0, 3, 2, 1]].contiguous()
    points = coords[:, 1:].to(torch.float32)
    return coords, points, torch.as_tensor(feats, dtype=torch.float32), coords[:, 0].contiguous()


def _rel(got: Any, want: Any) -> float:
    g = got.detach().double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    return float(np.abs(g - want).max() / max(1.0, float(np.abs(want).max())))


def spvcnn_case(shape_zyx: list[int], width: float, tmp_path: Path) -> dict[str, float]:
    """Port and convert+load, compare with the reference, export, replay: the errors by route."""
    torch.manual_seed(13)
    model = ts.randomise(ts.SPVCNN(width=width), 14)
    for t in model.point_transforms:
        ts.randomise(t, 15)
    ported = from_torchsparse(model, version="2.1", types=ts.TYPES).eval()
    loaded = from_torchsparse(ts.SPVCNN(width=width), version="2.1", types=ts.TYPES)
    converted = convert_state_dict(model.state_dict(), checkpoint_spec(model)).tensors
    loaded.load_state_dict(converted, strict=True)
    loaded.eval()
    coords, points, feats, batch = _inputs(shape_zyx, seed=3)
    want = spvcnn_reference(model, coords.numpy().astype(np.int64), feats.double().numpy())
    with torch.no_grad():
        errors = {
            "rows": float(len(points)),
            "port": _rel(ported(points, feats, batch), want),
            "convert+load": _rel(loaded(points, feats, batch), want),
        }
    path = tmp_path / "spvcnn.lattice"
    args = (points, feats, batch, torch.tensor([len(points)], dtype=torch.int32))
    save_lattice_model_artifact(ported, args, path)
    errors["torch replay"] = _rel(load_torch(path)(*args), want)
    got = load_mlx(path)(*(mx.array(a.numpy()) for a in args))
    errors["mlx replay"] = _rel(np.array(memoryview(got)), want)
    worst = max(v for k, v in errors.items() if k != "rows")
    assert worst < 1e-4, errors
    return errors


def test_spvcnn_small_scan(tmp_path: Path) -> None:
    print(spvcnn_case([11, 24, 24], 0.125, tmp_path))


@pytest.mark.slow
def test_spvcnn_semantickitti_widths(tmp_path: Path) -> None:
    print(f"SPVCNN full width, [41, 200, 176] scan: {spvcnn_case([41, 200, 176], 1.0, tmp_path)}")


def test_spvcnn_port_refuses_points_off_the_voxels() -> None:
    model = ts.SPVCNN(width=0.125)
    model.pres = 0.1
    with pytest.raises(PortError, match=r"pres == vres"):
        from_torchsparse(model, types=ts.TYPES)
