"""voxelize / devoxelize against brute-force per-point references in numpy."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest
from lattice_contract.schema import Interpolation, VoxelReduction
from mlx_lattice import SparseTensor
from mlx_lattice.ops.points import devoxelize, voxelize

VOXEL = 0.3


def cloud(seed: int, n: int = 300, channels: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(-1.0, 1.5, (n, 3)).astype(np.float32)
    # A tenth of the points sit on voxel faces (k * voxel in f32), where the f32 quotient
    # may land just below k: the contract floors the f32 division, whatever it gives.
    on_faces = rng.integers(-3, 5, (n // 10, 3)).astype(np.float32) * np.float32(VOXEL)
    pts[: n // 10] = on_faces
    feats = rng.standard_normal((n, channels)).astype(np.float32)
    batch = rng.integers(0, 3, n).astype(np.int32)
    return pts, feats, batch


def cell_of(p: np.ndarray, voxel: float) -> np.ndarray:
    """floor(p / voxel) with the same f32 division the contract names."""
    return np.floor(p.astype(np.float32) / np.float32(voxel)).astype(np.int64)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("reduction", [r.value for r in VoxelReduction])
def test_voxelize_matches_brute_force(seed: int, reduction: str) -> None:
    pts, feats, batch = cloud(seed)
    out = voxelize(
        mx.array(pts), mx.array(feats), mx.array(batch), voxel_size=VOXEL, reduction=reduction
    )
    groups: dict[tuple[int, ...], list[np.ndarray]] = {}
    cells = cell_of(pts, VOXEL)
    for i in range(len(pts)):
        groups.setdefault((int(batch[i]), *map(int, cells[i])), []).append(feats[i])
    reduce = {"mean": np.mean, "sum": np.sum, "max": np.max}[reduction]
    got_rows = [tuple(r) for r in np.array(out.coords).tolist()]
    assert got_rows == sorted(groups), "one row per voxel, sorted by (batch, x, y, z)"
    want = np.array([reduce(np.array(groups[r]), axis=0) for r in got_rows])
    np.testing.assert_allclose(np.array(out.feats), want, rtol=1e-5, atol=1e-6)
    assert out.stride == (1, 1, 1)
    # It is a valid sparse value by the public constructor's own checks.
    SparseTensor(out.coords, out.feats)


def test_voxelize_f16_and_enum() -> None:
    pts, feats, batch = cloud(7, 50)
    out = voxelize(
        mx.array(pts),
        mx.array(feats).astype(mx.float16),
        mx.array(batch),
        voxel_size=VOXEL,
        reduction=VoxelReduction.sum,
    )
    ref = voxelize(
        mx.array(pts), mx.array(feats), mx.array(batch), voxel_size=VOXEL, reduction="sum"
    )
    assert out.dtype == mx.float16
    np.testing.assert_allclose(
        np.array(out.feats.astype(mx.float32)), np.array(ref.feats), rtol=2e-3, atol=2e-3
    )


def sparse_at(seed: int, stride: int, channels: int = 3, keep: float = 0.6) -> SparseTensor:
    rng = np.random.default_rng(seed)
    grid = np.array(
        list(itertools.product(range(2), range(-2, 4), range(-2, 4), range(-2, 4))), np.int32
    )
    grid = grid[rng.random(len(grid)) < keep]
    coords = grid * np.array([1, stride, stride, stride], np.int32)
    feats = rng.standard_normal((len(grid), channels)).astype(np.float32)
    return SparseTensor(mx.array(coords), mx.array(feats), stride=stride)


def brute_devoxelize(
    x: SparseTensor, pts: np.ndarray, batch: np.ndarray, voxel: float, mode: str
) -> np.ndarray:
    table = {
        tuple(r): f
        for r, f in zip(
            np.array(x.coords).tolist(), np.array(x.feats.astype(mx.float32)), strict=True
        )
    }
    t = np.array(x.stride, dtype=np.float32)
    u = pts.astype(np.float32) / np.float32(voxel)
    out = np.zeros((len(pts), x.num_channels))
    for i in range(len(pts)):
        if mode == "nearest":
            c = np.floor(u[i].astype(np.float64) / t).astype(np.int64) * t.astype(np.int64)
            out[i] = table.get((int(batch[i]), *map(int, c)), 0.0)
            continue
        g = (u[i] / t - np.float32(0.5)).astype(np.float64)
        b = np.floor(g)
        f = g - b
        acc, total = np.zeros(x.num_channels), 0.0
        for corner in itertools.product((0, 1), repeat=3):
            key = (int(batch[i]), *(int((b[a] + corner[a]) * t[a]) for a in range(3)))
            if key in table:
                w = np.prod([f[a] if corner[a] else 1 - f[a] for a in range(3)])
                acc += w * table[key]
                total += w
        out[i] = acc / total if total > 0 else 0.0
    return out


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("mode", [m.value for m in Interpolation])
def test_devoxelize_matches_brute_force(stride: int, mode: str) -> None:
    x = sparse_at(stride, stride)
    rng = np.random.default_rng(100 + stride)
    pts = rng.uniform(-3.0 * stride * VOXEL, 5.0 * stride * VOXEL, (400, 3)).astype(np.float32)
    batch = rng.integers(0, 2, 400).astype(np.int32)
    got = devoxelize(x, mx.array(pts), mx.array(batch), voxel_size=VOXEL, interpolation=mode)
    assert got.shape == (400, 3) and got.dtype == mx.float32
    want = brute_devoxelize(x, pts, batch, VOXEL, mode)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-5)
    assert np.any(np.all(want == 0, axis=1)), "some points should have no neighbour"


@pytest.mark.parametrize("mode", ["nearest", "trilinear"])
def test_devoxelize_half_precision_matches_f32(mode: str) -> None:
    x = sparse_at(9, 2)
    pts = mx.array(np.random.default_rng(9).uniform(-1, 3, (100, 3)).astype(np.float32))
    batch = mx.zeros((100,), mx.int32)
    ref = devoxelize(x, pts, batch, voxel_size=VOXEL, interpolation=mode)
    for dtype in (mx.float16, mx.bfloat16):
        got = devoxelize(x.astype(dtype), pts, batch, voxel_size=VOXEL, interpolation=mode)
        assert got.dtype == dtype
        np.testing.assert_allclose(
            np.array(got.astype(mx.float32)), np.array(ref), rtol=2e-2, atol=2e-2
        )


def test_trilinear_reproduces_a_linear_field_on_a_full_grid() -> None:
    # Voxel centres sit at (c + 0.5) * t * voxel; trilinear is exact for linear fields.
    t, voxel = 2, 0.25
    grid = np.array(list(itertools.product([0], range(6), range(6), range(6))), np.int32)
    centres = (grid[:, 1:] + 0.5) * t * voxel
    coef = np.array([1.5, -2.0, 0.5])
    field = (centres @ coef + 3.0).astype(np.float32)[:, None]
    x = SparseTensor(mx.array(grid * np.array([1, t, t, t], np.int32)), mx.array(field), stride=t)
    rng = np.random.default_rng(0)
    pts = rng.uniform(0.5 * t * voxel, 5.5 * t * voxel, (200, 3)).astype(np.float32)
    got = devoxelize(
        x, mx.array(pts), mx.zeros((200,), mx.int32), voxel_size=voxel, interpolation="trilinear"
    )
    np.testing.assert_allclose(np.array(got)[:, 0], pts @ coef + 3.0, rtol=1e-5, atol=1e-5)


def test_nearest_reads_back_voxelized_features() -> None:
    pts, feats, batch = cloud(3, 200)
    vox = voxelize(
        mx.array(pts), mx.array(feats), mx.array(batch), voxel_size=VOXEL, reduction="max"
    )
    back = devoxelize(
        vox, mx.array(pts), mx.array(batch), voxel_size=VOXEL, interpolation=Interpolation.nearest
    )
    assert np.all(np.array(back) >= feats - 1e-6)  # each point's voxel holds the max over it


def test_empty_inputs() -> None:
    empty = voxelize(mx.zeros((0, 3)), mx.zeros((0, 5)), mx.zeros((0,), mx.int32), voxel_size=1.0)
    assert empty.num_rows == 0 and empty.num_channels == 5
    out = devoxelize(empty, mx.ones((4, 3)), mx.zeros((4,), mx.int32), voxel_size=1.0)
    assert out.shape == (4, 5) and not np.any(np.array(out))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda p, f, b: voxelize(p, f, b, voxel_size=0.0), ValueError, "voxel_size"),
        (lambda p, f, b: voxelize(p[:, :2], f, b, voxel_size=1.0), ValueError, r"\(P, 3\)"),
        (lambda p, f, b: voxelize(p, f[:3], b, voxel_size=1.0), ValueError, "one row per point"),
        (lambda p, f, b: voxelize(p, f, b[:3], voxel_size=1.0), ValueError, "batch has shape"),
        (lambda p, f, b: voxelize(p, f, b.astype(mx.int64), voxel_size=1.0), TypeError, "int32"),
        (lambda p, f, b: voxelize(p, f, b - 5, voxel_size=1.0), ValueError, ">= 0"),
        (lambda p, f, b: voxelize(p / 0.0, f, b, voxel_size=1.0), ValueError, "finite"),
        (lambda p, f, b: voxelize(p * 1e12, f, b, voxel_size=1e-3), ValueError, "int32"),
        (lambda p, f, b: voxelize(p, f, b, voxel_size=1.0, reduction="min"), ValueError, "mean"),
        (lambda p, f, b: devoxelize(f, p, b, voxel_size=1.0), TypeError, "SparseTensor"),
    ],
)
def test_bad_inputs(
    call: Callable[[mx.array, mx.array, mx.array], object], error: type[Exception], match: str
) -> None:
    pts, feats, batch = cloud(1, 10)
    with pytest.raises(error, match=match):
        call(mx.array(pts), mx.array(feats), mx.array(batch))
