"""A LiDAR-like street scan for the benchmarks: data that is not our own surface scenes.

A 64-beam spinning sensor 1.73 m above the ground is ray-cast (vectorised
NumPy, one array op per surface) against a street: the ground plane, two
building fronts along the road, a far wall, parked cars (boxes) and poles.
Points thin out with range as real sweeps do (the beams diverge), the
sensor noise is a centimetre, and the points are voxelised at 5 cm.  One
sweep gives about 80k voxels; ``sweeps > 1`` adds sweeps from sensor poses
further down the street (a moving car), so bigger scenes keep the same
density profile rather than densifying one view.

Why here and not in ``lattice_conformance.scenes``: the surface scenes are
the project's own; a benchmark that only ever sees them can be tuned to
them.  This scene shares no code with them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lidar_coords"]

_SENSOR_HEIGHT = 1.73
_VOXEL = 0.05


def _sweep(rng: np.random.Generator, origin_x: float, beams: int, azimuths: int) -> np.ndarray:
    """(m, 3) hit points of one full 360-degree sweep from a sensor at (origin_x, 0, 1.73)."""
    elev = np.deg2rad(np.linspace(-24.8, 2.0, beams))
    az = np.deg2rad(np.linspace(-180.0, 180.0, azimuths, endpoint=False)) + rng.uniform(0, 1e-3)
    e, a = np.meshgrid(elev, az, indexing="ij")
    d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1).reshape(-1, 3)
    o = np.array([origin_x, 0.0, _SENSOR_HEIGHT])
    t = np.full(len(d), np.inf)

    def plane(axis: int, value: float, lo: np.ndarray, hi: np.ndarray) -> None:
        with np.errstate(divide="ignore", invalid="ignore"):
            tt = (value - o[axis]) / d[:, axis]
        p = o + d * tt[:, None]
        ok = (tt > 0) & np.all((p >= lo) & (p <= hi), 1) & (tt < t)
        t[ok] = tt[ok]

    big = 1e9
    inf3, sup3 = np.array([-big, -big, -big]), np.array([big, big, big])
    plane(2, 0.0, inf3, sup3)  # ground
    for y in (-12.0, 12.0):  # building fronts along the street, 9 m high
        plane(1, y, np.array([-big, -big, 0.0]), np.array([big, big, 9.0]))
    for x in (-60.0, 90.0):  # far walls closing the street
        plane(0, x, np.array([-big, -big, 0.0]), np.array([big, big, 9.0]))
    prop = np.random.default_rng(7)  # the street itself is the same for every sweep
    for _ in range(14):  # parked cars, 4.2 x 1.8 x 1.5 m, on both kerbs
        cx, side = prop.uniform(-50, 80), prop.choice((-1.0, 1.0))
        cy = side * prop.uniform(4.0, 8.0)
        lo, hi = np.array([cx - 2.1, cy - 0.9, 0.0]), np.array([cx + 2.1, cy + 0.9, 1.5])
        for axis in range(3):
            for v in (lo[axis], hi[axis]):
                plane(axis, v, lo - 1e-6, hi + 1e-6)
    for _ in range(10):  # poles, 0.25 m square, 7 m high
        cx, cy = prop.uniform(-50, 80), prop.choice((-1.0, 1.0)) * 9.5
        lo, hi = np.array([cx - 0.125, cy - 0.125, 0.0]), np.array([cx + 0.125, cy + 0.125, 7.0])
        for axis in range(2):
            for v in (lo[axis], hi[axis]):
                plane(axis, v, lo - 1e-6, hi + 1e-6)
    ok = np.isfinite(t) & (t < 80.0)
    result: np.ndarray = o + d[ok] * t[ok, None] + rng.normal(0, 0.01, (int(ok.sum()), 3))
    return result


def lidar_coords(
    target: int, *, seed: int = 0, beams: int = 64, azimuths: int = 2048
) -> np.ndarray:
    """(n, 4) int32 voxel rows ``(batch 0, x, y, z)``: sweeps added until about ``target`` voxels.

    Each sweep moves the sensor 6 m down the street; voxels are distinct and
    shifted to start at 0 on every axis.  Deterministic for a seed.
    """
    if target <= 0:
        raise ValueError(f"lidar_coords: target must be positive, got {target}")
    rng = np.random.default_rng(seed)
    packed = np.empty(0, dtype=np.int64)
    sweep = 0
    # cells packed into one int64 (21 bits an axis, offset to non-negative): a 1-D unique
    while packed.shape[0] < target and sweep < 64:
        cells = np.floor(_sweep(rng, 6.0 * sweep, beams, azimuths) / _VOXEL).astype(np.int64)
        cells += 1 << 20
        fresh = (cells[:, 0] << 42) | (cells[:, 1] << 21) | cells[:, 2]
        packed = np.unique(np.concatenate([packed, fresh]))
        sweep += 1
    mask = (1 << 21) - 1
    keys = np.stack([packed >> 42, (packed >> 21) & mask, packed & mask], 1) - (1 << 20)
    if keys.shape[0] > target:  # keep a spatially whole subset: the cells nearest the first pose
        dist = np.abs(keys[:, 0] * _VOXEL) + np.abs(keys[:, 1] * _VOXEL)
        keys = keys[np.sort(np.argsort(dist, kind="stable")[:target])]
    keys -= keys.min(axis=0)
    rows = np.concatenate([np.zeros((keys.shape[0], 1), dtype=np.int64), keys], 1)
    return rows.astype(np.int32)
