"""Occupancy hierarchies of voxel clouds on MLX: the octree learned geometry codecs code.

What the hierarchy is, the child bit order (``x + 2y + 4z``, as upstream) and why
canonical order refines level by level are explained once in
:mod:`lattice_contract.frontend.occupancy`, which also holds the public functions'
steps, checks and messages (:class:`~lattice_contract.frontend.occupancy.OccupancyOps`).
This module supplies the array primitives those steps call and binds the
public functions to them, so both runtimes give identical rows, codes and orders.

Where the output size depends on the data (which rows start a new parent,
which children are occupied) the positions are found on the host with
:func:`~mlx_lattice.coords.flat_nonzero`, as the rest of this runtime does:
MLX has no compaction primitive.  Float64 steps of ``quantize_points`` run on
the CPU stream (MLX's GPU has no float64).  All other steps are MLX array
operations on the default device.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import kernel_taps
from lattice_contract.frontend import CHILD_TAPS as CHILD_TAPS
from lattice_contract.frontend import TAP_BITS as _TAP_BITS
from lattice_contract.frontend import occupancy as shared

from mlx_lattice.coords import flat_nonzero
from mlx_lattice.sparse import canonical_order

__all__ = list(shared.RUNTIME_NAMES)


class OccupancyHierarchy(shared.OccupancyHierarchy[mx.array]):
    """:class:`lattice_contract.frontend.occupancy.OccupancyHierarchy` of this runtime's arrays."""


def _same_as_previous(rows: mx.array) -> mx.array:
    """Bool per row: equal to the row before it (row 0 never is)."""
    if rows.shape[0] < 2:
        return mx.zeros((rows.shape[0],), dtype=mx.bool_)
    same = mx.all(rows[1:] == rows[:-1], axis=1)
    return mx.concatenate([mx.zeros((1,), dtype=mx.bool_), same])


class _MLXOccupancy(shared.OccupancyOps[mx.array, Any, OccupancyHierarchy]):
    """The MLX primitives of :class:`~lattice_contract.frontend.occupancy.OccupancyOps`."""

    array_type = mx.array
    array_word = "mlx.core.array"
    points_word = "an mlx.core.array (or NumPy array)"
    hierarchy_type = OccupancyHierarchy

    def _coerce(self, value: object) -> object:
        return mx.array(value) if isinstance(value, np.ndarray) else value

    def _any_negative_batch(self, rows: mx.array) -> bool:
        return bool(mx.any(rows[:, 0] < 0).item())

    def _canonical(self, rows: mx.array) -> mx.array:
        out: mx.array = rows[canonical_order(rows)]
        return out

    def _drop_repeats(self, rows: mx.array) -> mx.array:
        repeated = _same_as_previous(rows)
        if not bool(mx.any(repeated).item()):
            return rows
        kept: mx.array = rows[flat_nonzero(mx.logical_not(repeated))]
        return kept

    def _no_codes(self, rows: mx.array) -> tuple[mx.array, mx.array]:
        return rows, mx.zeros((0,), dtype=mx.uint8)

    def _downsample_sorted(self, rows: mx.array) -> tuple[mx.array, mx.array]:
        spatial = rows[:, 1:]
        parents = mx.concatenate([rows[:, :1], mx.right_shift(spatial, 1)], axis=1)
        parity = mx.bitwise_and(spatial, 1)
        packed = parity[:, 0] * 4 + parity[:, 1] * 2 + parity[:, 2]
        taps = mx.array(_TAP_BITS, dtype=mx.int32)[packed]
        bits = mx.left_shift(mx.ones_like(taps), taps)
        bits = mx.where(_same_as_previous(rows), 0, bits)  # a repeated row counts once
        first = mx.logical_not(_same_as_previous(parents))
        starts = flat_nonzero(first)
        # Children of one parent are contiguous, so each code is a segment sum of
        # distinct powers of two, i.e. their bitwise OR.
        segment = mx.cumsum(first.astype(mx.int32)) - 1
        codes = mx.zeros((int(starts.shape[0]),), dtype=mx.int32).at[segment].add(bits)
        return parents[starts], codes.astype(mx.uint8)

    def _is_codes(self, codes: object) -> bool:
        return isinstance(codes, mx.array) and codes.dtype == mx.uint8 and codes.ndim == 1

    def _bits(self, codes: mx.array) -> mx.array:
        shifts = mx.arange(8, dtype=mx.int32)
        return mx.bitwise_and(mx.right_shift(codes.astype(mx.int32)[:, None], shifts), 1) == 1

    def _candidates(self, parents: mx.array) -> mx.array:
        offsets = mx.array([(0, *tap) for tap in kernel_taps(2)], dtype=mx.int32)
        doubled = parents * mx.array([1, 2, 2, 2], dtype=mx.int32)
        children: mx.array = (doubled[:, None, :] + offsets[None, :, :]).reshape(-1, 4)
        return children

    def _occupied(self, candidates: mx.array, occupied: mx.array) -> mx.array:
        per_tap = occupied[:, mx.array(_TAP_BITS, dtype=mx.int32)]  # candidates come in tap order
        children: mx.array = candidates[flat_nonzero(per_tap)]
        return children

    def _points(self, points: object) -> mx.array | None:
        if isinstance(points, np.ndarray):
            # dtype given explicitly: mx.array would otherwise narrow float64 to float32.
            points = mx.array(points.astype(np.float64, copy=False), dtype=mx.float64)
        if not isinstance(points, mx.array) or points.ndim != 2 or points.shape[1] != 3:
            return None
        with mx.stream(mx.cpu):  # MLX's GPU has no float64
            return points.astype(mx.float64)

    def _grid_facts(self, points: mx.array, side: float) -> tuple[bool, bool, bool]:
        with mx.stream(mx.cpu):
            finite = bool(mx.all(mx.isfinite(points)).item())
            inside = bool(mx.all((points >= 0) & (points < side)).item())
            return finite, inside, bool(mx.all(points == mx.floor(points)).item())

    def _fit_cells(self, points: mx.array, depth: int) -> mx.array:
        with mx.stream(mx.cpu):
            low = mx.min(points, axis=0)
            extent = float(np.asarray(mx.max(mx.max(points, axis=0) - low)))
            scale = shared.fit_scale(extent, depth)
            return mx.clip(mx.floor((points - low) * scale), 0, float(1 << depth) - 1)

    def _floor_cells(self, points: mx.array) -> mx.array:
        with mx.stream(mx.cpu):
            return mx.floor(points)

    def _rows(self, cells: mx.array, batch: int) -> mx.array:
        with mx.stream(mx.cpu):
            spatial = cells.astype(mx.int32)
            mx.eval(spatial)
        column = mx.full((int(spatial.shape[0]), 1), batch, dtype=mx.int32)
        return mx.concatenate([column, spatial], axis=1)


_OPS = _MLXOccupancy()

morton_sort = _OPS.morton_sort
downsample_occupancy = _OPS.downsample_occupancy
child_bits = _OPS.child_bits
candidate_children = _OPS.candidate_children
expand_occupancy = _OPS.expand_occupancy
occupancy_hierarchy = _OPS.occupancy_hierarchy
quantize_points = _OPS.quantize_points
