"""MLX occupancy utilities against the torch runtime and worked cases.

What both runtimes must do alike (the brute-force oracle of downsampling and
expansion, the bit order, bad inputs and their messages) is tested once, on
both, in lattice-conformance/tests/test_occupancy_oracle.py; this file
compares whole hierarchies and quantisation with torch's.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lattice.occupancy import (
    expand_occupancy,
    morton_sort,
    occupancy_hierarchy,
    quantize_points,
)

Row = tuple[int, ...]


def morton_rank(row: Row) -> tuple[int, str]:
    """(batch, interleaved bit string): SPEC §4 spelled out with string formatting."""
    bits = [format(v + (1 << 31), "032b") for v in row[1:]]
    return (row[0], "".join(bits[0][i] + bits[1][i] + bits[2][i] for i in range(32)))


def rows_of(a: mx.array) -> list[Row]:
    return [tuple(int(v) for v in r) for r in np.asarray(a).tolist()]


coords_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-20, 20), st.integers(-20, 20), st.integers(-20, 20)),
    max_size=60,
)


def as_coords(rows: list[Row]) -> mx.array:
    return mx.array(np.asarray(rows, dtype=np.int32).reshape(-1, 4))


@settings(max_examples=25, deadline=None)
@given(coords_strategy)
def test_same_levels_codes_and_order_as_torch(rows: list[Row]) -> None:
    torch = pytest.importorskip("torch")
    from torch_lattice import occupancy as reference

    coords = np.asarray(rows, dtype=np.int32).reshape(-1, 4)
    ours = occupancy_hierarchy(mx.array(coords), 5)
    theirs = reference.occupancy_hierarchy(torch.from_numpy(coords), 5)
    for a, b in zip(ours.levels, theirs.levels, strict=True):
        assert np.array_equal(np.asarray(a), b.numpy())
    for a, b in zip(ours.codes, theirs.codes, strict=True):
        assert np.array_equal(np.asarray(a), b.numpy())


def test_hierarchy_round_trip_and_canonical_levels() -> None:
    rng = np.random.default_rng(1)
    coords = np.zeros((800, 4), dtype=np.int32)
    coords[:, 1:] = rng.integers(0, 128, (800, 3))
    coords[:, 0] = rng.integers(0, 2, 800)
    h = occupancy_hierarchy(mx.array(coords), 7)
    assert h.counts()[0] == 2  # one root per batch item
    for level in range(7):
        assert rows_of(h.levels[level]) == sorted(set(rows_of(h.levels[level])), key=morton_rank)
        children = expand_occupancy(h.levels[level], h.codes[level])
        assert np.array_equal(np.asarray(children), np.asarray(h.levels[level + 1]))
    assert rows_of(h.levels[7]) == sorted({tuple(r) for r in coords.tolist()}, key=morton_rank)
    shuffled = mx.array(coords[::-1].copy())  # morton_sort keeps repeated rows
    assert rows_of(morton_sort(shuffled)) == sorted(map(tuple, coords.tolist()), key=morton_rank)


def test_quantize_points_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    from torch_lattice.occupancy import quantize_points as reference

    rng = np.random.default_rng(5)
    for points, levels in (
        (rng.normal(size=(2000, 3)) * 40 + 1e4, 8),
        (rng.integers(0, 256, (500, 3)).astype(np.float64), 8),
        (rng.random((300, 3)) * 1e-3, 5),
    ):
        ours = np.asarray(quantize_points(points, levels))
        theirs = reference(torch.from_numpy(points), levels).numpy()
        assert np.array_equal(ours, theirs)
        assert ours[:, 1:].min() >= 0 and ours[:, 1:].max() < (1 << levels)
