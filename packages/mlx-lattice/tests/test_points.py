"""voxelize / devoxelize (upstream's forms) against brute-force per-point references in numpy."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from lattice_contract.dialect import Interpolation, VoxelReduction
from mlx_lattice import SparseTensor
from mlx_lattice.ops.points import devoxelize, voxelize

VOXEL = (0.3, 0.25, 0.4)
ORIGIN = (-0.1, 0.2, 0.05)


def cloud(seed: int, n: int = 300, channels: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(-1.0, 1.5, (n, 3)).astype(np.float32)
    # A tenth of the points sit on cell faces, where the f32 quotient may land just
    # below k: the contract floors the f32 division, whatever it gives.
    faces = rng.integers(-3, 5, (n // 10, 3)).astype(np.float32) * np.asarray(VOXEL, np.float32)
    pts[: n // 10] = faces + np.asarray(ORIGIN, np.float32)
    feats = rng.standard_normal((n, channels)).astype(np.float32)
    batch = rng.integers(0, 3, n).astype(np.int32)
    return pts, feats, batch


def cells_of(p: np.ndarray) -> np.ndarray:
    """``(p - origin) / voxel_size`` with the f32 arithmetic the contract names."""
    return (p.astype(np.float32) - np.asarray(ORIGIN, np.float32)) / np.asarray(VOXEL, np.float32)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("reduction", [r.value for r in VoxelReduction])
def test_voxelize_matches_brute_force(seed: int, reduction: str) -> None:
    pts, feats, batch = cloud(seed)
    active, stride = 250 + seed, (1, 2, 3)
    out = voxelize(
        mx.array(pts), mx.array(feats), mx.array(batch), mx.array([active], dtype=mx.int32),
        voxel_size=VOXEL, origin=ORIGIN, reduction=reduction, stride=stride,
    )  # fmt: skip
    groups: dict[tuple[int, ...], list[np.ndarray]] = {}  # insertion order = first occurrence
    cells = np.floor(cells_of(pts)).astype(np.int64)
    for i in range(active):  # only the active points take part
        key = (int(batch[i]), *(int(cells[i, a]) * stride[a] for a in range(3)))
        groups.setdefault(key, []).append(feats[i])
    reductions: dict[str, Callable[..., Any]] = {"mean": np.mean, "sum": np.sum, "max": np.max}
    reduce = reductions[reduction]
    got_rows = [tuple(r) for r in np.array(out.coords).tolist()]
    assert got_rows == list(groups), "one row per cell, in first-occurrence order"
    want = np.array([reduce(np.array(groups[r]), axis=0) for r in got_rows])
    np.testing.assert_allclose(np.array(out.feats), want, rtol=1e-5, atol=1e-6)
    assert out.stride == stride
    SparseTensor(out.coords, out.feats, stride=stride)  # a valid sparse value


def test_voxelize_f16_and_enum() -> None:
    pts, feats, batch = cloud(7, 50)
    args = (mx.array(pts), mx.array(feats), mx.array(batch))
    out = voxelize(
        args[0], args[1].astype(mx.float16), args[2], voxel_size=VOXEL, reduction=VoxelReduction.sum
    )
    ref = voxelize(*args, voxel_size=VOXEL, reduction="sum")
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


def brute_devoxelize(x: SparseTensor, pts: np.ndarray, batch: np.ndarray, mode: str) -> np.ndarray:
    """From the definitions: u in the value's cells; nearest floor(u + 0.5); linear corners
    floor(u) + {0,1} not renormalised; trilinear cell-centred and renormalised."""
    t = np.array(x.stride)
    table = {
        (r[0], *(np.array(r[1:]) // t).tolist()): f
        for r, f in zip(
            np.array(x.coords).tolist(), np.array(x.feats.astype(mx.float32)), strict=True
        )
    }
    u = cells_of(pts)
    out = np.zeros((len(pts), x.num_channels))
    for i in range(len(pts)):
        if mode == "nearest":
            c = np.floor(u[i] + np.float32(0.5)).astype(np.int64)
            out[i] = table.get((int(batch[i]), *map(int, c)), 0.0)
            continue
        g = (u[i] - np.float32(0.5) if mode == "trilinear" else u[i]).astype(np.float64)
        b = np.floor(g)
        f = g - b
        acc, total = np.zeros(x.num_channels), 0.0
        for corner in itertools.product((0, 1), repeat=3):
            key = (int(batch[i]), *(int(b[a] + corner[a]) for a in range(3)))
            if key in table:
                w = np.prod([f[a] if corner[a] else 1 - f[a] for a in range(3)])
                acc += w * table[key]
                total += w
        if mode == "trilinear":
            out[i] = acc / total if total > 0 else 0.0
        else:
            out[i] = acc
    return out


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("mode", [m.value for m in Interpolation])
def test_devoxelize_matches_brute_force(stride: int, mode: str) -> None:
    x = sparse_at(stride, stride)
    rng = np.random.default_rng(100 + stride)
    pts = rng.uniform(-1.0, 1.5, (400, 3)).astype(np.float32)
    batch = rng.integers(0, 2, 400).astype(np.int32)
    active = 350
    got = devoxelize(
        mx.array(pts), x, mx.array(batch), mx.array([active], dtype=mx.int32),
        voxel_size=VOXEL, origin=ORIGIN, interpolation=mode,
    )  # fmt: skip
    assert got.shape == (400, 3) and got.dtype == mx.float32
    want = brute_devoxelize(x, pts[:active], batch[:active], mode)
    np.testing.assert_allclose(np.array(got)[:active], want, rtol=1e-4, atol=1e-5)
    assert not np.any(np.array(got)[active:]), "points past the active count read zeros"
    assert np.any(np.all(want == 0, axis=1)), "some points should have no neighbour"


def test_upstream_point_voxel_numbers() -> None:
    """Upstream's fixture: voxel 1, mean, nearest reads floor(u + 0.5) (1.6 reads cell 2)."""
    pts = np.array([[0.1, 0.1, 0.1], [0.4, 0.2, 0.2], [1.2, 0.1, 0.1], [1.6, 0.3, 0.2],
                    [2.1, 0.0, 0.0]], np.float32)  # fmt: skip
    feats = np.array([[1, -1], [3, 1], [5, 2], [7, 4], [9, 8]], np.float32)
    batch = mx.zeros((5,), mx.int32)
    vox = voxelize(mx.array(pts), mx.array(feats), batch, voxel_size=1.0)
    assert np.array(vox.coords)[:, 1].tolist() == [0, 1, 2]
    back = devoxelize(mx.array(pts), vox, batch, voxel_size=1.0, interpolation="nearest")
    assert np.array(back).tolist() == [[2, 0], [2, 0], [6, 3], [9, 8], [9, 8]]


