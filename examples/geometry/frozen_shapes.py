"""The geometry codec's frozen test set: four generator families nothing was tuned or trained on.

Committed before the codec's neural mixing was built, and never run while it
was tuned: no constant of the codec and no weight of the model was chosen
on these clouds.  ``codec_table.py --frozen`` measures them once, with the
finished codec (seed :data:`FROZEN_SEED`, Levels 8 and 10, sparse and dense).

* ``lattice_truss``: a rotated cubic lattice of thin struts with diagonal
  braces (many one-voxel beams crossing at nodes; the held-out wires are a
  knot, three rods and a helix, the training curves random polylines);
* ``stacked_parts``: three to five plates stacked along a tilted axis, each
  with a grid of round through holes whose walls are sampled, and
  cylindrical spacers between them (the held-out part is one box, a boss and
  a bore);
* ``room_scan``: a single-view depth image from *inside* a room (floor,
  ceiling, three walls) cluttered with boxes, columns and a table, with
  range noise, random dropouts and patchy dropouts (missing blocks of pixels,
  as dark or glossy surfaces give); the held-out scan looks at a few spheres
  from outside;
* ``tree``: a recursively branching plant, tapering cylindrical branches
  with small leaf discs at the tips.

Vectorised NumPy; loops run over primitives (struts, plates, branches), never
over points.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["FROZEN", "FROZEN_CASES", "FROZEN_SEED"]

FROZEN_SEED = 11
_MAX = 1_000_000  # surface samples per cloud at most (Level 10 dense)


def _vox(p: np.ndarray, levels: int) -> np.ndarray:
    side = 1 << levels
    v = np.floor(p * side).astype(np.int64)
    v = v[np.all((v >= 0) & (v < side), axis=1)]
    return np.unique(v, axis=0)


def _n(levels: int, area: float, sparse: bool) -> int:
    """Samples for a surface of ``area`` (unit cube): 0.3 per voxel face if sparse, else 3."""
    per = 0.3 if sparse else 3.0
    return int(min(_MAX, max(2_000, per * area * (1 << levels) ** 2)))


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _frame(axis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors perpendicular to ``axis`` and to each other."""
    a = axis / np.linalg.norm(axis)
    helper = np.array([1.0, 0, 0]) if abs(a[0]) < 0.9 else np.array([0, 1.0, 0])
    u = np.cross(a, helper)
    u /= np.linalg.norm(u)
    return u, np.cross(a, u)


