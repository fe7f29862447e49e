"""The canonical row order, once: the NumPy reference both runtimes are tested against.

Physical row order is not part of the contract (docs/semantics.md), so
comparisons align rows first, in the **canonical order**: by batch, then by
the Morton code of (x, y, z), with each int32 coordinate mapped to uint32 by
adding 2^31 and the 96 code bits interleaved from the most significant bit
down as x, y, z (z least significant in each triple).

This module is that definition in NumPy.  The MLX runtime and conformance use
it directly (MLX has no stable multi-key sort, and ordering is a comparison
step, never a per-layer one); the torch runtime keeps a device version (its
tensors may live on a GPU), which its tests check against this reference.

NumPy is imported when a function runs, not when the module is imported: the
rest of the contract stays importable with the standard library alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["canonical_order", "morton_keys"]

_spread_cache: list[Any] = []


def _spread_table() -> npt.NDArray[np.uint64]:
    """Byte -> 24-bit value with the byte's bit i moved to bit 3*i (built once)."""
    import numpy as np

    if not _spread_cache:
        values = np.arange(256, dtype=np.uint64)
        out = np.zeros(256, dtype=np.uint64)
        for bit in range(8):  # loop over bit positions, not rows
            out |= ((values >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit)
        _spread_cache.append(out)
    table: npt.NDArray[np.uint64] = _spread_cache[0]
    return table


def morton_keys(
    coords: Any,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Sort keys of the canonical order: (batch, high 48 Morton bits, low 48 bits).

    ``coords`` is anything ``numpy.asarray`` reads as integer ``(N, 4)`` rows
    ``(batch, x, y, z)``.  The code is built one byte plane at a time (most
    significant first) with a spread table, a handful of array operations.
    """
    import numpy as np

    c = np.asarray(coords)
    if c.ndim != 2 or c.shape[1] != 4:
        raise ValueError(f"coords must be (N, 4) rows (batch, x, y, z), got shape {c.shape}")
    if not np.issubdtype(c.dtype, np.integer):
        raise TypeError(f"coords must be integers, got {c.dtype}")
    spread = _spread_table()
    unsigned = (c[:, 1:].astype(np.int64) + (1 << 31)).astype(np.uint64)
    chunks = []
    for byte in (3, 2, 1, 0):  # most significant byte plane first
        plane = spread[(unsigned >> np.uint64(8 * byte)) & np.uint64(0xFF)]
        chunks.append((plane[:, 0] << np.uint64(2)) | (plane[:, 1] << np.uint64(1)) | plane[:, 2])
    high = (chunks[0] << np.uint64(24)) | chunks[1]
    low = (chunks[2] << np.uint64(24)) | chunks[3]
    return c[:, 0].astype(np.int64), high, low


def canonical_order(coords: Any) -> npt.NDArray[np.int64]:
    """Permutation (int64) with ``coords[perm]`` in canonical order; ties keep input order."""
    import numpy as np

    batch, high, low = morton_keys(coords)
    perm: npt.NDArray[np.int64] = np.lexsort((low, high, batch)).astype(np.int64)
    return perm