@pytest.mark.parametrize("mode", ["nearest", "linear", "trilinear"])
def test_devoxelize_half_precision_matches_f32(mode: str) -> None:
    x = sparse_at(9, 2)
    pts = mx.array(np.random.default_rng(9).uniform(-1, 3, (100, 3)).astype(np.float32))
    batch = mx.zeros((100,), mx.int32)
    ref = devoxelize(pts, x, batch, voxel_size=VOXEL, interpolation=mode)
    for dtype in (mx.float16, mx.bfloat16):
        got = devoxelize(pts, x.astype(dtype), batch, voxel_size=VOXEL, interpolation=mode)
        assert got.dtype == dtype
        np.testing.assert_allclose(
            np.array(got.astype(mx.float32)), np.array(ref), rtol=2e-2, atol=2e-2
        )


def test_linear_and_trilinear_reproduce_a_linear_field_on_a_full_grid() -> None:
    # linear: corners at integer u (cell origins); trilinear: at cell centres u = c + 0.5.
    t, voxel = 2, 0.25
    grid = np.array(list(itertools.product([0], range(6), range(6), range(6))), np.int32)
    coef = np.array([1.5, -2.0, 0.5])
    rng = np.random.default_rng(0)
    pts = rng.uniform(0.5 * voxel, 4.5 * voxel, (200, 3)).astype(np.float32)
    for mode, centre in (("linear", 0.0), ("trilinear", 0.5)):
        field = (((grid[:, 1:] + centre) * voxel) @ coef + 3.0).astype(np.float32)[:, None]
        x = SparseTensor(mx.array(grid * np.array([1, t, t, t], np.int32)), mx.array(field), t)
        got = devoxelize(
            mx.array(pts), x, mx.zeros((200,), mx.int32), voxel_size=voxel, interpolation=mode
        )
        np.testing.assert_allclose(np.array(got)[:, 0], pts @ coef + 3.0, rtol=1e-5, atol=1e-5)


