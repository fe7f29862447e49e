"""The int32 coordinate rule (:mod:`lattice_contract.dialect.coord_range`) on torch tensors."""

from __future__ import annotations

import torch
from lattice_contract.dialect import INT32_MAX, INT32_MIN, Int32CoordinateError

from torch_lattice.sparse import Support, Triple

__all__ = ["check_emitted"]


def check_emitted(
    logical: torch.Tensor, out_stride: Triple, source_rows: torch.Tensor, support: Support
) -> None:
    """Raise if any candidate output row leaves int32 once scaled to physical units.

    ``logical`` holds int64 candidate rows ``(m, 4)`` (batch first) or their
    spatial part ``(m, 3)``; ``source_rows[i]`` is the input row that
    produced candidate ``i``.  Vectorised: one multiply and compare.
    """
    if logical.numel() == 0:
        return
    spatial = logical[:, -3:]
    physical = spatial * torch.tensor(out_stride, dtype=torch.int64, device=logical.device)
    bad = (physical < INT32_MIN) | (physical > INT32_MAX)
    if not bool(bad.any()):
        return
    first = int(torch.nonzero(bad.reshape(-1))[0])
    i, axis = divmod(first, 3)
    row = int(source_rows[i])
    coords = tuple(int(v) for v in support.coords[row].tolist())
    raise Int32CoordinateError("", axis + 1, int(physical[i, axis]), row, coords)
