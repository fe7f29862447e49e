"""Synthetic surface scenes: the voxel clouds benchmarks, examples and training data use.

Real sparse-CNN inputs (LiDAR sweeps, indoor scans) are 2-D surfaces embedded
in 3-D space, so a voxel has roughly eight of its 26 neighbours occupied, not
zero and not 26.  Kernel-map cost and pair counts depend on exactly that, so a
benchmark on uniform random voxels would measure the wrong thing.  This module
builds a small room-like scene -- a floor, two walls, a tilted ramp, spheres, a
cylinder and boxes -- samples points densely on every surface, jitters them,
and voxelises them in a ``grid``^3 cube.  The scene is scaled so that the
voxel count lands near the requested size.  NumPy only, deterministic per seed.

Labels are per voxel: the primitive class of the first surface that hit it
(see :data:`LABEL_NAMES`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LABEL_NAMES: tuple[str, ...] = ("plane", "sphere", "cylinder", "box")
"""Class of each label value: ``LABEL_NAMES[label]``."""

PLANE, SPHERE, CYLINDER, BOX = range(4)

_POINTS_PER_VOXEL_AREA = 4.0  # dense enough that nearly every crossed voxel is hit
_JITTER = 0.3  # voxel units, standard deviation of the sensor-like noise


@dataclass(frozen=True)
class _Rect:
    origin: np.ndarray
    edge_u: np.ndarray
    edge_v: np.ndarray
    label: int


@dataclass(frozen=True)
class _Sphere:
    centre: np.ndarray
    radius: float


@dataclass(frozen=True)
class _Cylinder:
    base: np.ndarray  # centre of the bottom circle; axis is +z
    radius: float
    height: float


_Primitive = _Rect | _Sphere | _Cylinder


def _layout(rng: np.random.Generator) -> list[_Primitive]:
    """Primitives in the unit cube; the same seed gives the same room."""
    v = np.asarray
    prims: list[_Primitive] = [
        _Rect(v([0.05, 0.05, 0.05]), v([0.9, 0.0, 0.0]), v([0.0, 0.9, 0.0]), PLANE),  # floor
        _Rect(v([0.05, 0.95, 0.05]), v([0.9, 0.0, 0.0]), v([0.0, 0.0, 0.5]), PLANE),  # wall
        _Rect(v([0.05, 0.05, 0.05]), v([0.0, 0.9, 0.0]), v([0.0, 0.0, 0.35]), PLANE),  # wall
        _Rect(v([0.55, 0.1, 0.05]), v([0.35, 0.0, 0.2]), v([0.0, 0.3, 0.0]), PLANE),  # ramp
    ]
    for _ in range(3):
        r = rng.uniform(0.05, 0.11)
        c = v([rng.uniform(0.2, 0.8), rng.uniform(0.45, 0.8), 0.05 + r + rng.uniform(0.0, 0.2)])
        prims.append(_Sphere(c, r))
    prims.append(_Cylinder(v([rng.uniform(0.2, 0.4), rng.uniform(0.2, 0.4), 0.05]), 0.06, 0.4))
    for _ in range(2):
        o = v([rng.uniform(0.15, 0.7), rng.uniform(0.15, 0.7), 0.05])
        size = rng.uniform(0.06, 0.15, 3)
        ex, ey, ez = (v([size[0], 0, 0]), v([0, size[1], 0]), v([0, 0, size[2]]))
        prims += [
            _Rect(o, ex, ey, BOX),
            _Rect(o + ez, ex, ey, BOX),
            _Rect(o, ex, ez, BOX),
            _Rect(o + ey, ex, ez, BOX),
            _Rect(o, ey, ez, BOX),
            _Rect(o + ex, ey, ez, BOX),
        ]
    return prims


def _anchor(point: np.ndarray, scale: float) -> np.ndarray:
    """A scaled anchor snapped to a voxel centre.

    Without this an axis-aligned plane's voxel thickness would depend on where
    its height falls inside a voxel, and the voxel count would jump around as
    the scene is scaled.
    """
    return np.floor(point * scale) + 0.5


def _sample(prim: _Primitive, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Points (voxel units) on one primitive at the fixed areal density."""
    if isinstance(prim, _Rect):
        u, w = prim.edge_u * scale, prim.edge_v * scale
        area = float(np.linalg.norm(np.cross(u, w)))
        n = int(area * _POINTS_PER_VOXEL_AREA) + 1
        a, b = rng.random((n, 1)), rng.random((n, 1))
        return _anchor(prim.origin, scale) + a * u + b * w
    if isinstance(prim, _Sphere):
        r = prim.radius * scale
        n = int(4 * np.pi * r * r * _POINTS_PER_VOXEL_AREA) + 1
        d = rng.standard_normal((n, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        return _anchor(prim.centre, scale) + r * d
    r, h = prim.radius * scale, prim.height * scale
    n = int(2 * np.pi * r * h * _POINTS_PER_VOXEL_AREA) + 1
    t = rng.uniform(0, 2 * np.pi, n)
    z = rng.uniform(0, h, n)
    return _anchor(prim.base, scale) + np.stack([r * np.cos(t), r * np.sin(t), z], axis=1)


def _label(prim: _Primitive) -> int:
    if isinstance(prim, _Rect):
        return prim.label
    return SPHERE if isinstance(prim, _Sphere) else CYLINDER


def _voxelise(
    prims: list[_Primitive], scale: float, grid: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    points, labels = [], []
    for prim in prims:
        p = _sample(prim, scale, rng)
        points.append(p + rng.normal(0.0, _JITTER, p.shape))
        labels.append(np.full(len(p), _label(prim), dtype=np.int32))
    vox = np.floor(np.concatenate(points)).astype(np.int64)
    lab = np.concatenate(labels)
    keep = np.all((vox >= 0) & (vox < grid), axis=1)
    vox, lab = vox[keep], lab[keep]
    key = (vox[:, 0] * grid + vox[:, 1]) * grid + vox[:, 2]
    _, first = np.unique(key, return_index=True)  # sorted by key: x, then y, then z
    return vox[first].astype(np.int32), lab[first]


def make_scene(n_voxels: int, grid: int = 512, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A surface scene of about ``n_voxels`` voxels inside ``[0, grid)^3``.

    Returns ``(coords, labels)``: int32 ``(N, 3)`` voxel coordinates (unique,
    sorted by x, y, z) and int32 ``(N,)`` primitive labels.  The room is scaled
    until the voxel count is within about 2 % of ``n_voxels``; a request that
    would not fit in the grid is an error rather than a silently smaller scene.
    """
    if n_voxels < 100:
        raise ValueError(f"n_voxels must be at least 100 for a recognisable scene, got {n_voxels}")
    prims = _layout(np.random.default_rng(seed))
    scale = grid * 0.25
    best = _voxelise(prims, scale, grid, seed)
    current = best
    for _ in range(8):
        ratio = n_voxels / max(len(current[0]), 1)
        if abs(ratio - 1.0) < 0.02:
            break
        scale *= float(np.sqrt(ratio))
        if scale > grid:
            raise ValueError(
                f"{n_voxels} surface voxels do not fit in a {grid}^3 grid; use a larger grid"
            )
        current = _voxelise(prims, scale, grid, seed)
        if abs(len(current[0]) - n_voxels) < abs(len(best[0]) - n_voxels):
            best = current
    return best


def batched(coords: np.ndarray, batch: int = 0) -> np.ndarray:
    """``(N, 3)`` scene coordinates as ``(N, 4)`` int32 rows ``(batch, x, y, z)``."""
    col = np.full((len(coords), 1), batch, dtype=np.int32)
    return np.concatenate([col, coords.astype(np.int32)], axis=1)


if __name__ == "__main__":
    for size in (100_000, 200_000):
        c, lab = make_scene(size)
        counts = np.bincount(lab, minlength=len(LABEL_NAMES))
        print(
            size, c.shape, c.min(0), c.max(0), dict(zip(LABEL_NAMES, counts.tolist(), strict=True))
        )
