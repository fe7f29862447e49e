"""voxelize / devoxelize (upstream's forms) against direct per-point references."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import available_devices

DEVICES = available_devices()
VOXEL = (0.4, 0.3, 0.5)
ORIGIN = (0.1, -0.2, 0.0)


def _cloud(seed: int, n: int = 300) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    points = torch.rand(n, 3, generator=g) * 3 - 1
    feats = torch.randn(n, 4, generator=g)
    batch = torch.randint(0, 2, (n,), generator=g, dtype=torch.int32)
    return points, feats, batch


def _u(points: torch.Tensor) -> torch.Tensor:
    return (points - torch.tensor(ORIGIN)) / torch.tensor(VOXEL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "max"])
def test_voxelize_first_occurrence_cells_of_the_active_points(device: str, reduction: str) -> None:
    points, feats, batch = _cloud(0)
    active, stride = 280, (2, 1, 3)
    x = ops.voxelize(
        points.to(device),
        feats.to(device),
        batch.to(device),
        torch.tensor([active], dtype=torch.int32, device=device),
        voxel_size=VOXEL,
        origin=ORIGIN,
        reduction=reduction,
        stride=stride,
    )
    cell = torch.floor(_u(points)).to(torch.int32) * torch.tensor(stride, dtype=torch.int32)
    keys = torch.cat([batch[:, None], cell], 1)
    groups: dict[tuple[int, ...], list[int]] = {}  # insertion order: first occurrence
    for i, row in enumerate(keys[:active].tolist()):  # a readable reference over a small cloud
        groups.setdefault(tuple(row), []).append(i)
    assert [tuple(r) for r in x.coords.cpu().tolist()] == list(groups)
    assert x.stride == stride
    for got, rows in zip(x.feats.cpu(), groups.values(), strict=True):
        member = feats[rows]
        expected = {"mean": member.mean(0), "sum": member.sum(0), "max": member.amax(0)}[reduction]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_devoxelize_nearest_linear_trilinear(device: str) -> None:
    points, _, batch = _cloud(1, 200)
    coords = torch.tensor(
        [
            [b, x, y, z]
            for b in range(2)
            for x, y, z in itertools.product(range(-4, 8, 2), repeat=3)
        ],
        dtype=torch.int32,
    )
    keep = torch.rand(coords.shape[0], generator=torch.Generator().manual_seed(2)) < 0.7
    coords = coords[keep]
    vals = torch.randn(coords.shape[0], 3, generator=torch.Generator().manual_seed(3))
    x = SparseTensor(coords.to(device), vals.to(device), stride=2)
    table = {
        (r[0], r[1] // 2, r[2] // 2, r[3] // 2): v
        for r, v in zip(coords.tolist(), vals, strict=True)
    }
    active = 180
    got = {
        mode: ops.devoxelize(
            points.to(device),
            x,
            batch.to(device),
            active,
            voxel_size=VOXEL,
            origin=ORIGIN,
            interpolation=mode,
        ).cpu()
        for mode in ("nearest", "linear", "trilinear")
    }
    u_all = _u(points)
    for i in range(active):  # per-point reference of the formulas (u in the value's cells)
        u, b = u_all[i], int(batch[i])
        cell = [int(torch.floor(u[a] + 0.5)) for a in range(3)]
        key = (b, cell[0], cell[1], cell[2])
        torch.testing.assert_close(got["nearest"][i], table.get(key, torch.zeros(3)))
        for mode, g in (("linear", u), ("trilinear", u - 0.5)):
            base = torch.floor(g)
            f = (g - base).double()
            acc, total = torch.zeros(3, dtype=torch.float64), 0.0
            for corner in itertools.product((0, 1), repeat=3):
                at = [int(base[a] + corner[a]) for a in range(3)]
                key = (b, at[0], at[1], at[2])
                if key in table:
                    w = 1.0
                    for a in range(3):
                        w *= float(f[a]) if corner[a] else 1 - float(f[a])
                    acc += w * table[key].double()
                    total += w
            if mode == "trilinear":
                acc = acc / total if total > 0 else torch.zeros(3, dtype=torch.float64)
            torch.testing.assert_close(got[mode][i].double(), acc, atol=1e-5, rtol=1e-5)
    for out in got.values():
        assert not out[active:].any()  # points past the active count read zeros


def test_upstream_point_voxel_numbers() -> None:
    """Upstream's fixture: voxel 1, mean, nearest reads floor(u + 0.5) (1.6 reads cell 2)."""
    pts = torch.tensor([[0.1, 0.1, 0.1], [0.4, 0.2, 0.2], [1.2, 0.1, 0.1], [1.6, 0.3, 0.2],
                        [2.1, 0.0, 0.0]])  # fmt: skip
    feats = torch.tensor([[1.0, -1.0], [3.0, 1.0], [5.0, 2.0], [7.0, 4.0], [9.0, 8.0]])
    batch = torch.zeros(5, dtype=torch.int32)
    vox = ops.voxelize(pts, feats, batch, voxel_size=1.0)
    assert vox.coords[:, 1].tolist() == [0, 1, 2]
    back = ops.devoxelize(pts, vox, batch, voxel_size=1.0, interpolation="nearest")
    assert back.tolist() == [[2, 0], [2, 0], [6, 3], [9, 8], [9, 8]]


