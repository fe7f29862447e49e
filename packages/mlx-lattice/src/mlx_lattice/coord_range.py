"""The int32 coordinate rule (:mod:`lattice_contract.dialect.coord_range`) on MLX arrays."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import INT32_MAX, INT32_MIN, Int32CoordinateError

__all__ = ["check_emitted"]

Triple = tuple[int, int, int]


def check_emitted(
    logical: mx.array,
    out_stride: Triple,
    source_rows: mx.array,
    source_logical: mx.array,
    in_stride: Triple,
) -> None:
    """Raise if any int64 candidate row ``(m, 4)`` leaves int32 once scaled to physical units.

    ``source_rows[i]`` is the input row that produced candidate ``i``;
    ``source_logical`` the input's logical rows at ``in_stride`` (for the
    message).  Vectorised: one multiply, compare and reduction.
    """
    if logical.size == 0:
        return
    physical = logical[:, 1:] * mx.array(out_stride, dtype=mx.int64)
    bad = (physical < INT32_MIN) | (physical > INT32_MAX)
    if not bool(mx.any(bad).item()):
        return
    flags = np.asarray(bad).reshape(-1)
    first = int(np.flatnonzero(flags)[0])
    i, axis = divmod(first, 3)
    row = int(np.asarray(source_rows[i]))
    scale = np.array((1, *in_stride), dtype=np.int64)
    coords = tuple(int(v) for v in np.asarray(source_logical[row]).astype(np.int64) * scale)
    value = int(np.asarray(physical[i, axis]))
    raise Int32CoordinateError("", axis + 1, value, row, coords)