def test_nearest_reads_back_the_voxelized_cell_of_half_shifted_points() -> None:
    pts, feats, batch = cloud(3, 200)
    vox = voxelize(
        mx.array(pts), mx.array(feats), mx.array(batch), voxel_size=VOXEL, reduction="max"
    )
    # floor(u + 0.5) of p - voxel/2 is floor(u): the point's own cell
    shifted = mx.array(pts - np.asarray(VOXEL, np.float32) / 2)
    back = devoxelize(
        shifted, vox, mx.array(batch), voxel_size=VOXEL, interpolation=Interpolation.nearest
    )
    inner = np.abs(cells_of(pts) - np.round(cells_of(pts))).min(axis=1) > 1e-3
    assert np.all(np.array(back)[inner] >= feats[inner] - 1e-6)


def test_empty_inputs() -> None:
    none = mx.zeros((0,), mx.int32)
    empty = voxelize(mx.zeros((0, 3)), mx.zeros((0, 5)), none, voxel_size=1.0)
    assert empty.num_rows == 0 and empty.num_channels == 5
    out = devoxelize(mx.ones((4, 3)), empty, mx.zeros((4,), mx.int32), voxel_size=1.0)
    assert out.shape == (4, 5) and not np.any(np.array(out))
    pts, feats, batch = cloud(2, 10)
    idle = voxelize(mx.array(pts), mx.array(feats), mx.array(batch), 0, voxel_size=1.0)
    assert idle.num_rows == 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda p, f, b: voxelize(p, f, b, voxel_size=0.0), ValueError, "voxel_size"),
        (lambda p, f, b: voxelize(p, f, b, voxel_size=(1.0, 2.0)), ValueError, "three"),
        (lambda p, f, b: voxelize(p, f, b, voxel_size=1.0, origin=np.inf), ValueError, "finite"),
        (lambda p, f, b: voxelize(p[:, :2], f, b, voxel_size=1.0), ValueError, r"\(P, 3\)"),
        (lambda p, f, b: voxelize(p, f[:3], b, voxel_size=1.0), ValueError, "one row per point"),
        (
            lambda p, f, b: voxelize(p, f, b[:3], voxel_size=1.0),
            ValueError,
            "batch_indices has shape",
        ),
        (lambda p, f, b: voxelize(p, f, b.astype(mx.int64), voxel_size=1.0), TypeError, "int32"),
        (lambda p, f, b: voxelize(p, f, b - 5, voxel_size=1.0), ValueError, ">= 0"),
        (lambda p, f, b: voxelize(p / 0.0, f, b, voxel_size=1.0), ValueError, "finite"),
        (lambda p, f, b: voxelize(p * 1e12, f, b, voxel_size=1e-3), ValueError, "int32"),
        (lambda p, f, b: voxelize(p, f, b, 11, voxel_size=1.0), ValueError, "active_rows"),
        (lambda p, f, b: voxelize(p, f, b, voxel_size=1.0, reduction="min"), ValueError, "mean"),
        (lambda p, f, b: devoxelize(p, f, b, voxel_size=1.0), TypeError, "SparseTensor"),
    ],
)
def test_bad_inputs(
    call: Callable[[mx.array, mx.array, mx.array], object], error: type[Exception], match: str
) -> None:
    pts, feats, batch = cloud(1, 10)
    with pytest.raises(error, match=match):
        call(mx.array(pts), mx.array(feats), mx.array(batch))
