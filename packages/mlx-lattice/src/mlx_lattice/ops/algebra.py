"""Coordinate-aligned sparse algebra: reindex, elementwise binary ops, channel concat.

Two sparse values are aligned row by row through their coordinates, never by
position.  Both must sit at the same stride (their coordinates then live on
the same lattice).  Row order of the result (docs/semantics.md): ``inner`` and
``left`` keep the lhs order; ``right`` keeps the rhs order (the mirror of
``left``); ``outer`` is the ``left`` result followed by the rows only rhs has,
in rhs order.  Where one side has no row, it contributes its fill
(``lhs_fill`` / ``rhs_fill`` of ``sparse_binary``, default 0; always 0 for
``sparse_cat``), so with zero fills ``outer`` ``sub`` gives ``-rhs`` on
rhs-only rows.

Lookups use the shared support index of :mod:`mlx_lattice.coords` (sorted
packed keys and one ``searchsorted`` per query batch), cached with each
support, so repeated joins on one support build its index once.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from lattice_contract.dialect import Join
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from mlx_lattice.coords import flat_nonzero
from mlx_lattice.sparse import SparseTensor

__all__ = ["lookup_rows", "sparse_binary", "sparse_cat", "sparse_reindex"]


def lookup_rows(x: SparseTensor, logical: mx.array) -> tuple[mx.array, mx.array]:
    """``(found, row)`` of query rows ``(..., 4)`` (batch, logical x, y, z) in ``x``'s support.

    ``row`` is meaningful only where ``found`` is true.
    """
    return x.cache.index(x.logical_coords).find(logical)


def _require_sparse(value: object, op: str, name: str) -> SparseTensor:
    if not isinstance(value, SparseTensor):
        raise TypeError(f"{op}: {name} must be a SparseTensor, got {type(value).__name__}")
    return value


def _check_pair(lhs: object, rhs: object, op: str) -> tuple[SparseTensor, SparseTensor]:
    a = _require_sparse(lhs, op, "lhs")
    b = _require_sparse(rhs, op, "rhs")
    op_errors.check_aligned_pair(op, a.stride, b.stride, a.dtype, b.dtype)
    return a, b


def _aligned(
    lhs: SparseTensor, rhs: SparseTensor, join: Join
) -> tuple[mx.array | None, mx.array, mx.array, mx.array, mx.array | None]:
    """Row plan of a join.

    Returns ``(lhs_rows, rhs_of_lhs, found, rhs_only, coords)``: the lhs rows kept
    (None: all, in order), for each kept lhs row its rhs row and whether it
    exists, the rhs-only rows appended by ``outer`` (empty otherwise), and the
    result's coordinates (None: lhs's own support, unchanged).
    """
    found, rhs_row = lookup_rows(rhs, lhs.logical_coords)
    if join is Join.inner:
        keep = flat_nonzero(found)
        return keep, rhs_row[keep], mx.ones(keep.shape, dtype=mx.bool_), _none(), None
    if join is Join.left:
        return None, rhs_row, found, _none(), None
    in_lhs, _ = lookup_rows(lhs, rhs.logical_coords)
    only = flat_nonzero(mx.logical_not(in_lhs))
    coords = mx.concatenate([lhs.coords, rhs.coords[only]], axis=0)
    return None, rhs_row, found, only, coords


def _none() -> mx.array:
    return mx.zeros((0,), dtype=mx.int32)


def _join_features(
    lhs: SparseTensor,
    rhs: SparseTensor,
    join: Join,
    lhs_fill: float = 0.0,
    rhs_fill: float = 0.0,
) -> tuple[SparseTensor, mx.array, mx.array, mx.array | None, mx.array | None]:
    """Aligned f32 feature blocks ``(a, b)`` of the result rows.

    Returns ``(base, a, b, coords, keep)``: ``base`` is the operand whose row
    order the result follows (rhs for a right join, which is the left join
    of the swapped pair), ``coords``/``keep`` as :func:`_aligned` gives them
    for that operand.
    """
    if join is Join.right:
        base, b, a, coords, keep = _join_features(rhs, lhs, Join.left, rhs_fill, lhs_fill)
        return base, a, b, coords, keep
    keep, rhs_row, found, only, coords = _aligned(lhs, rhs, join)
    a = lhs.feats.astype(mx.float32)
    if keep is not None:
        a = a[keep]
    if rhs.num_rows == 0:
        b = mx.full((a.shape[0], rhs.num_channels), rhs_fill, dtype=mx.float32)
    else:
        b = rhs.feats.astype(mx.float32)[rhs_row]
        b = mx.where(found[:, None], b, mx.full(b.shape, rhs_fill, dtype=mx.float32))
    if only.shape[0] > 0:
        tail_b = rhs.feats.astype(mx.float32)[only]
        tail_a = mx.full((only.shape[0], lhs.num_channels), lhs_fill, dtype=mx.float32)
        a = mx.concatenate([a, tail_a], axis=0)
        b = mx.concatenate([b, tail_b], axis=0)
    return lhs, a, b, coords, keep


def _result(
    base: SparseTensor,
    feats: mx.array,
    coords: mx.array | None,
    keep: mx.array | None,
    dtype: mx.Dtype,
) -> SparseTensor:
    feats = feats.astype(dtype)
    if coords is None and keep is None:
        return base.with_feats(feats)  # same support as base: share its kernel-map cache
    if coords is None:
        assert keep is not None
        if keep.shape[0] == base.num_rows:
            return base.with_feats(feats)
        coords = base.coords[keep]
    return SparseTensor._from_parts(coords, feats, base.stride)


_BINARY = {op: getattr(mx, name) for op, name in api.BINARY_FUNCTIONS.items()}


def _sparse_binary(lhs: Any, rhs: Any, attrs: Attrs) -> SparseTensor:
    a_in, b_in = _check_pair(lhs, rhs, "sparse_binary")
    fn, how = _BINARY[attrs["op"]], attrs["join"]
    if a_in.num_channels != b_in.num_channels:
        raise op_errors.channel_count_mismatch(
            "sparse_binary", a_in.num_channels, b_in.num_channels
        )
    base, a, b, coords, keep = _join_features(
        a_in, b_in, how, float(attrs["lhs_fill"]), float(attrs["rhs_fill"])
    )
    return _result(base, fn(a, b), coords, keep, a_in.dtype)


sparse_binary: sig.SparseBinary[SparseTensor] = implement("sparse_binary", _sparse_binary)


def _sparse_cat(lhs: Any, rhs: Any, attrs: Attrs) -> SparseTensor:
    how = attrs["join"]
    a_in, b_in = _check_pair(lhs, rhs, "sparse_cat")
    base, a, b, coords, keep = _join_features(a_in, b_in, how)
    return _result(base, mx.concatenate([a, b], axis=1), coords, keep, a_in.dtype)


sparse_cat: sig.SparseCat[SparseTensor] = implement("sparse_cat", _sparse_cat)


def _sparse_reindex(input: Any, target: Any, attrs: Attrs) -> SparseTensor:
    fill = attrs["fill"]
    src = _require_sparse(input, "sparse_reindex", "input")
    dst = _require_sparse(target, "sparse_reindex", "target")
    if src.stride != dst.stride:
        raise op_errors.stride_mismatch("sparse_reindex", "input", src.stride, "target", dst.stride)
    if src.num_rows == 0:
        return dst.with_feats(mx.full((dst.num_rows, src.num_channels), fill, dtype=src.dtype))
    found, row = lookup_rows(src, dst.logical_coords)
    gathered = src.feats[row]
    return dst.with_feats(
        mx.where(found[:, None], gathered, mx.full(gathered.shape, fill, dtype=src.dtype))
    )


sparse_reindex: sig.SparseReindex[SparseTensor] = implement("sparse_reindex", _sparse_reindex)
