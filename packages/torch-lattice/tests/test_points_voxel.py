"""voxelize / devoxelize against direct per-point references."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import available_devices

DEVICES = available_devices()


def _cloud(seed: int, n: int = 300) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    points = torch.rand(n, 3, generator=g) * 3 - 1
    feats = torch.randn(n, 4, generator=g)
    batch = torch.randint(0, 2, (n,), generator=g, dtype=torch.int32)
    return points, feats, batch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "max"])
def test_voxelize_groups_points_by_floor(device: str, reduction: str) -> None:
    points, feats, batch = _cloud(0)
    x = ops.voxelize(
        points.to(device), feats.to(device), batch.to(device), voxel_size=0.4, reduction=reduction
    )
    cell = torch.floor(points / torch.tensor(0.4)).to(torch.int32)
    keys = torch.cat([batch[:, None], cell], 1)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(keys.tolist()):  # a readable reference over a small cloud
        groups.setdefault(tuple(row), []).append(i)
    assert x.num_rows == len(groups)
    got = {tuple(r): f for r, f in zip(x.coords.cpu().tolist(), x.feats.cpu(), strict=True)}
    for key, rows in groups.items():
        member = feats[rows]
        expected = {"mean": member.mean(0), "sum": member.sum(0), "max": member.amax(0)}[reduction]
        torch.testing.assert_close(got[key], expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(
        x.coords.cpu(), x.coords.cpu()[torch.argsort(x.coords.cpu()[:, 0], stable=True)]
    )


@pytest.mark.parametrize("device", DEVICES)
def test_devoxelize_nearest_and_trilinear(device: str) -> None:
    points, _, batch = _cloud(1, 200)
    coords = torch.tensor(
        [
            [b, x, y, z]
            for b in range(2)
            for x, y, z in itertools.product(range(-2, 3, 2), repeat=3)
        ],
        dtype=torch.int32,
    )
    keep = torch.rand(coords.shape[0], generator=torch.Generator().manual_seed(2)) < 0.7
    coords = coords[keep]
    vals = torch.randn(coords.shape[0], 3, generator=torch.Generator().manual_seed(3))
    x = SparseTensor(coords.to(device), vals.to(device), stride=2)
    table = {tuple(r): v for r, v in zip(coords.tolist(), vals, strict=True)}
    vs = 0.5
    near = ops.devoxelize(
        x, points.to(device), batch.to(device), voxel_size=vs, interpolation="nearest"
    ).cpu()
    tri = ops.devoxelize(
        x, points.to(device), batch.to(device), voxel_size=vs, interpolation="trilinear"
    ).cpu()
    for i in range(points.shape[0]):  # per-point reference of the SPEC §5 formulas
        u = (points[i] / torch.tensor(vs)).double()
        b = int(batch[i])
        cell = [int(torch.floor(torch.floor(u[a]) / 2)) * 2 for a in range(3)]
        exp = table.get((b, *cell), torch.zeros(3))
        torch.testing.assert_close(near[i], exp)
        gcoord = (points[i] / torch.tensor(vs)) / 2 - 0.5
        base = torch.floor(gcoord)
        f = (gcoord - base).double()
        acc, total = torch.zeros(3, dtype=torch.float64), 0.0
        for corner in itertools.product((0, 1), repeat=3):
            key = (b, *[int(base[a] + corner[a]) * 2 for a in range(3)])
            if key in table:
                w = 1.0
                for a in range(3):
                    w *= float(f[a]) if corner[a] else 1 - float(f[a])
                acc += w * table[key].double()
                total += w
        exp_t = acc / total if total > 0 else torch.zeros(3, dtype=torch.float64)
        torch.testing.assert_close(tri[i].double(), exp_t, atol=1e-5, rtol=1e-5)


def test_point_ops_reject_bad_inputs() -> None:
    points, feats, batch = _cloud(4, 10)
    with pytest.raises(ValueError, match="voxel_size"):
        ops.voxelize(points, feats, batch, voxel_size=0.0)
    with pytest.raises(TypeError, match="float32"):
        ops.voxelize(points.double(), feats, batch, voxel_size=1.0)
    with pytest.raises(TypeError, match="int32"):
        ops.voxelize(points, feats, batch.long(), voxel_size=1.0)
    with pytest.raises(ValueError, match="shape"):
        ops.voxelize(points, feats[:5], batch, voxel_size=1.0)
    with pytest.raises(ValueError, match="reduction"):
        ops.voxelize(points, feats, batch, voxel_size=1.0, reduction="median")
    with pytest.raises(ValueError, match=">= 0"):
        ops.voxelize(points, feats, -batch - 1, voxel_size=1.0)
    with pytest.raises(ValueError, match="finite"):
        ops.voxelize(points * float("nan"), feats, batch, voxel_size=1.0)
    x = ops.voxelize(points, feats, batch, voxel_size=1.0)
    with pytest.raises(ValueError, match="interpolation"):
        ops.devoxelize(x, points, batch, voxel_size=1.0, interpolation="cubic")
