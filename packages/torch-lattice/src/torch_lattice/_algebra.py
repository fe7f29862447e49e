"""``x + y`` and ``torch_lattice.cat`` on coordinate-aligned sparse tensors.

PyTorch users write residual blocks as ``out = block(x) + x`` and skip
connections as ``torch.cat([a, b], dim=1)``.  On sparse values both are the
contract's coordinate-aligned algebra (same stride required): ``+`` is
``lattice.sparse.binary {op = add}`` and ``cat`` folds
``lattice.sparse.cat`` over its arguments, channel-wise.  The default join is
``outer``, as in ``nn.SparseAdd`` / ``nn.SparseCat``: a row present on one
side only reads zeros on the other, which for tensors on the same rows (the
usual case) is the plain elementwise sum.  Both go through the traced
functional ops, so they export like the modules do.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice_contract.dialect import BinaryOp, Join

from torch_lattice import ops
from torch_lattice.sparse import SparseTensor

__all__ = ["add", "cat"]


def add(lhs: SparseTensor, rhs: SparseTensor, *, join: Join | str = Join.outer) -> SparseTensor:
    """``lhs + rhs`` on aligned rows (what ``SparseTensor.__add__`` calls)."""
    return ops.sparse_binary(lhs, rhs, op=BinaryOp.add, join=join)


def cat(
    tensors: Sequence[SparseTensor], dim: int = 1, *, join: Join | str = Join.outer
) -> SparseTensor:
    """Channel concatenation of aligned sparse tensors, left to right (``dim`` must be 1/-1).

    Rows are concatenated by coordinate, never by position, so ``dim=0``
    (stacking rows) has no meaning here: build one SparseTensor from the
    concatenated coordinates instead.  The default ``join="outer"`` keeps the
    union of the rows, zero-filling the channels a tensor lacks: unlike
    TorchSparse's ``cat``, which requires the same rows.  A U-Net skip whose
    upsampled rows differ from the skip's (``nn.ConvTranspose3d`` rather than
    :class:`~torch_lattice.nn.TargetConvTranspose3d`) then silently grows;
    pass ``join="left"`` (the first tensor's rows) or ``"inner"`` to say which
    rows you mean.
    """
    if dim not in (1, -1):
        raise ValueError(
            f"torch_lattice.cat concatenates channels (dim=1), got dim={dim}; to stack rows, "
            "build one SparseTensor from the concatenated coords and feats"
        )
    items = list(tensors)
    if not items:
        raise ValueError("torch_lattice.cat needs at least one SparseTensor")
    for i, item in enumerate(items):
        if not isinstance(item, SparseTensor):
            raise TypeError(
                f"torch_lattice.cat: item {i} is a {type(item).__name__}, not a SparseTensor"
            )
    out = items[0]
    for item in items[1:]:
        out = ops.sparse_cat(out, item, join=join)
    return out
