"""Coordinate-aligned sparse algebra: ``sparse_binary``, ``sparse_cat``, ``sparse_reindex``.

Rows are matched by coordinates (both operands at the same stride).  Output
row order: ``inner`` and ``left`` keep lhs order (inner drops lhs rows rhs
lacks); ``right`` keeps rhs order (the mirror of ``left``); ``outer`` appends
the rhs-only rows in rhs order.  Where one side has no row it contributes its
fill (``lhs_fill`` / ``rhs_fill`` of ``sparse_binary``, default 0; always 0
for ``sparse_cat``), so with zero fills ``sub`` gives ``-rhs`` on rhs-only
rows.  When the result has exactly one operand's rows it shares that
operand's support (and its kernel-map cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from lattice_contract.dialect import BinaryOp, Join
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import ops as api
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.ops._common import compute_dtype, require_sparse
from torch_lattice.sparse import SparseTensor, Support

__all__ = ["sparse_binary", "sparse_cat", "sparse_reindex"]


def _check_pair(lhs: Any, rhs: Any, op: str) -> tuple[SparseTensor, SparseTensor]:
    a = require_sparse(lhs, op, "lhs")
    b = require_sparse(rhs, op, "rhs")
    op_errors.check_aligned_pair(op, a.stride, b.stride, a.dtype, b.dtype)
    if a.device != b.device:
        raise ValueError(f"{op}: operands are on {a.device} and {b.device}")
    return a, b


def _gather(feats: torch.Tensor, rows: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """``feats[rows]`` with ``fill`` where ``rows`` is -1 (and for an empty source)."""
    if feats.shape[0] == 0:
        return feats.new_full((rows.shape[0], feats.shape[1]), fill)
    gathered = feats.index_select(0, rows.clamp(min=0))
    return torch.where((rows >= 0)[:, None], gathered, torch.full_like(gathered, fill))


def _rows_of(source: Support, target: Support) -> torch.Tensor:
    """For each target row, the source row with the same coordinates (-1 if none)."""
    if source is target:
        return torch.arange(target.num_rows, device=target.coords.device)
    return source.table.find(target.logical)


class _Aligned:
    """Row alignment of two operands under a join."""

    def __init__(self, a: SparseTensor, b: SparseTensor, join: Join) -> None:
        # A right join is the left join of the swapped pair, with the sides swapped back.
        self.swapped = join is Join.right
        if self.swapped:
            a, b, join = b, a, Join.left
        found = _rows_of(b.support, a.support)  # rhs row per lhs row
        self.same = bool((found >= 0).all()) and a.num_rows == b.num_rows
        if join is Join.inner and not self.same:
            self.lhs_rows = (found >= 0).nonzero().squeeze(1)
            self.rhs_rows = found[self.lhs_rows]
            self.only_rhs = found[:0]
        else:
            self.lhs_rows = torch.arange(a.num_rows, device=a.device)
            self.rhs_rows = found
            if join is Join.outer and not self.same:
                in_lhs = torch.zeros(b.num_rows, dtype=torch.bool, device=b.device)
                in_lhs[found[found >= 0]] = True
                self.only_rhs = (~in_lhs).nonzero().squeeze(1)
            else:
                self.only_rhs = found[:0]
        self.keep_lhs_support = bool(
            self.lhs_rows.numel() == a.num_rows and not self.only_rhs.numel()
        )
        self.a, self.b = a, b

    def support(self) -> Support:
        a, b = self.a, self.b
        if self.keep_lhs_support:
            return a.support
        coords = torch.cat([a.coords[self.lhs_rows], b.coords[self.only_rhs]])
        return Support(coords, a.stride)

    def sides(
        self, lhs_fill: float = 0.0, rhs_fill: float = 0.0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """lhs and rhs features on the output rows, each side's fill where it is missing."""
        a, b = self.a, self.b
        first_fill, second_fill = (rhs_fill, lhs_fill) if self.swapped else (lhs_fill, rhs_fill)
        first = a.feats.index_select(0, self.lhs_rows)
        second = _gather(b.feats, self.rhs_rows, second_fill)
        if self.only_rhs.numel():
            pad = first.new_full((self.only_rhs.numel(), a.num_channels), first_fill)
            first = torch.cat([first, pad])
            second = torch.cat([second, b.feats.index_select(0, self.only_rhs)])
        return (second, first) if self.swapped else (first, second)


_BINARY: dict[BinaryOp, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    op: getattr(torch, name) for op, name in api.BINARY_FUNCTIONS.items()
}


def _sparse_binary(lhs: Any, rhs: Any, attrs: Attrs) -> SparseTensor:
    a, b = _check_pair(lhs, rhs, "sparse_binary")
    kind, j = attrs["op"], attrs["join"]
    if a.num_channels != b.num_channels:
        raise op_errors.channel_count_mismatch("sparse_binary", a.num_channels, b.num_channels)
    aligned = _Aligned(a, b, j)
    left, right = aligned.sides(float(attrs["lhs_fill"]), float(attrs["rhs_fill"]))
    dtype = compute_dtype(a.dtype)
    out = _BINARY[kind](left.to(dtype), right.to(dtype)).to(a.dtype)
    return SparseTensor._make(aligned.support(), out)


sparse_binary: sig.SparseBinary[SparseTensor] = implement(
    "sparse_binary", _sparse_binary, around=traced("sparse_binary")
)


def _sparse_cat(lhs: Any, rhs: Any, attrs: Attrs) -> SparseTensor:
    join = attrs["join"]
    a, b = _check_pair(lhs, rhs, "sparse_cat")
    aligned = _Aligned(a, b, join)
    left, right = aligned.sides()
    return SparseTensor._make(aligned.support(), torch.cat([left, right], dim=1))


sparse_cat: sig.SparseCat[SparseTensor] = implement(
    "sparse_cat", _sparse_cat, around=traced("sparse_cat")
)


def _sparse_reindex(input: Any, target: Any, attrs: Attrs) -> SparseTensor:
    fill = attrs["fill"]
    x = require_sparse(input, "sparse_reindex")
    t = require_sparse(target, "sparse_reindex", "target")
    if x.stride != t.stride:
        raise op_errors.stride_mismatch("sparse_reindex", "input", x.stride, "target", t.stride)
    if x.device != t.device:
        raise ValueError(f"sparse_reindex: input is on {x.device}, target on {t.device}")
    rows = _rows_of(x.support, t.support)
    return SparseTensor._make(t.support, _gather(x.feats, rows, float(fill)))


sparse_reindex: sig.SparseReindex[SparseTensor] = implement(
    "sparse_reindex", _sparse_reindex, around=traced("sparse_reindex")
)
