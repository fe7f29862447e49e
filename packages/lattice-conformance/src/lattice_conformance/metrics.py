"""Comparison of one runtime's outputs against expected outputs.

Physical row order is not part of the lattice contract, so sparse outputs are
first put in canonical order (batch, then the Morton code of x, y, z; the
contract's ``lattice_contract.frontend.row_order``) on both sides.  Coordinates
must then be equal exactly: a wrong support is a wrong answer whatever the
features say.  Features are compared in
float64 and summarised as absolute and relative error statistics.

Everything here is numpy only and vectorised; the MLX and torch sides convert
their outputs to numpy before calling in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

import numpy as np
import numpy.typing as npt
from lattice_contract.frontend import canonical_order as canonical_order
from lattice_contract.frontend import morton_keys as morton_keys

from lattice_conformance.archive import SparseArrays

Array = npt.NDArray[Any]

FIRST_ROWS: Final = 5
"""How many differing coordinate rows a report lists."""

PLOT_SAMPLE: Final = 200_000
"""Most error values kept per output for plotting (evenly subsampled)."""


# ---------------------------------------------------------------------------
# Results.


class Tolerance(TypedDict):
    """The ``atol``/``rtol`` pair every comparison here takes, as keywords.

    Typed so that ``assert_allclose(a, b, **tol)`` and
    ``torch.testing.assert_close(a, b, **tol)`` are checked by mypy in the
    tests of every package (one declaration instead of one per test file).
    """

    atol: float
    rtol: float


@dataclass(frozen=True)
class ErrorStats:
    """Summary of an error distribution."""

    mean: float
    median: float
    p95: float
    p99: float
    max: float

    @staticmethod
    def of(values: Array) -> ErrorStats:
        if values.size == 0:
            return ErrorStats(0.0, 0.0, 0.0, 0.0, 0.0)
        mean = float(np.mean(values))
        median, p95, p99 = (float(v) for v in np.percentile(values, [50, 95, 99]))
        return ErrorStats(mean, median, p95, p99, float(np.max(values)))

    def as_dict(self) -> dict[str, float | None]:
        return {k: _json_float(v) for k, v in self.__dict__.items()}


def _json_float(value: float) -> float | None:
    """JSON has no inf/nan: report them as null (the reason text says why)."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class CoordinateReport:
    """Exact comparison of two sparse supports after canonical ordering."""

    equal: bool
    expected_rows: int
    actual_rows: int
    missing: int
    extra: int
    first_missing: list[list[int]]
    first_extra: list[list[int]]
    duplicate_actual: int
    duplicate_expected: int
    expected_stride: tuple[int, int, int]
    actual_stride: tuple[int, int, int]

    @property
    def rows_differing(self) -> int:
        return self.missing + self.extra

    def as_dict(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "expected_rows": self.expected_rows,
            "actual_rows": self.actual_rows,
            "rows_differing": self.rows_differing,
            "missing": self.missing,
            "extra": self.extra,
            "first_missing": self.first_missing,
            "first_extra": self.first_extra,
            "duplicate_actual_rows": self.duplicate_actual,
            "duplicate_expected_rows": self.duplicate_expected,
            "expected_stride": list(self.expected_stride),
            "actual_stride": list(self.actual_stride),
        }


@dataclass
class OutputResult:
    """Verdict and statistics for one output of one case."""

    name: str
    kind: str
    passed: bool
    reasons: list[str]
    atol: float
    rtol: float
    expected_dtype: str
    actual_dtype: str
    coordinates: CoordinateReport | None = None
    compared_values: int = 0
    violations: int = 0
    abs_error: ErrorStats | None = None
    rel_error: ErrorStats | None = None
    worst: dict[str, Any] | None = None
    abs_sample: Array = field(default_factory=lambda: np.zeros(0), repr=False)
    rel_sample: Array = field(default_factory=lambda: np.zeros(0), repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "passed": self.passed,
            "reasons": list(self.reasons),
            "atol": self.atol,
            "rtol": self.rtol,
            "expected_dtype": self.expected_dtype,
            "actual_dtype": self.actual_dtype,
            "coordinates": None if self.coordinates is None else self.coordinates.as_dict(),
            "compared_values": self.compared_values,
            "violations": self.violations,
            "abs_error": None if self.abs_error is None else self.abs_error.as_dict(),
            "rel_error": None if self.rel_error is None else self.rel_error.as_dict(),
            "worst": self.worst,
        }


