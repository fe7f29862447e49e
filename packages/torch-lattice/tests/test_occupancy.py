"""Occupancy hierarchy utilities: round trips, the Morton property, modes and errors.

The brute-force oracle of downsampling and expansion, shared by both runtimes,
is lattice-conformance/tests/test_occupancy_oracle.py.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.kernel import kernel_taps, tap_index
from lattice_contract.shared_order import morton_keys
from torch_lattice import ops
from torch_lattice.occupancy import (
    CHILD_TAPS,
    candidate_children,
    child_bits,
    downsample_occupancy,
    expand_occupancy,
    morton_sort,
    occupancy_hierarchy,
    quantize_points,
)
from torch_lattice.sparse import SparseTensor

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


def test_candidate_children_follow_generative_transposed_conv_taps() -> None:
    # Candidate 8i + t must be the row generative_conv_transpose3d's tap t writes:
    # give tap t the weight t + 1 and read it back per child.
    parents = torch.tensor([[0, 0, 0, 0], [0, 3, -2, 5], [1, -4, 1, 0]], dtype=torch.int32)
    x = SparseTensor(parents * torch.tensor([1, 2, 2, 2], dtype=torch.int32), torch.ones(3, 1), 2)
    weight = torch.zeros(1, 2, 2, 2, 1)
    for tap in kernel_taps(2):
        weight[0, tap[0], tap[1], tap[2], 0] = tap_index(tap, 2) + 1
    out = ops.generative_conv_transpose3d(x, weight, kernel_size=2, stride=2)
    rows, feats = as_rows(out.coords), out.feats[:, 0].tolist()
    value = {row: float(f) for row, f in zip(rows, feats, strict=True)}
    cand = as_rows(candidate_children(parents))
    assert len(cand) == 24
    for i, row in enumerate(cand):
        assert value[row] == i % 8 + 1
        b, x0, y0, z0 = as_rows(parents)[i // 8]
        dx, dy, dz = kernel_taps(2)[i % 8]
        assert row == (b, 2 * x0 + dx, 2 * y0 + dy, 2 * z0 + dz)


def test_child_bits() -> None:
    bits = child_bits(torch.tensor([0, 1, 0x80, 0xA5], dtype=torch.uint8))
    assert bits[0].tolist() == [False] * 8
    assert bits[1].tolist() == [True] + [False] * 7
    assert bits[2].tolist() == [False] * 7 + [True]
    assert bits[3].tolist() == [True, False, True, False, False, True, False, True]


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


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(TypeError, match="int32"):
        downsample_occupancy(torch.zeros((3, 4), dtype=torch.int64))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        downsample_occupancy(torch.zeros((3, 3), dtype=torch.int32))
    with pytest.raises(ValueError, match="batch"):
        downsample_occupancy(torch.tensor([[-1, 0, 0, 0]], dtype=torch.int32))
    with pytest.raises(ValueError, match="one code per parent"):
        expand_occupancy(torch.zeros((2, 4), dtype=torch.int32), torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        expand_occupancy(torch.zeros((2, 4), dtype=torch.int32), torch.zeros(2))
    with pytest.raises(ValueError, match="levels"):
        occupancy_hierarchy(torch.zeros((1, 4), dtype=torch.int32), 0)
    with pytest.raises(TypeError, match="levels"):
        occupancy_hierarchy(torch.zeros((1, 4), dtype=torch.int32), 2.0)  # type: ignore[arg-type]


def test_empty_level() -> None:
    parents, codes = downsample_occupancy(torch.zeros((0, 4), dtype=torch.int32))
    assert parents.shape == (0, 4) and codes.shape == (0,)
    assert expand_occupancy(parents, codes).shape == (0, 4)


def test_code_bits_are_upstreams_x_fastest_order() -> None:
    """Bit x + 2y + 4z: a lone child at (1, 0, 0) sets bit 1, (0, 1, 0) bit 2, (0, 0, 1) bit 4."""
    cases = (((0, 0, 0), 1), ((1, 0, 0), 2), ((0, 1, 0), 4), ((0, 0, 1), 16), ((1, 1, 1), 128))
    for offset, code in cases:
        child = torch.tensor([[0, 6 + offset[0], 2 + offset[1], 4 + offset[2]]], dtype=torch.int32)
        parents, codes = downsample_occupancy(child)
        assert as_rows(parents) == [(0, 3, 1, 2)] and codes.tolist() == [code]
        assert CHILD_TAPS[code.bit_length() - 1] == offset
        assert as_rows(expand_occupancy(parents, codes)) == as_rows(child)
