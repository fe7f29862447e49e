"""Occupancy hierarchy utilities on torch: round trips, the Morton property, quantisation modes.

The cases both runtimes share (brute-force oracle, bit order, bad inputs with
their exact messages) run on both from lattice-conformance/tests/test_occupancy_oracle.py.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.frontend import morton_keys
from torch_lattice.occupancy import (
    downsample_occupancy,
    expand_occupancy,
    morton_sort,
    occupancy_hierarchy,
    quantize_points,
)

Row = tuple[int, int, int, int]


def morton_key(row: Row) -> tuple[int, int]:
    """(batch, 96-bit Morton code) from the contract's reference (itself checked bit by bit)."""
    _, high, low = morton_keys([row])
    return (row[0], (int(high[0]) << 48) | int(low[0]))


def as_rows(t: torch.Tensor) -> list[Row]:
    return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in t.tolist()]


coords_strategy = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(-20, 20),
        st.integers(-20, 20),
        st.integers(-20, 20),
    ),
    min_size=0,
    max_size=60,
)


@settings(max_examples=30, deadline=None)
@given(coords_strategy)
def test_expand_inverts_downsample_in_canonical_order(rows: list[Row]) -> None:
    coords = torch.tensor(rows, dtype=torch.int32).reshape(-1, 4)
    parents, codes = downsample_occupancy(coords)
    children = expand_occupancy(parents, codes)
    assert as_rows(children) == sorted(set(rows), key=morton_key)


def test_morton_order_refines_across_the_offset_boundaries() -> None:
    # Coordinates straddling 0 and large magnitudes near +-2^30, where the
    # 2^31 offset changes the high bit planes: the parent level that
    # downsampling returns without re-sorting must still be canonical.
    g = torch.Generator().manual_seed(3)
    edges = torch.tensor([0, -1, 1, (1 << 30) - 1, -(1 << 30), (1 << 29), -(1 << 29) - 1])
    base = edges[torch.randint(0, len(edges), (400, 3), generator=g)]
    jitter = torch.randint(-3, 4, (400, 3), generator=g)
    spatial = (base + jitter).clamp(-(1 << 30), (1 << 30) - 1)
    coords = torch.cat([torch.randint(0, 2, (400, 1), generator=g), spatial], dim=1).int()
    level = morton_sort(coords)
    for _ in range(4):
        level, _ = downsample_occupancy(level, assume_canonical=True)
        assert as_rows(level) == sorted(set(as_rows(level)), key=morton_key)


def test_hierarchy_of_a_grid_cloud_ends_in_one_root() -> None:
    g = torch.Generator().manual_seed(0)
    coords = torch.zeros((500, 4), dtype=torch.int32)
    coords[:, 1:] = torch.randint(0, 64, (500, 3), generator=g)
    h = occupancy_hierarchy(coords, 6)
    assert h.depth == 6 and h.counts()[0] == 1
    assert as_rows(h.levels[0]) == [(0, 0, 0, 0)]
    assert as_rows(h.levels[6]) == sorted(set(as_rows(coords)), key=morton_key)
    for level in range(6):
        assert torch.equal(expand_occupancy(h.levels[level], h.codes[level]), h.levels[level + 1])
        assert h.codes[level].numel() == h.counts()[level]


def test_quantize_points_modes() -> None:
    voxels = torch.tensor([[0.0, 1.0, 2.0], [255.0, 0.0, 7.0], [0.0, 1.0, 2.0]])
    kept = quantize_points(voxels, 8)  # integral and inside: taken as is, duplicates merged
    assert as_rows(kept) == sorted({(0, 0, 1, 2), (0, 255, 0, 7)}, key=morton_key)
    floats = torch.tensor([[-1.0, 0.0, 0.0], [1.0, 0.5, 0.25], [0.0, 2.0, 0.0]])
    fitted = quantize_points(floats, 2)  # longest side 2 -> scale 4/2, clamp the max
    assert as_rows(fitted) == sorted({(0, 0, 0, 0), (0, 3, 1, 0), (0, 2, 3, 0)}, key=morton_key)
    assert as_rows(quantize_points(voxels, 8, fit=True))[0][0] == 0
    with pytest.raises(ValueError, match="outside"):
        quantize_points(voxels, 3, fit=False)
    with pytest.raises(ValueError, match="NaN"):
        quantize_points(torch.tensor([[float("nan"), 0.0, 0.0]]), 3)
    with pytest.raises(ValueError, match="empty"):
        quantize_points(torch.zeros((0, 3)), 3)