def _cylinders(
    starts: np.ndarray, ends: np.ndarray, radii: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` samples on the side surfaces of cylinders, shared in proportion to their areas."""
    axes = ends - starts
    length = np.linalg.norm(axes, axis=1)
    area = 2 * math.pi * radii * length
    which = rng.choice(len(starts), size=n, p=area / area.sum())
    t = rng.uniform(size=n)
    ang = rng.uniform(0, 2 * math.pi, n)
    frames = np.array([np.stack(_frame(a)) for a in axes])  # (k, 2, 3)
    u, v = frames[which, 0], frames[which, 1]
    r = radii[which][:, None]
    return (
        starts[which]
        + t[:, None] * axes[which]
        + r * (np.cos(ang)[:, None] * u + np.sin(ang)[:, None] * v)
    )


def lattice_truss(levels: int, rng: np.random.Generator, sparse: bool) -> np.ndarray:
    """A rotated cubic lattice of struts (radius about one voxel at Level 8) with braces."""
    cells = int(rng.integers(4, 6))
    g = np.arange(cells + 1) / cells
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    idx = np.arange(len(pts)).reshape(cells + 1, cells + 1, cells + 1)
    pairs = [
        np.c_[idx[:-1].ravel(), idx[1:].ravel()],
        np.c_[idx[:, :-1].ravel(), idx[:, 1:].ravel()],
        np.c_[idx[:, :, :-1].ravel(), idx[:, :, 1:].ravel()],
        np.c_[idx[:-1, :-1, :].ravel(), idx[1:, 1:, :].ravel()],  # braces in the xy faces
    ]
    edges = np.concatenate(pairs)
    keep = rng.uniform(size=len(edges)) > 0.15  # some struts missing
    edges = edges[keep]
    a, b = pts[edges[:, 0]], pts[edges[:, 1]]
    radius = np.full(len(edges), 0.6 / 256) * rng.uniform(0.8, 2.0, len(edges))
    length = np.linalg.norm(b - a, axis=1)
    n = _n(levels, float((2 * math.pi * radius * length).sum()) * 0.4, sparse)
    p = _cylinders(a, b, radius, n, rng)
    rot = _rotation(rng)
    p = (p - 0.5) @ rot.T * 0.55 + 0.5
    return _vox(p, levels)


def _plate(
    centre: np.ndarray,
    frame: tuple[np.ndarray, np.ndarray, np.ndarray],
    size: float,
    thick: float,
    holes: np.ndarray,
    hole_r: float,
    n: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """A square plate (top, bottom and rim faces) with round through holes, hole walls too."""
    u, v, w = frame
    face = rng.uniform(-size / 2, size / 2, (n, 2))
    d = np.linalg.norm(face[:, None, :] - holes[None], axis=2)
    face = face[np.all(d > hole_r, axis=1)]
    side = np.where(rng.uniform(size=len(face)) < 0.5, -thick / 2, thick / 2)
    top = centre + face[:, :1] * u + face[:, 1:] * v + side[:, None] * w
    m = n // 6
    s = rng.uniform(-size / 2, size / 2, m)
    h = rng.uniform(-thick / 2, thick / 2, m)
    edge = rng.integers(0, 4, m)
    x = np.where(edge < 2, np.where(edge == 0, -size / 2, size / 2), s)
    y = np.where(edge < 2, s, np.where(edge == 2, -size / 2, size / 2))
    rim = centre + x[:, None] * u + y[:, None] * v + h[:, None] * w
    k = n // 4
    which = rng.integers(0, len(holes), k)
    ang = rng.uniform(0, 2 * math.pi, k)
    hh = rng.uniform(-thick / 2, thick / 2, k)
    hx = holes[which, 0] + hole_r * np.cos(ang)
    hy = holes[which, 1] + hole_r * np.sin(ang)
    wall = centre + hx[:, None] * u + hy[:, None] * v + hh[:, None] * w
    return np.concatenate([top, rim, wall])


def stacked_parts(levels: int, rng: np.random.Generator, sparse: bool) -> np.ndarray:
    """Three to five holed plates stacked along a tilted axis, with cylindrical spacers."""
    plates = int(rng.integers(3, 6))
    axis = np.array([0.0, 0.0, 1.0]) + rng.normal(scale=0.25, size=3)
    axis /= np.linalg.norm(axis)
    u, v = _frame(axis)
    spin = rng.uniform(0, math.pi / 2)
    u, v = math.cos(spin) * u + math.sin(spin) * v, -math.sin(spin) * u + math.cos(spin) * v
    size, gap = 0.6, 0.7 / plates
    n = _n(levels, plates * 2 * size * size, sparse) // plates
    parts = []
    for i in range(plates):
        centre = np.array([0.5, 0.5, 0.5]) + (i - (plates - 1) / 2) * gap * axis
        grid = int(rng.integers(2, 5))
        g = (np.arange(grid) + 0.5) / grid * size - size / 2
        holes = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
        hole_r = float(rng.uniform(0.2, 0.35)) * size / grid
        thick = float(rng.uniform(0.02, 0.06))
        parts.append(_plate(centre, (u, v, axis), size, thick, holes, hole_r, n, rng))
    corners = np.array([[-1, -1], [-1, 1], [1, -1], [1, 1]]) * size * 0.42
    lo = np.array([0.5, 0.5, 0.5]) - (plates - 1) / 2 * gap * axis
    hi = np.array([0.5, 0.5, 0.5]) + (plates - 1) / 2 * gap * axis
    off = corners[:, :1] * u + corners[:, 1:] * v
    parts.append(_cylinders(lo + off, hi + off, np.full(4, 0.015), n // 3, rng))
    return _vox(np.concatenate(parts), levels)


def _ray_boxes(o: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Entry distance of rays ``d`` (n, 3) from ``o`` into the boxes ``lo``/``hi`` (k, 3)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d[:, None, :]
        t1 = (lo[None] - o) * inv
        t2 = (hi[None] - o) * inv
    tmin = np.nanmax(np.minimum(t1, t2), axis=2)
    tmax = np.nanmin(np.maximum(t1, t2), axis=2)
    hit = (tmax >= tmin) & (tmin > 1e-6)
    out: np.ndarray = np.where(hit, tmin, np.inf).min(axis=1)
    return out


def room_scan(levels: int, rng: np.random.Generator, sparse: bool) -> np.ndarray:
    """A depth image from inside a cluttered room: noise, dropouts and missing patches."""
    w, h = (360, 270) if sparse else (1280, 960) if levels >= 10 else (640, 480)
    yaw = rng.uniform(-0.5, 0.5)
    uu, vv = np.meshgrid((np.arange(w) + 0.5) / w - 0.5, (np.arange(h) + 0.5) / h - 0.5)
    d = np.stack([uu.ravel() * 1.6, vv.ravel() * 1.2, np.ones(uu.size)], 1)
    c, s = math.cos(yaw), math.sin(yaw)
    d = d @ np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]).T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    o = np.array([0.5, 0.45, 0.08]) + rng.uniform(-0.05, 0.05, 3)
    room_lo, room_hi = np.array([0.02, 0.1, 0.02]), np.array([0.98, 0.9, 0.98])
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (room_lo - o) / d, (room_hi - o) / d
    t = np.nanmin(np.where(np.maximum(t1, t2) > 0, np.maximum(t1, t2), np.inf), axis=1)
    k = int(rng.integers(6, 10))
    lo = np.c_[rng.uniform(0.05, 0.8, k), np.full(k, 0.0), rng.uniform(0.3, 0.85, k)]
    size = rng.uniform(0.05, 0.2, (k, 3))
    lo[:, 1] = room_hi[1] - size[:, 1]  # standing on the floor (y down)
    boxes = (lo, lo + size)
    cols = np.c_[rng.uniform(0.1, 0.9, 2), rng.uniform(0.5, 0.9, 2)]
    col_lo = np.c_[cols[:, 0] - 0.03, np.full(2, room_lo[1]), cols[:, 1] - 0.03]
    col_hi = np.c_[cols[:, 0] + 0.03, np.full(2, room_hi[1]), cols[:, 1] + 0.03]
    top_lo = np.array([[0.35, 0.62, 0.55]])  # a table top and its legs
    top_hi = np.array([[0.65, 0.64, 0.75]])
    legs = np.array([[0.36, 0.56], [0.62, 0.56], [0.36, 0.72], [0.62, 0.72]])
    leg_lo = np.c_[legs[:, 0], np.full(4, 0.64), legs[:, 1]]
    leg_hi = leg_lo + np.array([0.02, room_hi[1] - 0.64, 0.02])
    blo = np.concatenate([boxes[0], col_lo, top_lo, leg_lo])
    bhi = np.concatenate([boxes[1], col_hi, top_hi, leg_hi])
    for start in range(0, len(d), 200_000):  # bounded memory for the (rays, boxes) arrays
        sl = slice(start, start + 200_000)
        t[sl] = np.minimum(t[sl], _ray_boxes(o, d[sl], blo, bhi))
    pts = o + d * t[:, None]
    pts += rng.normal(scale=0.8 / (1 << levels), size=pts.shape) * t[:, None]
    keep = np.isfinite(t) & (rng.uniform(size=len(t)) > 0.08)
    # patchy dropouts: a coarse random mask of missing 16x16-pixel blocks
    bw, bh = (w + 15) // 16, (h + 15) // 16
    holes = rng.uniform(size=(bh, bw)) < 0.12
    py, px = np.divmod(np.arange(w * h), w)
    keep &= ~holes[py // 16, px // 16]
    return _vox(pts[keep], levels)


def tree(levels: int, rng: np.random.Generator, sparse: bool) -> np.ndarray:
    """A branching plant: tapering branches (five generations) and leaf discs at the tips."""
    starts, ends, radii = [], [], []
    tips = [(np.array([0.5, 0.5, 0.03]), np.array([0.0, 0.0, 1.0]), 0.28, 0.025)]
    for _gen in range(5):
        nxt = []
        for base, direction, length, radius in tips:
            end = base + direction * length
            starts.append(base)
            ends.append(end)
            radii.append(radius)
            for _ in range(int(rng.integers(2, 4))):
                turn = direction + rng.normal(scale=0.6, size=3)
                turn[2] = abs(turn[2]) * 0.6 + 0.2
                nxt.append((end, turn / np.linalg.norm(turn), length * 0.68, radius * 0.62))
        tips = nxt
    a, b, r = np.array(starts), np.array(ends), np.array(radii)
    area = float((2 * math.pi * r * np.linalg.norm(b - a, axis=1)).sum())
    n = _n(levels, area, sparse)
    wood = _cylinders(a, b, r, n, rng)
    leaf_c = np.array([t[0] for t in tips])
    m = _n(levels, len(tips) * math.pi * 0.012**2, sparse)
    which = rng.integers(0, len(leaf_c), m)
    normals = rng.normal(size=(len(leaf_c), 3))
    frames = np.array([np.stack(_frame(nm)) for nm in normals])
    rr = 0.012 * np.sqrt(rng.uniform(size=m))
    ang = rng.uniform(0, 2 * math.pi, m)
    leaves = leaf_c[which] + rr[:, None] * (
        np.cos(ang)[:, None] * frames[which, 0] + np.sin(ang)[:, None] * frames[which, 1]
    )
    p = np.concatenate([wood, leaves])
    lo, hi = p.min(0), p.max(0)
    p = (p - lo) / float((hi - lo).max()) * 0.94 + 0.03
    return _vox(p, levels)


FROZEN: dict[str, Callable[[int, np.random.Generator, bool], np.ndarray]] = {
    "lattice_truss": lattice_truss,
    "stacked_parts": stacked_parts,
    "room_scan": room_scan,
    "tree": tree,
}
FROZEN_CASES = [(lv, name, sparse) for lv in (8, 10) for name in FROZEN for sparse in (True, False)]
