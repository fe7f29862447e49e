"""Occupancy hierarchies of voxel clouds on torch (CPU or CUDA), as geometry codecs code them.

The steps, checks and messages of every public function live once in
:class:`lattice_contract.frontend.occupancy.OccupancyOps`, whose module also
explains the hierarchy, the child bit order (x fastest, as upstream) and why
canonical order refines from level to level without sorting again.  Here are
only the tensor primitives those steps call (shifts, segment sums, masks, all
on the input's device) and the binding of the public names to them; the MLX
runtime binds the same steps to its arrays, so the two agree row for row.
"""

from __future__ import annotations

import torch
from lattice_contract.dialect import kernel_taps
from lattice_contract.frontend import CHILD_TAPS as CHILD_TAPS
from lattice_contract.frontend import TAP_BITS as _TAP_BITS
from lattice_contract.frontend import occupancy as shared

from torch_lattice.coords import canonical_order

__all__ = list(shared.RUNTIME_NAMES)


class OccupancyHierarchy(shared.OccupancyHierarchy[torch.Tensor]):
    """:class:`lattice_contract.frontend.occupancy.OccupancyHierarchy` of this runtime's arrays."""


def _same_as_previous(rows: torch.Tensor) -> torch.Tensor:
    """Bool per row: equal to the row before it (row 0 never is)."""
    same = torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
    if rows.shape[0] > 1:
        same[1:] = (rows[1:] == rows[:-1]).all(dim=1)
    return same


class _TorchOccupancy(shared.OccupancyOps[torch.Tensor, torch.Tensor, OccupancyHierarchy]):
    """The torch primitives of :class:`~lattice_contract.frontend.occupancy.OccupancyOps`."""

    array_type = torch.Tensor
    array_word = "torch.Tensor"
    points_word = "a torch.Tensor"
    hierarchy_type = OccupancyHierarchy

    def _any_negative_batch(self, rows: torch.Tensor) -> bool:
        return bool((rows[:, 0] < 0).any())

    def _canonical(self, rows: torch.Tensor) -> torch.Tensor:
        return rows[canonical_order(rows)]

    def _drop_repeats(self, rows: torch.Tensor) -> torch.Tensor:
        keep = ~_same_as_previous(rows)
        return rows if bool(keep.all()) else rows[keep]

    def _no_codes(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return rows.clone(), torch.zeros(0, dtype=torch.uint8, device=rows.device)

    def _downsample_sorted(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        device = rows.device
        parents = rows.clone()
        parents[:, 1:] = torch.bitwise_right_shift(rows[:, 1:], 1)  # floor(c / 2), also below 0
        parity = rows[:, 1:] & 1
        packed = parity[:, 0] * 4 + parity[:, 1] * 2 + parity[:, 2]
        table = torch.tensor(_TAP_BITS, dtype=torch.int32, device=device)
        bits = torch.bitwise_left_shift(torch.ones_like(packed), table[packed.long()])
        bits = torch.where(_same_as_previous(rows), torch.zeros_like(bits), bits)  # repeats: once
        first = ~_same_as_previous(parents)
        starts = first.nonzero().squeeze(1)
        # Children of one parent are contiguous, so each code is a segment sum of
        # distinct powers of two, i.e. their bitwise OR.
        segment = torch.cumsum(first.to(torch.int64), dim=0) - 1
        codes = torch.zeros(starts.shape[0], dtype=torch.int32, device=device)
        codes.index_add_(0, segment, bits.to(torch.int32))
        return parents[starts], codes.to(torch.uint8)

    def _is_codes(self, codes: object) -> bool:
        return isinstance(codes, torch.Tensor) and codes.dtype == torch.uint8 and codes.ndim == 1

    def _bits(self, codes: torch.Tensor) -> torch.Tensor:
        shifts = torch.arange(8, dtype=torch.int32, device=codes.device)
        return ((codes.to(torch.int32)[:, None] >> shifts) & 1).bool()

    def _candidates(self, parents: torch.Tensor) -> torch.Tensor:
        offsets = torch.zeros((8, 4), dtype=torch.int32, device=parents.device)
        offsets[:, 1:] = torch.tensor(kernel_taps(2), dtype=torch.int32, device=parents.device)
        doubled = parents.clone()
        doubled[:, 1:] *= 2
        return (doubled[:, None, :] + offsets[None, :, :]).reshape(-1, 4)

    def _occupied(self, candidates: torch.Tensor, occupied: torch.Tensor) -> torch.Tensor:
        per_tap = occupied[:, list(_TAP_BITS)]  # candidates come in tap order
        return candidates[per_tap.reshape(-1)]

    def _points(self, points: object) -> torch.Tensor | None:
        if not isinstance(points, torch.Tensor) or points.ndim != 2 or points.shape[1] != 3:
            return None
        return points.to(torch.float64)

    def _grid_facts(self, points: torch.Tensor, side: float) -> tuple[bool, bool, bool]:
        finite = bool(torch.isfinite(points).all())
        inside = bool(((points >= 0) & (points < side)).all())
        return finite, inside, bool((points == torch.floor(points)).all())

    def _fit_cells(self, points: torch.Tensor, depth: int) -> torch.Tensor:
        low = points.min(dim=0).values
        extent = float((points.max(dim=0).values - low).max())
        scale = shared.fit_scale(extent, depth)
        return torch.floor((points - low) * scale).clamp_(0, float(1 << depth) - 1)

    def _floor_cells(self, points: torch.Tensor) -> torch.Tensor:
        return torch.floor(points)

    def _rows(self, cells: torch.Tensor, batch: int) -> torch.Tensor:
        rows = torch.empty((cells.shape[0], 4), dtype=torch.int32, device=cells.device)
        rows[:, 0] = batch
        rows[:, 1:] = cells.to(torch.int32)
        return rows


_OPS = _TorchOccupancy()

morton_sort = _OPS.morton_sort
downsample_occupancy = _OPS.downsample_occupancy
child_bits = _OPS.child_bits
candidate_children = _OPS.candidate_children
expand_occupancy = _OPS.expand_occupancy
occupancy_hierarchy = _OPS.occupancy_hierarchy
quantize_points = _OPS.quantize_points
