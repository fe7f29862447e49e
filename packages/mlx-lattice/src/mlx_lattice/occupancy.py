"""Occupancy hierarchies of voxel clouds on MLX: the octree learned geometry codecs code.

A voxel cloud at depth ``L`` (integer coordinates in a ``2^L`` grid) has a
parent at depth ``L - 1`` for every occupied 2×2×2 block, and each parent is
described completely by an 8-bit *child-occupancy code*.  Repeating that down
to the root gives the hierarchy a geometry codec transmits.  This module builds
and inverts that hierarchy on MLX arrays, vectorised over rows; it mirrors
``torch_lattice.occupancy`` name for name, and both give identical rows, codes
and orders.

**Child bit order.**  Bit ``b`` of parent ``p``'s code (value ``1 << b``) says
whether the child ``2 * p + CHILD_TAPS[b]`` is occupied, with the child's
offset ``(x, y, z)`` giving ``b = x + 2y + 4z`` (x fastest, as upstream, so
occupancy bytes are interchangeable; :func:`lattice_contract.kernel.octree_child_bit`).
Candidate children are listed in the other order, the tap order of a 2×2×2
kernel (z fastest), which is the row order of ``generative_conv_transpose3d``
with ``kernel_size=2, stride=2`` and the Morton order within a parent; the
table :func:`lattice_contract.kernel.octree_tap_bits` maps a tap to its bit.

**Morton order refines level by level.**  In canonical order (batch, then the
Morton code of ``x + 2^31, y + 2^31, z + 2^31``) the children of a parent are
contiguous and in tap order, and the parents are themselves in canonical
order; ``torch_lattice.occupancy`` explains why the ``2^31`` offset keeps this
true.  So only the input level is sorted (with the runtime's
:func:`~mlx_lattice.sparse.canonical_order`); every coarser level comes out of
a shift and an adjacent-unique pass already in canonical order.

Where the output size depends on the data (which rows start a new parent,
which children are occupied) the positions are found on the host with
:func:`~mlx_lattice.coords.flat_nonzero`, as the rest of this runtime does:
MLX has no compaction primitive.  All other steps are MLX array operations on
the default device.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np
from lattice_contract import shared_occupancy as shared
from lattice_contract.kernel import kernel_taps
from lattice_contract.shared_occupancy import CHILD_TAPS, check_levels
from lattice_contract.shared_occupancy import TAP_BITS as _TAP_BITS

from mlx_lattice.coords import flat_nonzero
from mlx_lattice.sparse import canonical_order

__all__ = [
    "CHILD_TAPS",
    "OccupancyHierarchy",
    "candidate_children",
    "child_bits",
    "downsample_occupancy",
    "expand_occupancy",
    "morton_sort",
    "occupancy_hierarchy",
    "quantize_points",
]


def _check_coords(coords: Any, what: str = "coords") -> mx.array:
    if isinstance(coords, np.ndarray):
        coords = mx.array(coords)
    shared.check_rows_array(what, coords, mx.array)
    assert isinstance(coords, mx.array)
    if coords.shape[0] and bool(mx.any(coords[:, 0] < 0).item()):
        raise shared.negative_batch(what)
    return coords


def morton_sort(coords: Any) -> mx.array:
    """The rows of ``coords`` in canonical order (batch, then Morton code)."""
    coords = _check_coords(coords)
    out: mx.array = coords[canonical_order(coords)]
    return out


def _same_as_previous(rows: mx.array) -> mx.array:
    """Bool per row: equal to the row before it (row 0 never is)."""
    if rows.shape[0] < 2:
        return mx.zeros((rows.shape[0],), dtype=mx.bool_)
    same = mx.all(rows[1:] == rows[:-1], axis=1)
    return mx.concatenate([mx.zeros((1,), dtype=mx.bool_), same])


def downsample_occupancy(
    coords: Any, *, assume_canonical: bool = False
) -> tuple[mx.array, mx.array]:
    """Parents ``unique(floor(c / 2))`` of a voxel level and each parent's child-occupancy code.

    ``coords`` are logical int32 rows ``(batch, x, y, z)`` of one level (any
    order; repeated rows count once).  Returns ``(parents, codes)``: int32
    ``(M, 4)`` parent rows in canonical order (batch kept) and uint8 ``(M,)``
    codes, bit ``k`` set when child ``2 * parent + CHILD_TAPS[k]`` is in
    ``coords``.  ``assume_canonical=True`` skips the initial sort for callers
    whose rows are already in canonical order (every level this module
    returns is); on unsorted rows it gives wrong codes.
    """
    coords = _check_coords(coords)
    if not assume_canonical:
        coords = coords[canonical_order(coords)]
    n = int(coords.shape[0])
    if n == 0:
        return coords, mx.zeros((0,), dtype=mx.uint8)
    spatial = coords[:, 1:]
    parents = mx.concatenate([coords[:, :1], mx.right_shift(spatial, 1)], axis=1)
    parity = mx.bitwise_and(spatial, 1)
    packed = parity[:, 0] * 4 + parity[:, 1] * 2 + parity[:, 2]
    taps = mx.array(_TAP_BITS, dtype=mx.int32)[packed]
    bits = mx.left_shift(mx.ones_like(taps), taps)
    bits = mx.where(_same_as_previous(coords), 0, bits)  # a repeated row counts once
    first = mx.logical_not(_same_as_previous(parents))
    starts = flat_nonzero(first)
    # Children of one parent are contiguous, so each code is a segment sum of
    # distinct powers of two, i.e. their bitwise OR.
    segment = mx.cumsum(first.astype(mx.int32)) - 1
    codes = mx.zeros((int(starts.shape[0]),), dtype=mx.int32).at[segment].add(bits)
    return parents[starts], codes.astype(mx.uint8)


def child_bits(codes: mx.array) -> mx.array:
    """Bool ``(M, 8)``: entry ``[i, k]`` is bit ``k`` of ``codes[i]`` (child ``k`` occupied)."""
    if not isinstance(codes, mx.array) or codes.dtype != mx.uint8 or codes.ndim != 1:
        raise TypeError("codes must be a uint8 mlx.core.array of shape (M,)")
    shifts = mx.arange(8, dtype=mx.int32)
    return mx.bitwise_and(mx.right_shift(codes.astype(mx.int32)[:, None], shifts), 1) == 1


def candidate_children(parents: Any) -> mx.array:
    """All eight candidate children: int32 ``(8 M, 4)``, row ``8 i + t`` = parent i's tap-t child.

    This is the support ``generative_conv_transpose3d(kernel_size=2, stride=2)``
    produces (in logical units), in parent-major, tap-minor order; tap ``t``'s
    child is described by code bit ``octree_tap_bits()[t]``.
    """
    parents = _check_coords(parents, "parents")
    offsets = mx.array([(0, *tap) for tap in kernel_taps(2)], dtype=mx.int32)
    doubled = parents * mx.array([1, 2, 2, 2], dtype=mx.int32)
    children: mx.array = (doubled[:, None, :] + offsets[None, :, :]).reshape(-1, 4)
    return children


def expand_occupancy(parents: Any, codes: mx.array) -> mx.array:
    """The occupied children of ``parents`` given their codes (inverse of downsampling).

    Children come parent-major, tap-minor, which is canonical order when the
    parents are canonical.
    """
    parents = _check_coords(parents, "parents")
    occupied = child_bits(codes)
    if occupied.shape[0] != parents.shape[0]:
        raise shared.codes_per_parent(int(occupied.shape[0]), int(parents.shape[0]))
    per_tap = occupied[:, mx.array(_TAP_BITS, dtype=mx.int32)]  # candidates come in tap order
    children: mx.array = candidate_children(parents)[flat_nonzero(per_tap)]
    return children


class OccupancyHierarchy(shared.OccupancyHierarchy[mx.array]):
    """:class:`lattice_contract.shared_occupancy.OccupancyHierarchy` of this runtime's arrays."""


