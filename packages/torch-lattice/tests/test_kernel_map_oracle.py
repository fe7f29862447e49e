"""CPU kernel maps against a brute-force oracle written here, on inputs that reach the edges.

The oracle does not use the code under test: it places the rows in a dense
grid (or, for boxes too large for one, a dict), and for every output row
and tap looks up the input coordinate the relation names (submanifold:
``c = o + (k - floor((K-1)/2)) * d``; strided ``conv3d``: output rows are the
distinct ``floor(c / s)`` in (batch, x, y, z) order and ``c = o*s + off_c(k)
- p`` with ``off_c(k) = (k - K//2)*d`` for odd K and ``k*d`` for even K).
Every map must hold exactly the oracle's (tap, input, output) triples, give
the oracle's output rows in the oracle's order, keep its sortedness promises
and come out the same when built twice.

Inputs: voxels on every face, edge and corner of a box; several batch items;
negative coordinates; rows out of key order; a LiDAR-like mix of a dense
ground plane and sparse returns; coordinates at the int32 limits; a box so
wide that the lookup table cannot pad it (queries leave the packed box); one
row; no rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch_lattice import kernel_map as km
from torch_lattice.sparse import Support

Triple = tuple[int, int, int]
Triples = set[tuple[int, int, int]]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _faces() -> np.ndarray:
    """Every voxel on the surface of two boxes (batch 0 and 2), one of them at negative x."""
    parts = []
    for b, lo, shape in ((0, (-3, 0, 2), (6, 5, 4)), (2, (10, -7, -1), (3, 4, 5))):
        grid = np.indices(shape).reshape(3, -1).T
        on_face = ((grid == 0) | (grid == np.array(shape) - 1)).any(axis=1)
        pts = grid[on_face] + np.array(lo)
        parts.append(np.concatenate([np.full((len(pts), 1), b), pts], axis=1))
    return np.concatenate(parts)


def _lidar(seed: int) -> np.ndarray:
    """A dense ground plane with holes plus sparse returns above it, three batch items, shuffled."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(3):
        xy = np.indices((20, 20)).reshape(2, -1).T - 10
        keep = rng.random(len(xy)) < 0.8
        ground = np.concatenate([xy[keep], np.full((int(keep.sum()), 1), -2)], axis=1)
        sparse = rng.integers(-30, 30, size=(150, 3))
        pts = np.concatenate([ground, sparse])
        rows.append(np.concatenate([np.full((len(pts), 1), b), pts], axis=1))
    out = np.unique(np.concatenate(rows), axis=0)
    return out[rng.permutation(len(out))]