# ---------------------------------------------------------------------------
# Comparison.


def _subsample(values: Array) -> Array:
    if values.size <= PLOT_SAMPLE:
        return values.copy()
    step = values.size / PLOT_SAMPLE
    return values[(np.arange(PLOT_SAMPLE) * step).astype(np.int64)]


def feature_errors(
    actual: Array, expected: Array, atol: float, rtol: float
) -> tuple[Array, Array, npt.NDArray[np.bool_]]:
    """Elementwise absolute error, relative error and tolerance violations.

    Values are compared in float64.  Two NaNs, or two infinities of the same
    sign, count as equal (error 0); any other non-finite mismatch is an
    infinite error.  The relative error divides by ``max(|expected|, atol)``
    (or the smallest normal float when atol is 0) so that expected zeros do
    not turn rounding noise into infinities.  A value violates its tolerance
    when ``|actual - expected| > atol + rtol * |expected|`` (numpy's
    ``isclose`` rule).
    """
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
    same_special = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
    diff = np.where(same_special, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    magnitude = np.where(np.isfinite(e), np.abs(e), 0.0)
    floor = atol if atol > 0 else float(np.finfo(np.float64).tiny)
    rel = diff / np.maximum(magnitude, floor)
    violations = diff > atol + rtol * magnitude
    return diff, rel, violations


def _compare_values(result: OutputResult, actual: Array, expected: Array, index_of: Any) -> None:
    """Fill the error statistics of ``result``; ``index_of(flat) -> location dict``."""
    diff, rel, bad = feature_errors(actual, expected, result.atol, result.rtol)
    flat_diff = diff.reshape(-1)
    result.compared_values = int(flat_diff.size)
    result.violations = int(np.count_nonzero(bad))
    result.abs_error = ErrorStats.of(flat_diff)
    result.rel_error = ErrorStats.of(rel.reshape(-1))
    result.abs_sample = _subsample(flat_diff)
    result.rel_sample = _subsample(rel.reshape(-1))
    if flat_diff.size:
        worst = int(np.argmax(flat_diff))
        result.worst = {
            **index_of(worst),
            "expected": _json_float(float(np.asarray(expected, np.float64).reshape(-1)[worst])),
            "actual": _json_float(float(np.asarray(actual, np.float64).reshape(-1)[worst])),
            "abs_error": _json_float(float(flat_diff[worst])),
        }
    if result.violations:
        max_abs = result.abs_error.max
        result.reasons.append(
            f"features: {result.violations} of {result.compared_values} values exceed "
            f"atol + rtol*|expected| (atol={result.atol:g}, rtol={result.rtol:g}; "
            f"max abs error {max_abs:.3g})"
        )


def _row_ids(expected_sorted: Array, actual_sorted: Array) -> tuple[Array, Array]:
    """Integer ids of coordinate rows, shared between both sides."""
    both = np.concatenate([expected_sorted, actual_sorted]).astype(np.int64)
    _, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return inverse[: len(expected_sorted)], inverse[len(expected_sorted) :]


def _duplicates(sorted_coords: Array) -> int:
    if len(sorted_coords) < 2:
        return 0
    return int(np.count_nonzero(np.all(sorted_coords[1:] == sorted_coords[:-1], axis=1)))


def _new_result(
    name: str, kind: str, atol: float, rtol: float, expected_dtype: str, actual_dtype: str
) -> OutputResult:
    result = OutputResult(name, kind, False, [], atol, rtol, expected_dtype, actual_dtype)
    if actual_dtype != expected_dtype:
        result.reasons.append(f"dtype: expected {expected_dtype}, got {actual_dtype}")
    return result


def compare_sparse(
    name: str,
    actual: SparseArrays,
    expected: SparseArrays,
    *,
    atol: float,
    rtol: float,
    expected_dtype: str,
    actual_dtype: str,
) -> OutputResult:
    """Compare one sparse output: stride, exact coordinates, then features.

    Both sides are put in canonical order.  If the supports differ the output
    fails; features are still compared on the rows both sides share, so the
    report shows whether the values around a support bug are sane.
    """
    result = _new_result(name, "sparse", atol, rtol, expected_dtype, actual_dtype)
    a_coords = np.asarray(actual.coords)
    e_coords = np.asarray(expected.coords)
    a_feats = np.asarray(actual.features)
    e_feats = np.asarray(expected.features)
    if a_coords.ndim != 2 or a_coords.shape[1] != 4 or a_feats.shape[0] != a_coords.shape[0]:
        result.reasons.append(
            f"shape: actual coords {a_coords.shape} / features {a_feats.shape} are not "
            "(N, 4) / (N, C)"
        )
        return result
    a_perm = canonical_order(a_coords)
    e_perm = canonical_order(e_coords)
    a_sorted, e_sorted = a_coords[a_perm], e_coords[e_perm]
    a_feats, e_feats = a_feats[a_perm], e_feats[e_perm]
    dup_a, dup_e = _duplicates(a_sorted), _duplicates(e_sorted)
    if a_sorted.shape == e_sorted.shape and np.array_equal(a_sorted, e_sorted):
        missing = extra = 0
        first_missing: list[list[int]] = []
        first_extra: list[list[int]] = []
        e_rows = a_rows = np.arange(len(e_sorted))
    else:
        e_ids, a_ids = _row_ids(e_sorted, a_sorted)
        missing_mask = ~np.isin(e_ids, a_ids)
        extra_mask = ~np.isin(a_ids, e_ids)
        missing, extra = int(missing_mask.sum()), int(extra_mask.sum())
        first_missing = e_sorted[missing_mask][:FIRST_ROWS].tolist()
        first_extra = a_sorted[extra_mask][:FIRST_ROWS].tolist()
        # Rows both sides share, in the expected side's canonical order.
        e_rows = np.flatnonzero(~missing_mask)
        common_ids = e_ids[e_rows]
        order_a = np.argsort(a_ids, kind="stable")
        a_rows = order_a[np.searchsorted(a_ids[order_a], common_ids)]
    coords_equal = missing == 0 and extra == 0 and dup_a == 0 and dup_e == 0
    result.coordinates = CoordinateReport(
        equal=coords_equal,
        expected_rows=len(e_sorted),
        actual_rows=len(a_sorted),
        missing=missing,
        extra=extra,
        first_missing=first_missing,
        first_extra=first_extra,
        duplicate_actual=dup_a,
        duplicate_expected=dup_e,
        expected_stride=expected.stride,
        actual_stride=actual.stride,
    )
    if tuple(actual.stride) != tuple(expected.stride):
        result.reasons.append(
            f"stride: expected {tuple(expected.stride)}, got {tuple(actual.stride)}"
        )
    if not coords_equal:
        parts = []
        if missing:
            parts.append(f"{missing} expected rows missing, first {first_missing}")
        if extra:
            parts.append(f"{extra} unexpected rows, first {first_extra}")
        if dup_a:
            parts.append(f"{dup_a} duplicate rows in the actual output")
        if dup_e:
            parts.append(f"{dup_e} duplicate rows in the expected output")
        result.reasons.append(
            f"coordinates: {missing + extra} rows differ after canonical ordering ("
            + "; ".join(parts)
            + ")"
        )
    if a_feats.ndim != 2 or a_feats.shape[1] != e_feats.shape[1]:
        result.reasons.append(
            f"features: expected {e_feats.shape[1]} channels, got shape {a_feats.shape}"
        )
    else:
        channels = e_feats.shape[1]
        e_common = e_sorted[e_rows]

        def locate(flat: int) -> dict[str, Any]:
            row, channel = divmod(flat, max(channels, 1))
            return {"coords": e_common[row].tolist(), "channel": int(channel)}

        _compare_values(result, a_feats[a_rows], e_feats[e_rows], locate)
    result.passed = not result.reasons
    return result


def compare_dense(
    name: str,
    actual: Array,
    expected: Array,
    *,
    atol: float,
    rtol: float,
    expected_dtype: str,
    actual_dtype: str,
) -> OutputResult:
    """Compare one dense output (shape must match exactly, then values)."""
    result = _new_result(name, "dense", atol, rtol, expected_dtype, actual_dtype)
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        result.reasons.append(f"shape: expected {e.shape}, got {a.shape}")
    else:
        shape = e.shape

        def locate(flat: int) -> dict[str, Any]:
            return {"index": [int(i) for i in np.unravel_index(flat, shape)]} if shape else {}

        _compare_values(result, a, e, locate)
    result.passed = not result.reasons
    return result
