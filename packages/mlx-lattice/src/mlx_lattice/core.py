"""mlx-lattice 0.6's ``mlx_lattice.core``: kernel specs, relations and coordinate utilities.

These are the building blocks the ops use, under the names 0.6 gave them:
:class:`KernelSpec` (a conv window, normalised once), :class:`KernelMap` and
the relation builders (:func:`subm_map`, :func:`conv_support`), and
coordinate set operations over ``(N, 4)`` int32 rows ``(batch, x, y, z)``.
Coordinates are physical, as everywhere in Lattice: a utility here never
divides by a stride (0.6 held lattice units; at stride 1 the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from lattice_contract.dialect import Triple, int_triple, subm_offsets

from mlx_lattice.coords import KeySpace, SupportIndex, flat_nonzero
from mlx_lattice.kernel_map import GeneratedSupport, KernelMap, conv_support, subm_map
from mlx_lattice.sparse import canonical_order, inverse_permutation

__all__ = [
    "GeneratedSupport",
    "KernelMap",
    "KernelSpec",
    "canonical_order",
    "conv_support",
    "coordinate_intersection",
    "coordinate_lookup",
    "coordinate_union",
    "inverse_permutation",
    "sparse_quantize",
    "subm_map",
]


@dataclass(frozen=True)
class KernelSpec:
    """A conv window: kernel size, stride, padding and dilation, each a per-axis triple."""

    kernel_size: Triple
    stride: Triple = (1, 1, 1)
    padding: Triple = (0, 0, 0)
    dilation: Triple = (1, 1, 1)

    @staticmethod
    def of(
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
    ) -> KernelSpec:
        """A spec from ints or triples (one int stands for all three axes)."""
        return KernelSpec(
            int_triple(kernel_size, "kernel_size", minimum=1),
            int_triple(stride, "stride", minimum=1),
            int_triple(padding, "padding", minimum=0),
            int_triple(dilation, "dilation", minimum=1),
        )

    @property
    def volume(self) -> int:
        """Number of kernel taps."""
        kx, ky, kz = self.kernel_size
        return kx * ky * kz

    def offsets(self) -> list[Triple]:
        """The taps' offsets in the contract's flattening (z fastest), centred."""
        return subm_offsets(self.kernel_size, self.dilation)


def _rows(coords: Any, name: str) -> mx.array:
    c = coords if isinstance(coords, mx.array) else mx.array(np.asarray(coords))
    if c.dtype != mx.int32 or c.ndim != 2 or c.shape[1] != 4:
        raise ValueError(
            f"{name} must be int32 coordinates of shape (N, 4), got {c.dtype} {c.shape}"
        )
    return c


def _space(*sets: mx.array) -> KeySpace:
    return KeySpace.of(mx.concatenate(list(sets), axis=0), margin=0)


def coordinate_lookup(support: Any, queries: Any) -> mx.array:
    """Row of each query in ``support`` (int32 ``(M,)``), ``-1`` where it is absent."""
    s, q = _rows(support, "support"), _rows(queries, "queries")
    if q.shape[0] == 0:
        return mx.zeros((0,), dtype=mx.int32)
    index = SupportIndex.build(s, _space(s, q))
    found, row = index.find(q)
    return mx.where(found, row, -1).astype(mx.int32)


def coordinate_union(a: Any, b: Any) -> mx.array:
    """Rows in ``a`` or ``b``: ``a``'s rows in order, then ``b``'s rows ``a`` lacks."""
    ca, cb = _rows(a, "a"), _rows(b, "b")
    missing = coordinate_lookup(ca, cb) < 0
    return mx.concatenate([ca, cb[flat_nonzero(missing)]], axis=0)


def coordinate_intersection(a: Any, b: Any) -> mx.array:
    """Rows of ``a`` (in ``a``'s order) that ``b`` also holds."""
    ca, cb = _rows(a, "a"), _rows(b, "b")
    return ca[flat_nonzero(coordinate_lookup(cb, ca) >= 0)]


def sparse_quantize(
    points: Any, voxel_size: float, batch_indices: Any = None
) -> tuple[mx.array, mx.array]:
    """Unique voxel rows of ``(P, 3)`` points and, per point, the row it fell in.

    Returns ``(coords (V, 4) int32, inverse (P,) int32)`` with
    ``coords[inverse]`` the cell of every point (cell ``floor(p / voxel_size)``),
    voxels in first-seen order.  ``batch_indices`` defaults to one batch item.
    """
    p = points if isinstance(points, mx.array) else mx.array(np.asarray(points, np.float32))
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points must have shape (P, 3), got {p.shape}")
    if not voxel_size > 0:
        raise ValueError(f"voxel_size must be positive, got {voxel_size}")
    n = int(p.shape[0])
    batch = mx.zeros((n,), mx.int32) if batch_indices is None else _batch(batch_indices, n)
    cells = mx.floor(p.astype(mx.float32) / voxel_size).astype(mx.int32)
    rows = mx.concatenate([batch[:, None], cells], axis=1)
    host = np.asarray(rows)
    _, first, inverse = np.unique(host, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = inverse_permutation(mx.array(order.astype(np.int32)))
    coords = rows[mx.array(np.sort(first).astype(np.int32))]
    return coords, rank[mx.array(inverse.reshape(-1).astype(np.int32))]


def _batch(batch_indices: Any, n: int) -> mx.array:
    b = (
        batch_indices
        if isinstance(batch_indices, mx.array)
        else mx.array(np.asarray(batch_indices))
    )
    if b.dtype != mx.int32 or tuple(b.shape) != (n,):
        raise ValueError(f"batch_indices must be int32 of shape ({n},), got {b.dtype} {b.shape}")
    return b
