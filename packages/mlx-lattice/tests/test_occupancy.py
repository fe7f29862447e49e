"""MLX occupancy utilities against the torch runtime and worked cases.

The brute-force oracle of downsampling and expansion, shared by both runtimes,
is lattice-conformance/tests/test_occupancy_oracle.py.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.kernel import kernel_taps
from mlx_lattice import ops
from mlx_lattice.occupancy import (
    CHILD_TAPS,
    candidate_children,
    child_bits,
    downsample_occupancy,
    expand_occupancy,
    morton_sort,
    occupancy_hierarchy,
    quantize_points,
)
from mlx_lattice.sparse import SparseTensor

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


def test_candidates_are_the_generative_transposed_conv_taps() -> None:
    parents = mx.array([[0, 0, 0, 0], [0, 3, -2, 5], [1, -4, 1, 0]], dtype=mx.int32)
    x = SparseTensor(parents * mx.array([1, 2, 2, 2], dtype=mx.int32), mx.ones((3, 1)), 2)
    weight = np.zeros((1, 2, 2, 2, 1), dtype=np.float32)
    for k, (a, b, c) in enumerate(kernel_taps(2)):
        weight[0, a, b, c, 0] = k + 1
    out = ops.generative_conv_transpose3d(x, mx.array(weight), kernel_size=2, stride=2)
    value = dict(zip(rows_of(out.coords), np.asarray(out.feats)[:, 0].tolist(), strict=True))
    for i, row in enumerate(rows_of(candidate_children(parents))):
        assert value[row] == i % 8 + 1
        assert row[1:] == tuple(
            2 * p + d
            for p, d in zip(rows_of(parents)[i // 8][1:], kernel_taps(2)[i % 8], strict=True)
        )


def test_child_bits_and_empty_levels() -> None:
    bits = np.asarray(child_bits(mx.array([1, 0xA5], dtype=mx.uint8)))
    assert bits.tolist() == [
        [True] + [False] * 7,
        [True, False, True, False, False, True, False, True],
    ]
    parents, codes = downsample_occupancy(mx.zeros((0, 4), dtype=mx.int32))
    assert parents.shape == (0, 4) and codes.shape == (0,)
    assert expand_occupancy(parents, codes).shape == (0, 4)


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


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(TypeError, match="int32"):
        downsample_occupancy(mx.zeros((3, 4), dtype=mx.int64))
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        downsample_occupancy(mx.zeros((3, 3), dtype=mx.int32))
    with pytest.raises(ValueError, match="batch"):
        downsample_occupancy(mx.array([[-1, 0, 0, 0]], dtype=mx.int32))
    with pytest.raises(ValueError, match="one code per parent"):
        expand_occupancy(mx.zeros((2, 4), dtype=mx.int32), mx.zeros((3,), dtype=mx.uint8))
    with pytest.raises(ValueError, match="outside"):
        quantize_points(np.full((2, 3), 9.0), 3, fit=False)
    with pytest.raises(ValueError, match="NaN"):
        quantize_points(np.array([[np.inf, 0.0, 0.0]]), 3)
    with pytest.raises(ValueError, match="levels"):
        occupancy_hierarchy(mx.zeros((1, 4), dtype=mx.int32), 31)


def test_code_bits_are_upstreams_x_fastest_order() -> None:
    """Bit x + 2y + 4z: a lone child at (1, 0, 0) sets bit 1, (0, 1, 0) bit 2, (0, 0, 1) bit 4."""
    cases = (((0, 0, 0), 1), ((1, 0, 0), 2), ((0, 1, 0), 4), ((0, 0, 1), 16), ((1, 1, 1), 128))
    for offset, code in cases:
        row = (0, 6 + offset[0], 2 + offset[1], 4 + offset[2])
        parents, codes = downsample_occupancy(mx.array([row], dtype=mx.int32))
        assert rows_of(parents) == [(0, 3, 1, 2)] and np.asarray(codes).tolist() == [code]
        assert CHILD_TAPS[code.bit_length() - 1] == offset
        assert rows_of(expand_occupancy(parents, codes)) == [row]
