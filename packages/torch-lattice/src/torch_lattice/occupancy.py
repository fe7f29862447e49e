"""Occupancy hierarchies of voxel clouds: the octree that learned geometry codecs code.

A voxel cloud at depth ``L`` (integer coordinates in a ``2^L`` grid) has a
parent at depth ``L - 1`` for every occupied 2×2×2 block, and each parent is
described completely by an 8-bit *child-occupancy code*.  Repeating that down
to the root gives the hierarchy a geometry codec transmits: the root, then one
code per occupied voxel of every coarser level.  This module builds and
inverts that hierarchy on torch tensors, vectorised over rows (no loop runs
over points or voxels); it mirrors ``mlx_lattice.occupancy`` name for name.

**Child bit order.**  Bit ``b`` of parent ``p``'s code (value ``1 << b``) says
whether the child ``2 * p + CHILD_TAPS[b]`` is occupied, with the child's
offset ``(x, y, z)`` giving ``b = x + 2y + 4z`` (x fastest, as upstream, so
occupancy bytes are interchangeable; :func:`lattice_contract.kernel.octree_child_bit`).
Candidate children are listed in the other order, the tap order of a 2×2×2
kernel (z fastest), which is the row order of ``generative_conv_transpose3d``
with ``kernel_size=2, stride=2`` and the Morton order within a parent; the
table :func:`lattice_contract.kernel.octree_tap_bits` maps a tap to its bit.

**Morton order refines level by level.**  The canonical order (batch, then the
Morton code of ``x + 2^31, y + 2^31, z + 2^31``) of a level lists the children
of each parent contiguously, in tap order (the taps enumerate x, y, z parity
with x most significant, which is the Morton interleave of the lowest bit), and
the parents themselves in canonical order.  So a canonically ordered level
downsamples to a canonically ordered parent level by a shift and an
adjacent-unique pass, without sorting again, and expanding a canonically
ordered parent level yields its children in canonical order.  The offset
``2^31`` does not break this: for ``u = c + 2^31`` the parent's code word is
``v + 2^30`` with ``v = u >> 1 < 2^31``, and adding ``2^30`` only rewrites bit
30 of ``v`` as bits 31 and 30 (``b -> (b, 1 - b)``), so the highest bit plane
where two rows differ, the axes that differ there and which row is larger are
all unchanged.  The tests check the property against a direct sort.
"""

from __future__ import annotations

import torch
from lattice_contract import shared_occupancy as shared
from lattice_contract.kernel import kernel_taps
from lattice_contract.shared_occupancy import CHILD_TAPS, check_levels
from lattice_contract.shared_occupancy import TAP_BITS as _TAP_BITS

from torch_lattice.coords import canonical_order

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


def _check_coords(coords: object, what: str = "coords") -> torch.Tensor:
    shared.check_rows_array(what, coords, torch.Tensor)
    assert isinstance(coords, torch.Tensor)
    if coords.shape[0] and bool((coords[:, 0] < 0).any()):
        raise shared.negative_batch(what)
    return coords


def morton_sort(coords: torch.Tensor) -> torch.Tensor:
    """The rows of ``coords`` in canonical order (batch, then Morton code)."""
    coords = _check_coords(coords)
    return coords[canonical_order(coords)]


def _same_as_previous(rows: torch.Tensor) -> torch.Tensor:
    """Bool per row: equal to the row before it (row 0 never is)."""
    same = torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
    if rows.shape[0] > 1:
        same[1:] = (rows[1:] == rows[:-1]).all(dim=1)
    return same


