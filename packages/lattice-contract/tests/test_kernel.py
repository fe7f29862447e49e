"""Kernel-offset order: row formula, centred and indexed offset rules, subm offsets, octree bits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.dialect import (
    OCTREE_CHILD_OFFSETS,
    as_triple,
    centred_offset,
    centred_tap_offsets,
    indexed_offset,
    kernel_taps,
    kernel_volume,
    octree_child_bit,
    octree_tap_bits,
    subm_offsets,
    tap_index,
    tap_offsets,
)

SIZES = [(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4), (5, 5, 5), (2, 3, 4), (4, 1, 3), (1, 5, 2)]
sizes = st.tuples(*(st.integers(1, 6) for _ in range(3)))
dilations = st.tuples(*(st.integers(1, 4) for _ in range(3)))


def brute_force_rows(size: tuple[int, int, int]) -> dict[tuple[int, int, int], int]:
    """Row of each tap from flattening a nested [kx][ky][kz] array in C order."""
    nested = [[[(a, b, c) for c in range(size[2])] for b in range(size[1])] for a in range(size[0])]
    flat = [tap for plane in nested for row in plane for tap in row]
    return {tap: row for row, tap in enumerate(flat)}


@pytest.mark.parametrize("size", SIZES)
def test_taps_are_in_row_order_with_z_fastest(size):
    taps = kernel_taps(size)
    assert taps == list(itertools.product(*(range(k) for k in size)))
    assert brute_force_rows(size) == {tap: row for row, tap in enumerate(taps)}
    assert len(taps) == kernel_volume(size) == size[0] * size[1] * size[2]


@settings(max_examples=40, deadline=None)
@given(size=sizes)
def test_tap_index_is_the_row_formula(size):
    kx, ky, kz = size
    for row, tap in enumerate(kernel_taps(size)):
        a, b, c = tap
        assert tap_index(tap, size) == row == (a * ky + b) * kz + c
    assert tap_index((kx - 1, ky - 1, kz - 1), size) == kernel_volume(size) - 1


def test_int_kernel_sizes_broadcast():
    assert kernel_taps(2) == kernel_taps((2, 2, 2))
    assert kernel_volume(3) == 27
    assert tap_index((1, 0, 1), 2) == 5
    assert kernel_taps(1) == [(0, 0, 0)]


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, [0]), (2, [0, 1]), (3, [-1, 0, 1]), (4, [-1, 0, 1, 2]), (5, [-2, -1, 0, 1, 2])],
)
def test_subm_offsets_per_axis(k, expected):
    offsets = subm_offsets((k, 1, 1))
    assert [o[0] for o in offsets] == expected
    assert all(o[1:] == (0, 0) for o in offsets)
    doubled = subm_offsets((1, 1, k), dilation=(1, 1, 2))
    assert [o[2] for o in doubled] == [2 * e for e in expected]


@settings(max_examples=40, deadline=None)
@given(size=sizes, dilation=dilations)
def test_subm_offsets_against_brute_force(size, dilation):
    expected = []
    for kx in range(size[0]):
        for ky in range(size[1]):
            for kz in range(size[2]):
                tap = (kx, ky, kz)
                expected.append(
                    tuple((tap[i] - (size[i] - 1) // 2) * dilation[i] for i in range(3))
                )
    assert subm_offsets(size, dilation) == expected
    # odd kernels are symmetric around the centre; even ones lean positive (K=4 reads -1..2)
    for axis in range(3):
        values = sorted({o[axis] for o in expected})
        assert values[0] == -((size[axis] - 1) // 2) * dilation[axis]
        assert values[-1] == (size[axis] // 2) * dilation[axis]


@settings(max_examples=40, deadline=None)
@given(size=sizes, dilation=dilations)
def test_tap_offsets_are_k_times_d(size, dilation):
    offsets = tap_offsets(size, dilation)
    assert offsets == [
        (a * dilation[0], b * dilation[1], c * dilation[2]) for a, b, c in kernel_taps(size)
    ]


@settings(max_examples=40, deadline=None)
@given(size=sizes, dilation=dilations)
def test_stride_one_conv_with_centre_padding_reads_the_subm_neighbours(size, dilation):
    """SPEC §5: conv3d with s=1, p=floor((K-1)/2)*d reads c = o - p + k*d, the subm offsets."""
    padding = tuple((k - 1) // 2 * d for k, d in zip(size, dilation, strict=True))
    shifted = [
        tuple(t - p for t, p in zip(tap, padding, strict=True))
        for tap in tap_offsets(size, dilation)
    ]
    assert shifted == subm_offsets(size, dilation)


def test_as_triple():
    assert as_triple(2) == (2, 2, 2)
    assert as_triple([1, 2, 3]) == (1, 2, 3)
    assert as_triple(range(3)) == (0, 1, 2)
    # NumPy integers count as ints (a size read from an array); the result is plain ints.
    wide = as_triple(np.int64(2))  # type: ignore[arg-type]  # deliberate: a NumPy scalar
    assert wide == (2, 2, 2) and all(type(v) is int for v in wide)
    assert as_triple(np.array([1, 2, 3], dtype=np.int32)) == (1, 2, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        as_triple(True)
    with pytest.raises(ValueError, match="three ints"):
        as_triple((1, np.bool_(True), 3))  # type: ignore[arg-type]
    for bad in ((1, 2), (1, 2, 3, 4), (1.0, 2, 3), (1, True, 3), "abc"):
        with pytest.raises(ValueError, match="three ints"):
            as_triple(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("k", "expected"),
    [(1, [0]), (2, [0, 1]), (3, [-1, 0, 1]), (4, [0, 1, 2, 3]), (5, [-2, -1, 0, 1, 2])],
)
def test_centred_rule_per_axis(k, expected):
    """Odd K: (k - K//2) * d, centred on the output; even K: k * d, reading forward."""
    assert [centred_offset(t, k) for t in range(k)] == expected
    assert [centred_offset(t, k, 3) for t in range(k)] == [3 * e for e in expected]
    assert [o[1] for o in centred_tap_offsets((1, k, 1), (1, 2, 1))] == [2 * e for e in expected]


@settings(max_examples=40, deadline=None)
@given(size=sizes, dilation=dilations)
def test_centred_and_indexed_rules_against_the_definition(size, dilation):
    centred, indexed = [], []
    for tap in kernel_taps(size):
        centred.append(
            tuple(
                (tap[i] - size[i] // 2) * dilation[i] if size[i] % 2 else tap[i] * dilation[i]
                for i in range(3)
            )
        )
        indexed.append(tuple(tap[i] * dilation[i] for i in range(3)))
    assert centred_tap_offsets(size, dilation) == centred
    assert tap_offsets(size, dilation) == indexed
    assert [indexed_offset(t, size[0], dilation[0]) for t in range(size[0])] == [
        t * dilation[0] for t in range(size[0])
    ]
    # For odd kernels the centred rule is the submanifold rule.
    if all(k % 2 for k in size):
        assert centred == subm_offsets(size, dilation)


def test_octree_child_bit_is_x_plus_2y_plus_4z() -> None:
    """Upstream's child bit order: x fastest."""
    assert octree_child_bit((1, 0, 0)) == 1
    assert octree_child_bit((0, 1, 0)) == 2
    assert octree_child_bit((0, 0, 1)) == 4
    assert octree_child_bit((1, 1, 1)) == 7
    for bit, offset in enumerate(OCTREE_CHILD_OFFSETS):
        assert octree_child_bit(offset) == bit
    with pytest.raises(ValueError, match="0 or 1"):
        octree_child_bit((2, 0, 0))


def test_octree_tap_bits_map_taps_to_bits() -> None:
    bits = octree_tap_bits()
    assert sorted(bits) == list(range(8))
    for t, (a, b, c) in enumerate(kernel_taps(2)):
        assert t == a * 4 + b * 2 + c
        assert bits[t] == a + 2 * b + 4 * c
        assert OCTREE_CHILD_OFFSETS[bits[t]] == (a, b, c)