def test_point_ops_reject_bad_inputs() -> None:
    points, feats, batch = _cloud(4, 10)
    with pytest.raises(ValueError, match="voxel_size"):
        ops.voxelize(points, feats, batch, voxel_size=0.0)
    with pytest.raises(ValueError, match="three numbers"):
        ops.voxelize(points, feats, batch, voxel_size=(1.0, 2.0))
    with pytest.raises(TypeError, match="float32"):
        ops.voxelize(points.double(), feats, batch, voxel_size=1.0)
    with pytest.raises(TypeError, match="int32"):
        ops.voxelize(points, feats, batch.long(), voxel_size=1.0)
    with pytest.raises(ValueError, match="shape"):
        ops.voxelize(points, feats[:5], batch, voxel_size=1.0)
    with pytest.raises(ValueError, match="active_rows"):
        ops.voxelize(points, feats, batch, 11, voxel_size=1.0)
    with pytest.raises(ValueError, match="reduction"):
        ops.voxelize(points, feats, batch, voxel_size=1.0, reduction="median")
    with pytest.raises(ValueError, match=">= 0"):
        ops.voxelize(points, feats, -batch - 1, voxel_size=1.0)
    with pytest.raises(ValueError, match="finite"):
        ops.voxelize(points * float("nan"), feats, batch, voxel_size=1.0)
    x = ops.voxelize(points, feats, batch, voxel_size=1.0)
    with pytest.raises(ValueError, match="interpolation"):
        ops.devoxelize(points, x, batch, voxel_size=1.0, interpolation="cubic")


def test_point_ops_refuse_arrays_on_two_devices() -> None:
    """The shared prologue's device rule, on the CPU: a ``meta`` tensor lives elsewhere."""
    points, feats, batch = _cloud(5, 4)
    elsewhere = torch.empty((4, 3), device="meta")
    words = "voxelize: points are on meta but batch_indices on cpu; move them to one device"
    with pytest.raises(ValueError, match=words):
        ops.voxelize(elsewhere, feats, batch, voxel_size=1.0)
    words = "voxelize: features are on meta but points on cpu; move them to one device"
    with pytest.raises(ValueError, match=words):
        ops.voxelize(points, feats.to("meta"), batch, voxel_size=1.0)
    x = ops.voxelize(points, feats, batch, voxel_size=1.0)
    words = "devoxelize: points are on meta but batch_indices on cpu"
    with pytest.raises(ValueError, match=words):
        ops.devoxelize(elsewhere, x, batch, voxel_size=1.0)