def downsample_occupancy(
    coords: torch.Tensor, *, assume_canonical: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
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
    device = coords.device
    if coords.shape[0] == 0:
        return coords.clone(), torch.zeros(0, dtype=torch.uint8, device=device)
    parents = coords.clone()
    parents[:, 1:] = torch.bitwise_right_shift(coords[:, 1:], 1)  # floor(c / 2), also below 0
    parity = coords[:, 1:] & 1
    packed = parity[:, 0] * 4 + parity[:, 1] * 2 + parity[:, 2]
    table = torch.tensor(_TAP_BITS, dtype=torch.int32, device=device)
    bits = torch.bitwise_left_shift(torch.ones_like(packed), table[packed.long()])
    bits = torch.where(_same_as_previous(coords), torch.zeros_like(bits), bits)  # repeats: once
    first = ~_same_as_previous(parents)
    starts = first.nonzero().squeeze(1)
    # Children of one parent are contiguous, so each code is a segment sum of
    # distinct powers of two, i.e. their bitwise OR.
    segment = torch.cumsum(first.to(torch.int64), dim=0) - 1
    codes = torch.zeros(starts.shape[0], dtype=torch.int32, device=device)
    codes.index_add_(0, segment, bits.to(torch.int32))
    return parents[starts], codes.to(torch.uint8)


def child_bits(codes: torch.Tensor) -> torch.Tensor:
    """Bool ``(M, 8)``: entry ``[i, k]`` is bit ``k`` of ``codes[i]`` (child ``k`` occupied)."""
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8 or codes.ndim != 1:
        raise TypeError("codes must be a uint8 torch.Tensor of shape (M,)")
    shifts = torch.arange(8, dtype=torch.int32, device=codes.device)
    return ((codes.to(torch.int32)[:, None] >> shifts) & 1).bool()


def candidate_children(parents: torch.Tensor) -> torch.Tensor:
    """All eight candidate children: int32 ``(8 M, 4)``, row ``8 i + t`` = parent i's tap-t child.

    This is the support ``generative_conv_transpose3d(kernel_size=2, stride=2)``
    produces (in logical units), in parent-major, tap-minor order; tap ``t``'s
    child is described by code bit ``octree_tap_bits()[t]``.
    """
    parents = _check_coords(parents, "parents")
    offsets = torch.zeros((8, 4), dtype=torch.int32, device=parents.device)
    offsets[:, 1:] = torch.tensor(kernel_taps(2), dtype=torch.int32, device=parents.device)
    doubled = parents.clone()
    doubled[:, 1:] *= 2
    return (doubled[:, None, :] + offsets[None, :, :]).reshape(-1, 4)


def expand_occupancy(parents: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """The occupied children of ``parents`` given their codes (inverse of downsampling).

    Children come parent-major, tap-minor, which is canonical order when the
    parents are canonical.
    """
    parents = _check_coords(parents, "parents")
    occupied = child_bits(codes)
    if occupied.shape[0] != parents.shape[0]:
        raise shared.codes_per_parent(int(occupied.shape[0]), int(parents.shape[0]))
    per_tap = occupied[:, list(_TAP_BITS)]  # candidates come in tap order
    return candidate_children(parents)[per_tap.reshape(-1)]


class OccupancyHierarchy(shared.OccupancyHierarchy[torch.Tensor]):
    """:class:`lattice_contract.shared_occupancy.OccupancyHierarchy` of this runtime's arrays."""


def occupancy_hierarchy(
    coords: torch.Tensor, levels: int, *, assume_canonical: bool = False
) -> OccupancyHierarchy:
    """Downsample ``coords`` ``levels`` times; see :class:`OccupancyHierarchy`."""
    depth = check_levels(levels)
    current = _check_coords(coords)
    if not assume_canonical:
        current = current[canonical_order(current)]
        keep = ~_same_as_previous(current)
        if not bool(keep.all()):
            current = current[keep]
    found: list[torch.Tensor] = [current]
    codes: list[torch.Tensor] = []
    for _ in range(depth):
        current, code = downsample_occupancy(current, assume_canonical=True)
        found.append(current)
        codes.append(code)
    return OccupancyHierarchy(levels=tuple(reversed(found)), codes=tuple(reversed(codes)))


def quantize_points(
    points: torch.Tensor, levels: int, *, fit: bool | None = None, batch: int = 0
) -> torch.Tensor:
    """Voxelise points ``(P, 3)`` into a ``2^levels`` grid: unique int32 rows in canonical order.

    With ``fit=False`` the points are taken as voxel coordinates already
    (``floor`` of each), and every one must lie in ``[0, 2^levels)``.  With
    ``fit=True`` the bounding box is scaled uniformly so that its longest side
    spans the grid: ``floor((p - min) * 2^levels / longest_side)``, clamped to
    the last cell.  ``fit=None`` (the default) uses ``fit=False`` when every
    point is already an integer inside the grid (a pre-voxelised cloud, such
    as a Level-8 PLY) and ``fit=True`` otherwise.  Arithmetic is float64, so
    the MLX runtime (which does the same operations) gets the same voxels.
    """
    depth = check_levels(levels)
    if not isinstance(points, torch.Tensor) or points.ndim != 2 or points.shape[1] != 3:
        raise ValueError("points must be a torch.Tensor of shape (P, 3)")
    if not points.is_floating_point():
        points = points.to(torch.float64)
    if points.shape[0] == 0:
        raise shared.empty_cloud()
    p = points.to(torch.float64)
    if not bool(torch.isfinite(p).all()):
        raise shared.non_finite_cloud()
    side = float(1 << depth)
    inside = bool(((p >= 0) & (p < side)).all())
    if fit is None:
        fit = not (inside and bool((p == torch.floor(p)).all()))
    if fit:
        low = p.min(dim=0).values
        extent = float((p.max(dim=0).values - low).max())
        scale = shared.fit_scale(extent, depth)
        cells = torch.floor((p - low) * scale).clamp_(0, side - 1)
    else:
        if not inside:
            raise shared.outside_grid(depth)
        cells = torch.floor(p)
    rows = torch.empty((p.shape[0], 4), dtype=torch.int32, device=p.device)
    rows[:, 0] = int(batch)
    rows[:, 1:] = cells.to(torch.int32)
    rows = rows[canonical_order(rows)]
    return rows[~_same_as_previous(rows)]