def occupancy_hierarchy(
    coords: Any, levels: int, *, assume_canonical: bool = False
) -> OccupancyHierarchy:
    """Downsample ``coords`` ``levels`` times; see :class:`OccupancyHierarchy`."""
    depth = check_levels(levels)
    current = _check_coords(coords)
    if not assume_canonical:
        current = current[canonical_order(current)]
        repeated = _same_as_previous(current)
        if bool(mx.any(repeated).item()):
            current = current[flat_nonzero(mx.logical_not(repeated))]
    found: list[mx.array] = [current]
    codes: list[mx.array] = []
    for _ in range(depth):
        current, code = downsample_occupancy(current, assume_canonical=True)
        found.append(current)
        codes.append(code)
    return OccupancyHierarchy(levels=tuple(reversed(found)), codes=tuple(reversed(codes)))


def quantize_points(
    points: Any, levels: int, *, fit: bool | None = None, batch: int = 0
) -> mx.array:
    """Voxelise points ``(P, 3)`` into a ``2^levels`` grid: unique int32 rows in canonical order.

    With ``fit=False`` the points are taken as voxel coordinates already
    (``floor`` of each), and every one must lie in ``[0, 2^levels)``.  With
    ``fit=True`` the bounding box is scaled uniformly so that its longest side
    spans the grid: ``floor((p - min) * 2^levels / longest_side)``, clamped to
    the last cell.  ``fit=None`` (the default) uses ``fit=False`` when every
    point is already an integer inside the grid (a pre-voxelised cloud, such
    as a Level-8 PLY) and ``fit=True`` otherwise.  The arithmetic is float64 on
    the CPU stream (MLX's GPU has no float64), the same operations as
    ``torch_lattice.occupancy.quantize_points``, so both runtimes get the same
    voxels.
    """
    depth = check_levels(levels)
    if isinstance(points, np.ndarray):
        # dtype given explicitly: mx.array would otherwise narrow float64 to float32.
        points = mx.array(points.astype(np.float64, copy=False), dtype=mx.float64)
    if not isinstance(points, mx.array) or points.ndim != 2 or points.shape[1] != 3:
        raise ValueError("points must be an mlx.core.array (or NumPy array) of shape (P, 3)")
    if points.shape[0] == 0:
        raise shared.empty_cloud()
    side = float(1 << depth)
    with mx.stream(mx.cpu):
        p = points.astype(mx.float64)
        if not bool(mx.all(mx.isfinite(p)).item()):
            raise shared.non_finite_cloud()
        inside = bool(mx.all((p >= 0) & (p < side)).item())
        if fit is None:
            fit = not (inside and bool(mx.all(p == mx.floor(p)).item()))
        if fit:
            low = mx.min(p, axis=0)
            extent = float(np.asarray(mx.max(mx.max(p, axis=0) - low)))
            scale = shared.fit_scale(extent, depth)
            cells = mx.clip(mx.floor((p - low) * scale), 0, side - 1)
        else:
            if not inside:
                raise shared.outside_grid(depth)
            cells = mx.floor(p)
        spatial = cells.astype(mx.int32)
        mx.eval(spatial)
    rows = mx.concatenate(
        [mx.full((int(spatial.shape[0]), 1), int(batch), dtype=mx.int32), spatial], axis=1
    )
    rows = rows[canonical_order(rows)]
    return rows[flat_nonzero(mx.logical_not(_same_as_previous(rows)))]
