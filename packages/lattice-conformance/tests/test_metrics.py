"""Canonical order and output comparison (numpy side of conformance)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_conformance.archive import SparseArrays
from lattice_conformance.metrics import (
    ErrorStats,
    OutputResult,
    canonical_order,
    compare_dense,
    compare_sparse,
    feature_errors,
)


def _reference_order(coords: np.ndarray) -> np.ndarray:
    """Independent oracle: build the 96-bit code one bit at a time as Python ints."""
    shifted = coords[:, 1:].astype(np.int64) + (1 << 31)
    codes = [0] * len(coords)
    for i in range(len(coords)):  # oracle only: tiny inputs
        code = 0
        for bit in range(31, -1, -1):
            for axis in range(3):
                code = (code << 1) | ((int(shifted[i, axis]) >> bit) & 1)
        codes[i] = code
    return np.array(
        sorted(range(len(coords)), key=lambda i: (int(coords[i, 0]), codes[i])), dtype=np.int64
    )


def test_canonical_order_small_examples() -> None:
    coords = np.array(
        [
            [0, 0, 1, 0],
            [0, 1, 0, 0],
            [0, 0, 0, 1],
            [1, 0, 0, 0],
            [0, -1, 0, 0],
            [0, 0, 1, 1],
        ],
        np.int32,
    )
    ordered = coords[canonical_order(coords)].tolist()
    # -1 maps to 2^31 - 1, below 0 -> 2^31; z is the least significant axis.
    assert ordered == [
        [0, -1, 0, 0],
        [0, 0, 0, 1],
        [0, 0, 1, 0],
        [0, 0, 1, 1],
        [0, 1, 0, 0],
        [1, 0, 0, 0],
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**31), 2**31 - 1),
        ),
        min_size=1,
        max_size=40,
        unique=True,
    )
)
def test_canonical_order_matches_bitwise_oracle(rows: list[tuple[int, int, int, int]]) -> None:
    coords = np.array(rows, dtype=np.int32)
    np.testing.assert_array_equal(canonical_order(coords), _reference_order(coords))


def test_canonical_order_small_range_matches_oracle() -> None:
    rng = np.random.default_rng(3)
    coords = np.unique(rng.integers(-6, 6, size=(300, 4)), axis=0).astype(np.int32)
    coords[:, 0] = np.abs(coords[:, 0]) % 2
    coords = np.unique(coords, axis=0)
    np.testing.assert_array_equal(canonical_order(coords), _reference_order(coords))


def test_canonical_order_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        canonical_order(np.zeros((3, 3), np.int32))
    with pytest.raises(TypeError, match="integers"):
        canonical_order(np.zeros((3, 4), np.float32))


def _sparse(rows: int = 50, channels: int = 4, seed: int = 0) -> SparseArrays:
    rng = np.random.default_rng(seed)
    coords = np.unique(rng.integers(0, 20, size=(rows * 3, 4)), axis=0).astype(np.int32)[:rows]
    coords[:, 0] = 0
    coords = np.unique(coords, axis=0)
    feats = rng.standard_normal((len(coords), channels)).astype(np.float32)
    return SparseArrays(coords, feats, (1, 1, 1))


def _cmp(
    actual: SparseArrays, expected: SparseArrays, atol: float = 1e-3, rtol: float = 0.0
) -> OutputResult:
    return compare_sparse(
        "y", actual, expected, atol=atol, rtol=rtol, expected_dtype="f32", actual_dtype="f32"
    )


def test_permuted_rows_compare_equal() -> None:
    expected = _sparse()
    perm = np.random.default_rng(1).permutation(len(expected.coords))
    actual = SparseArrays(expected.coords[perm], expected.features[perm], (1, 1, 1))
    result = _cmp(actual, expected)
    assert result.passed, result.reasons
    assert result.coordinates is not None and result.coordinates.equal
    assert result.abs_error is not None and result.abs_error.max == 0.0
    assert result.compared_values == expected.features.size


def test_flipped_coordinate_fails_and_reports_rows() -> None:
    expected = _sparse()
    coords = expected.coords.copy()
    coords[7, 2] += 1000
    result = _cmp(SparseArrays(coords, expected.features, (1, 1, 1)), expected)
    assert not result.passed
    report = result.coordinates
    assert report is not None and not report.equal
    assert (report.missing, report.extra, report.rows_differing) == (1, 1, 2)
    assert report.first_missing == [expected.coords[7].tolist()]
    assert report.first_extra == [coords[7].tolist()]
    assert "coordinates: 2 rows differ" in result.reasons[0]
    # Features on the shared rows are still compared (and agree).
    assert result.violations == 0
    assert result.compared_values == (len(coords) - 1) * 4


def test_dropped_row_fails() -> None:
    expected = _sparse()
    actual = SparseArrays(expected.coords[1:], expected.features[1:], (1, 1, 1))
    result = _cmp(actual, expected)
    assert not result.passed
    assert result.coordinates is not None
    assert (result.coordinates.missing, result.coordinates.extra) == (1, 0)
    assert result.coordinates.actual_rows == len(expected.coords) - 1


def test_duplicate_actual_rows_fail() -> None:
    expected = _sparse()
    coords = expected.coords.copy()
    coords[3] = coords[4]
    result = _cmp(SparseArrays(coords, expected.features, (1, 1, 1)), expected)
    assert not result.passed
    assert result.coordinates is not None and result.coordinates.duplicate_actual == 1


def test_feature_perturbation_past_tolerance_fails() -> None:
    expected = _sparse()
    feats = expected.features.copy()
    feats[5, 1] += 0.5
    perm = np.random.default_rng(2).permutation(len(feats))
    actual = SparseArrays(expected.coords[perm], feats[perm], (1, 1, 1))
    result = _cmp(actual, expected, atol=0.1)
    assert not result.passed
    assert result.violations == 1
    assert result.abs_error is not None
    assert result.abs_error.max == pytest.approx(0.5, rel=1e-6)
    assert result.worst is not None
    assert result.worst["coords"] == expected.coords[5].tolist()
    assert result.worst["channel"] == 1
    within = feats.copy()
    within[5, 1] = expected.features[5, 1] + 0.05
    assert _cmp(SparseArrays(expected.coords, within, (1, 1, 1)), expected, atol=0.1).passed


def test_stride_channel_and_dtype_mismatches_fail() -> None:
    expected = _sparse()
    result = _cmp(SparseArrays(expected.coords, expected.features, (2, 2, 2)), expected)
    assert not result.passed and result.reasons[0].startswith("stride")
    result = _cmp(SparseArrays(expected.coords, expected.features[:, :3], (1, 1, 1)), expected)
    assert not result.passed and "channels" in result.reasons[0]
    result = compare_sparse(
        "y", expected, expected, atol=1, rtol=1, expected_dtype="f16", actual_dtype="f32"
    )
    assert not result.passed and result.reasons[0].startswith("dtype")


def test_error_statistics_and_tolerance_rule() -> None:
    expected = np.array([1.0, -2.0, 0.0, 4.0, np.nan, np.inf], np.float64)
    actual = np.array([1.1, -2.0, 1e-6, 3.0, np.nan, np.inf], np.float64)
    diff, rel, bad = feature_errors(actual, expected, atol=1e-3, rtol=0.2)
    np.testing.assert_allclose(diff, [0.1, 0.0, 1e-6, 1.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(rel[:4], [0.1, 0.0, 1e-3, 0.25], atol=1e-12)
    assert bad.tolist() == [False, False, False, True, False, False]
    _, _, bad = feature_errors(np.array([np.nan]), np.array([1.0]), atol=1.0, rtol=1.0)
    assert bad.tolist() == [True]
    stats = ErrorStats.of(np.arange(101, dtype=np.float64))
    assert (stats.mean, stats.median, stats.p95, stats.p99, stats.max) == (50, 50, 95, 99, 100)


def test_dense_comparison() -> None:
    e = np.arange(12, dtype=np.float32).reshape(3, 4)
    ok = compare_dense(
        "g", e + 1e-4, e, atol=1e-3, rtol=0, expected_dtype="f32", actual_dtype="f32"
    )
    assert ok.passed and ok.compared_values == 12
    bad = compare_dense("g", e[:2], e, atol=1, rtol=0, expected_dtype="f32", actual_dtype="f32")
    assert not bad.passed and "shape" in bad.reasons[0]
    off = e.copy()
    off[2, 1] += 1
    res = compare_dense("g", off, e, atol=1e-3, rtol=0, expected_dtype="f32", actual_dtype="f32")
    assert not res.passed and res.worst is not None and res.worst["index"] == [2, 1]


def test_canonical_order_agrees_with_mlx_lattice() -> None:
    mlx_lattice = pytest.importorskip("mlx_lattice")
    rng = np.random.default_rng(11)
    wide = rng.integers(-(2**31), 2**31 - 1, size=(500, 4), dtype=np.int64)
    narrow = rng.integers(-50, 50, size=(500, 4), dtype=np.int64)
    for coords in (wide, narrow):
        coords[:, 0] = np.abs(coords[:, 0]) % 3
        coords = np.unique(coords.astype(np.int32), axis=0)
        ours = canonical_order(coords)
        theirs = np.asarray(mlx_lattice.canonical_order(coords))
        np.testing.assert_array_equal(coords[ours], coords[theirs])
