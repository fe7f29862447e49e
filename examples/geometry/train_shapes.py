"""Procedural training clouds for the geometry model: six families, several densities, Levels 8-11.

Every generator takes the level, a NumPy generator and a sampling density
(surface samples per voxel face area; about 0.3 is sparse, 4 dense) and
returns unique integer voxels in ``[0, 2^level)^3``.  The families are chosen
to be *unlike* the held-out clouds of ``codec_table.py`` while covering the
same kinds of geometry:

* ``superquadric``: closed surfaces, random radii (axis ratio at least 1.3,
  so never the held-out sphere), exponents and rotation;
* ``height_field``: open surfaces, random sums of sinusoids over a rotated
  rectangle with elliptic cut-outs (the held-out plane is flat with round holes);
* ``curves``: thin structures, random polylines, Lissajous curves and rotated
  trusses (the held-out wires are a torus knot, axis-aligned rods and a helix);
* ``cad``: unions of boxes and capped cylinders, slots and steps, axis-aligned
  or rotated about one axis (the held-out part is one box, a boss and a bore);
* ``scan``: single-view depth images of random boxes, ellipsoids and tilted
  planes from a random viewpoint, with depth-squared noise, dropouts and
  occlusion holes (the held-out scan is one fixed scene and viewpoint);
* ``rooms``: the project's generated rooms (``lattice_conformance.scenes``).

All of it is vectorised NumPy; a cloud takes well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

MAX_SAMPLES = 600_000  # default cap on a cloud's surface samples (Level 11 surfaces are sparser)

Generator = Callable[[int, np.random.Generator, float, int], np.ndarray]
"""``(level, rng, density, max_samples) -> voxels``."""


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _count(level: int, area: float, density: float, max_samples: int) -> int:
    return int(min(max_samples, max(2_000, density * area * (1 << level) ** 2)))


def _vox(p: np.ndarray, level: int) -> np.ndarray:
    side = 1 << level
    v = np.floor(p * side).astype(np.int64)
    v = v[np.all((v >= 0) & (v < side), axis=1)]
    return np.unique(v, axis=0)


def _fit(p: np.ndarray, rng: np.random.Generator, margin: float = 0.02) -> np.ndarray:
    """Scale uniformly into the unit cube with a random fill of 60-98 % and offset."""
    lo, hi = p.min(0), p.max(0)
    span = float((hi - lo).max()) or 1.0
    fill = rng.uniform(0.6, 0.98)
    q = (p - lo) / span * fill
    room = np.maximum(1 - margin - q.max(0), margin)
    return q + rng.uniform(margin, room)


def superquadric(
    level: int, rng: np.random.Generator, density: float, max_samples: int
) -> np.ndarray:
    radii = rng.uniform(0.15, 0.45, 3)
    while radii.max() / radii.min() < 1.3:
        radii = rng.uniform(0.15, 0.45, 3)
    e1, e2 = rng.uniform(0.3, 1.8, 2)
    area = 4 * math.pi * float(np.prod(radii)) ** (2 / 3)
    n = _count(level, area, density, max_samples)
    eta = rng.uniform(-math.pi / 2, math.pi / 2, n)
    om = rng.uniform(-math.pi, math.pi, n)

    def f(a: np.ndarray, e: float) -> np.ndarray:
        return np.sign(a) * np.abs(a) ** e

    p = np.c_[
        f(np.cos(eta), e1) * f(np.cos(om), e2),
        f(np.cos(eta), e1) * f(np.sin(om), e2),
        f(np.sin(eta), e1),
    ]
    return _vox(_fit((p * radii) @ _rotation(rng).T, rng), level)


def height_field(
    level: int, rng: np.random.Generator, density: float, max_samples: int
) -> np.ndarray:
    w, h = rng.uniform(0.4, 1.0, 2)
    n = _count(level, 1.3 * w * h, density, max_samples)
    uv = rng.uniform(0, 1, (n, 2)) * [w, h]
    z = np.zeros(n)
    for _ in range(int(rng.integers(1, 5))):
        k = rng.normal(size=2) * rng.uniform(2, 12)
        z += rng.uniform(0.01, 0.08) * np.sin(uv @ k + rng.uniform(0, 2 * math.pi))
    keep = np.ones(n, bool)
    for _ in range(int(rng.integers(0, 6))):  # elliptic cut-outs
        c, ax = rng.uniform(0, 1, 2) * [w, h], rng.uniform(0.02, 0.12, 2)
        keep &= (((uv - c) / ax) ** 2).sum(1) > 1
    p = np.c_[uv, z][keep]
    return _vox(_fit(p @ _rotation(rng).T, rng), level)


def curves(level: int, rng: np.random.Generator, density: float, max_samples: int) -> np.ndarray:
    side = 1 << level
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        kind = int(rng.integers(3))
        if kind == 0:  # polyline
            pts = rng.uniform(0.05, 0.95, (int(rng.integers(3, 9)), 3))
            m = int(6 * side * density)
            s = rng.integers(len(pts) - 1, size=m)
            t = rng.uniform(size=(m, 1))
            parts.append(pts[s] + t * (pts[s + 1] - pts[s]))
        elif kind == 1:  # Lissajous curve
            a = rng.integers(1, 6, 3)
            ph = rng.uniform(0, 2 * math.pi, 3)
            t = rng.uniform(0, 2 * math.pi, int(20 * side * density))
            parts.append(0.5 + 0.4 * np.sin(a * t[:, None] + ph))
        else:  # a rotated truss: a small lattice of rods
            g = int(rng.integers(2, 4))
            ends = np.stack(np.meshgrid(*[np.linspace(-0.3, 0.3, g)] * 2), -1).reshape(-1, 2)
            m = int(3 * side * density)
            rods = []
            for ax in range(3):
                e = ends[rng.integers(len(ends), size=m)]
                t = rng.uniform(-0.3, 0.3, m)
                rods.append(np.insert(e, ax, t, axis=1))
            parts.append(0.5 + np.concatenate(rods) @ _rotation(rng).T)
    p = np.concatenate(parts)
    p += rng.normal(scale=rng.uniform(0, 0.7) / side, size=p.shape)  # 0-1 voxel thick
    return _vox(_fit(p, rng), level)


def _box_surface(lo: np.ndarray, hi: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    size = hi - lo
    areas = np.array([size[1] * size[2], size[0] * size[2], size[0] * size[1]]).repeat(2)
    face = rng.choice(6, size=n, p=areas / areas.sum())
    q = rng.uniform(lo, hi, (n, 3))
    ax = face // 2
    q[np.arange(n), ax] = np.where(face % 2, hi[ax], lo[ax])
    return q


def cad(level: int, rng: np.random.Generator, density: float, max_samples: int) -> np.ndarray:
    pieces = []
    areas = []
    for _ in range(int(rng.integers(2, 6))):
        lo = rng.uniform(0.05, 0.6, 3)
        hi = lo + rng.uniform(0.05, 0.4, 3)
        if rng.uniform() < 0.65:
            pieces.append(("box", lo, hi))
            s = hi - lo
            areas.append(2 * (s[0] * s[1] + s[1] * s[2] + s[0] * s[2]))
        else:
            pieces.append(("cyl", lo, hi))
            r = float((hi - lo)[:2].min()) / 2
            areas.append(2 * math.pi * r * (hi - lo)[2] + 2 * math.pi * r * r)
    n = _count(level, float(sum(areas)), density, max_samples)
    pts = []
    for (kind, lo, hi), a in zip(pieces, areas, strict=True):
        m = max(100, int(n * a / sum(areas)))
        if kind == "box":
            pts.append(_box_surface(lo, hi, m, rng))
        else:
            c, r = (lo[:2] + hi[:2]) / 2, float((hi - lo)[:2].min()) / 2
            ang = rng.uniform(0, 2 * math.pi, m)
            side_m = int(m * 0.7)
            rr = np.r_[np.full(side_m, r), r * np.sqrt(rng.uniform(size=m - side_m))]
            caps = np.where(rng.uniform(size=m - side_m) < 0.5, lo[2], hi[2])
            z = np.r_[rng.uniform(lo[2], hi[2], side_m), caps]
            pts.append(np.c_[c[0] + rr * np.cos(ang), c[1] + rr * np.sin(ang), z])
    p = np.concatenate(pts)
    if rng.uniform() < 0.5:  # a slot through everything
        ax = int(rng.integers(2))
        at, half = rng.uniform(0.2, 0.8), rng.uniform(0.02, 0.08)
        p = p[np.abs(p[:, ax] - at) > half]
    if rng.uniform() < 0.5:  # rotated about z: faces no longer on the grid
        a = rng.uniform(0, math.pi / 2)
        rot = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
        p = p @ rot.T
    return _vox(_fit(p, rng), level)


def scan(level: int, rng: np.random.Generator, density: float, max_samples: int) -> np.ndarray:
    side = 1 << level
    res = int(np.clip(math.sqrt(density) * side * rng.uniform(0.5, 1.0), 64, 900))
    w, h = res, int(res * rng.uniform(0.6, 0.9))
    u, v = np.meshgrid((np.arange(w) + 0.5) / w - 0.5, (np.arange(h) + 0.5) / h - 0.5)
    fov = rng.uniform(0.8, 1.6)
    d = np.stack([u.ravel() * fov, v.ravel() * fov * h / w, np.ones(u.size)], 1)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    d = d @ _rotation_small(rng).T
    o = np.array([rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(-0.8, -0.3)])
    t = np.full(len(d), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(int(rng.integers(1, 3))):  # tilted planes (floor / back wall)
            nrm = rng.normal(size=3) * [0.3, 1, 0.3] if rng.uniform() < 0.5 else [0, 0, -1.0]
            nrm = np.asarray(nrm) / np.linalg.norm(nrm)
            p0 = rng.uniform(0.3, 1.0, 3)
            tp = ((p0 - o) @ nrm) / (d @ nrm)
            t = np.where((tp > 0) & (tp < t), tp, t)
        for _ in range(int(rng.integers(1, 5))):  # ellipsoids
            c, r = rng.uniform(0.2, 0.9, 3), rng.uniform(0.05, 0.2, 3)
            oc, dd = (o - c) / r, d / r
            a = (dd * dd).sum(1)
            b = (dd * oc).sum(1)
            disc = b * b - a * ((oc * oc).sum() - 1)
            ts = (-b - np.sqrt(np.maximum(disc, 0))) / a
            t = np.where((disc > 0) & (ts > 0) & (ts < t), ts, t)
        for _ in range(int(rng.integers(0, 4))):  # axis-aligned boxes (slab test)
            lo = rng.uniform(0.1, 0.8, 3)
            hi = lo + rng.uniform(0.05, 0.3, 3)
            t1, t2 = (lo - o) / d, (hi - o) / d
            tn, tf = np.minimum(t1, t2).max(1), np.maximum(t1, t2).min(1)
            hit = (tn <= tf) & (tn > 0) & (tn < t)
            t = np.where(hit, tn, t)
    keep = np.isfinite(t) & (rng.uniform(size=len(t)) > rng.uniform(0.0, 0.15))
    pts = o + d[keep] * t[keep, None]
    noise = rng.uniform(0.2, 1.5) / side
    pts += d[keep] * rng.normal(scale=noise, size=(len(pts), 1)) * (1 + t[keep, None] ** 2)
    pts = pts[np.all((pts > 0) & (pts < 1), axis=1)]
    return _vox(pts, level) if len(pts) else _vox(rng.uniform(size=(100, 3)), level)


def _rotation_small(rng: np.random.Generator) -> np.ndarray:
    ax = rng.normal(size=3)
    ax /= np.linalg.norm(ax)
    a = rng.uniform(-0.3, 0.3)
    k = np.array([[0, -ax[2], ax[1]], [ax[2], 0, -ax[0]], [-ax[1], ax[0], 0]])
    return np.eye(3) + math.sin(a) * k + (1 - math.cos(a)) * k @ k


def rooms(level: int, rng: np.random.Generator, density: float, max_samples: int) -> np.ndarray:
    from lattice_conformance.scenes import make_scene

    side = 1 << level
    target = int(min(max_samples // 3, density * 0.3 * side * side, 60 * side * side // 256))
    coords, _ = make_scene(max(target, 2_000), grid=side, seed=int(rng.integers(1 << 30)))
    return np.unique(coords.astype(np.int64), axis=0)


FAMILIES: dict[str, Generator] = {
    "superquadric": superquadric,
    "height_field": height_field,
    "curves": curves,
    "cad": cad,
    "scan": scan,
    "rooms": rooms,
}


def training_cloud(
    index: int, seed: int, levels: tuple[int, ...], max_samples: int = MAX_SAMPLES
) -> tuple[str, int, np.ndarray]:
    """The ``index``-th training cloud: ``(family, level, voxels)``, deterministic in the seed.

    ``max_samples`` caps the surface samples of one cloud (the generators that
    sample a surface; curves and scans are sized by the level alone).

    Families and levels cycle so that every family meets every level; the
    density is log-uniform in ``[0.25, 4]`` samples per voxel face.
    """
    rng = np.random.default_rng([seed, index])
    name = list(FAMILIES)[index % len(FAMILIES)]
    level = levels[(index // len(FAMILIES)) % len(levels)]
    density = float(np.exp(rng.uniform(math.log(0.25), math.log(4.0))))
    vox = FAMILIES[name](level, rng, density, max_samples)
    return name, level, vox