def _random(seed: int, n: int, span: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pts = rng.integers(-span, span, size=(2 * n, 4))
    pts[:, 0] = rng.integers(0, 4, size=2 * n)
    out = np.unique(pts, axis=0)[:n]
    return out[rng.permutation(len(out))]


def _int32_limits(axis: int) -> np.ndarray:
    """Voxels at the most negative and most positive int32 coordinates of one axis.

    That axis spans all of int32 (2^32 cells); a box that wide on several axes
    is the contract's span error, not a map.  Two batch items.
    """
    rows = []
    for b in (0, 1):
        for v in (I32_MIN, I32_MIN + 1, I32_MAX - 1, I32_MAX):
            for w in (0, 1):
                row = [b, w, -w, 1]
                row[axis + 1] = v
                rows.append(row)
    return np.unique(np.array(rows, dtype=np.int64), axis=0)


def _wide() -> np.ndarray:
    """A box of 2^61 cells: the table drops its margin, so taps leave the packed box."""
    x = np.array([-(2**30), -(2**30) + 1, 2**30 - 1, 0, 0, 1])
    y = np.array([0, 0, 2**30 - 1, 5, 6, 5])
    return np.stack([np.zeros(6, dtype=np.int64), x, y, np.zeros(6, dtype=np.int64)], axis=1)


CASES: dict[str, Callable[[], np.ndarray]] = {
    "faces": _faces,
    "faces_shuffled": lambda: _faces()[np.random.default_rng(3).permutation(len(_faces()))],
    "lidar": lambda: _lidar(1),
    "negative": lambda: _random(7, 400, 9),
    "int32_x": lambda: _int32_limits(0),
    "int32_z": lambda: _int32_limits(2),
    "wide": _wide,
    "one_row": lambda: np.array([[3, -5, 7, -1]]),
    "empty": lambda: np.zeros((0, 4), dtype=np.int64),
}


def _lookup(rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Row index of each query (b, x, y, z), -1 where absent: a dense grid, or a dict if too big."""
    if len(rows) == 0:
        return lambda q: np.full(len(q), -1)
    lo, hi = rows.min(axis=0), rows.max(axis=0)
    shape = hi - lo + 1
    if float(np.prod(shape.astype(np.float64))) <= 1 << 22:
        grid = np.full(tuple(int(v) for v in shape), -1, dtype=np.int64)
        grid[tuple((rows - lo).T)] = np.arange(len(rows))

        def dense(q: np.ndarray) -> np.ndarray:
            inside = ((q >= lo) & (q <= hi)).all(axis=1)
            found = np.full(len(q), -1, dtype=np.int64)
            found[inside] = grid[tuple((q[inside] - lo).T)]
            return found

        return dense
    table = {tuple(int(v) for v in r): i for i, r in enumerate(rows)}
    return lambda q: np.array([table.get(tuple(int(v) for v in r), -1) for r in q], dtype=np.int64)


def _taps(kernel: Triple) -> np.ndarray:
    return np.indices(kernel).reshape(3, -1).T  # tap k = (kx, ky, kz), z fastest


def _oracle_subm(rows: np.ndarray, kernel: Triple, dilation: Triple) -> list[Triples]:
    find = _lookup(rows)
    half = np.array([(k - 1) // 2 for k in kernel])
    per_tap = []
    for t in _taps(kernel):
        shift = np.concatenate([[0], (t - half) * np.array(dilation)])
        found = find(rows + shift)
        outs = np.flatnonzero(found >= 0)
        per_tap.append({(0, int(i), int(o)) for i, o in zip(found[outs], outs, strict=True)})
    return per_tap


def _oracle_conv(
    rows: np.ndarray, kernel: Triple, stride: Triple, padding: Triple
) -> tuple[np.ndarray, list[Triples]]:
    s = np.array((1, *stride))
    if stride == (1, 1, 1):  # the input support itself: same rows, same order
        out = rows
    else:  # distinct floor(c / s), lexicographic (batch, x, y, z) order = key order
        out = np.unique(np.floor_divide(rows, s), axis=0).reshape(-1, 4)
    find = _lookup(rows)
    per_tap = []
    for t in _taps(kernel):
        off = np.array([(t[a] - kernel[a] // 2) if kernel[a] % 2 else t[a] for a in range(3)])
        found = find(out * s + np.concatenate([[0], off - np.array(padding)]))
        outs = np.flatnonzero(found >= 0)
        per_tap.append({(0, int(i), int(o)) for i, o in zip(found[outs], outs, strict=True)})
    return out, per_tap


def _got(kmap: km.KernelMap) -> list[Triples]:
    per_tap = []
    for k in range(kmap.volume):
        a, b = kmap.tap(k)
        pairs = {(0, int(i), int(o)) for i, o in zip(a.tolist(), b.tolist(), strict=True)}
        if k == kmap.identity_tap:
            pairs = {(0, i, i) for i in range(kmap.num_out)}
        per_tap.append(pairs)
    return per_tap


def _check_promises(kmap: km.KernelMap) -> None:
    for k in range(kmap.volume):
        a, b = kmap.tap(k)
        if kmap.outputs_sorted:
            assert bool(torch.all(b[1:] > b[:-1])), f"tap {k}: outputs_sorted promised"
        if kmap.inputs_sorted:
            assert bool(torch.all(a[1:] > a[:-1])), f"tap {k}: inputs_sorted promised"


def _support(rows: np.ndarray) -> Support:
    return Support(torch.from_numpy(rows.astype(np.int32)).reshape(-1, 4), (1, 1, 1))


SUBM = [((3, 3, 3), (1, 1, 1)), ((3, 1, 5), (2, 1, 1)), ((2, 2, 2), (1, 1, 1))]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kernel,dilation", SUBM)
def test_subm_map_matches_oracle(case: str, kernel: Triple, dilation: Triple) -> None:
    rows = CASES[case]()
    kmap = km.subm_map(_support(rows), kernel, dilation)
    assert _got(kmap) == _oracle_subm(rows, kernel, dilation)
    assert kmap.num_in == kmap.num_out == len(rows)
    _check_promises(kmap)
    again = km.subm_map(_support(rows), kernel, dilation)
    assert torch.equal(kmap.in_idx, again.in_idx) and torch.equal(kmap.out_idx, again.out_idx)


CONV = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0)),  # windows tile the grid: no search
    ((1, 2, 1), (2, 2, 3), (0, 0, 0)),  # tiled, and taps past K feed nothing
    ((8, 8, 8), (8, 8, 8), (0, 0, 0)),  # tiled, 512 taps: more tap tags than a byte holds
    ((8, 8, 4), (8, 8, 8), (0, 0, 0)),  # tiled, 256 taps plus the "feeds nothing" tag
    ((2, 2, 2), (2, 2, 2), (1, 0, 0)),  # padded: a search at the coarsened rows
    ((3, 3, 3), (2, 2, 2), (1, 1, 1)),  # overlapping windows: a search
    ((3, 3, 3), (1, 1, 1), (1, 0, 2)),  # stride 1, not submanifold
]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kernel,stride,padding", CONV)
def test_conv_map_matches_oracle(
    case: str, kernel: Triple, stride: Triple, padding: Triple
) -> None:
    rows = CASES[case]()
    out, kmap = km.conv_map(_support(rows), kernel, stride, padding, (1, 1, 1))
    ref_out, ref = _oracle_conv(rows, kernel, stride, padding)
    assert np.array_equal(out.logical.numpy(), ref_out)
    assert _got(kmap) == ref
    assert (kmap.num_in, kmap.num_out) == (len(rows), len(ref_out))
    _check_promises(kmap)
    again_out, again = km.conv_map(_support(rows), kernel, stride, padding, (1, 1, 1))
    assert torch.equal(out.coords, again_out.coords)
    assert torch.equal(kmap.in_idx, again.in_idx) and torch.equal(kmap.out_idx, again.out_idx)
    assert kmap.starts == again.starts


def test_tiled_map_on_rows_in_key_order_promises_sorted_outputs() -> None:
    """Rows in key order: each tap's outputs increase, which the segmented executor relies on."""
    rows = np.unique(_lidar(4), axis=0)
    _, kmap = km.conv_map(_support(rows), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1))
    assert kmap.outputs_sorted and kmap.inputs_sorted
    _check_promises(kmap)
