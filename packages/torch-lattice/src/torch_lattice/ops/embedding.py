"""Embedding lookup: rows of a ``(num_embeddings, C)`` table picked by integer indices.

The contract's ``embedding_lookup`` reads ``weight[indices]``.  An index
outside ``[0, num_embeddings)`` is an error naming the first bad index and its
position (the reference system leaves it undefined); the check is one
vectorised comparison before the gather.  Autograd reaches the table.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import embedding_index_error
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced
from torch_lattice.sparse import FLOAT_DTYPES

__all__ = ["embedding_lookup"]

_INDEX_DTYPES = (torch.int32, torch.int64)


def check_indices(indices: Any, rows: int, op: str = "embedding_lookup") -> torch.Tensor:
    """A rank-1 int32/int64 index vector with every entry in ``[0, rows)``, or a clear error."""
    op_errors.check_index_array(op, indices, torch.Tensor)
    assert isinstance(indices, torch.Tensor)
    bad = (indices < 0) | (indices >= rows)
    if bool(bad.any()):
        position = int(bad.nonzero()[0].item())
        raise embedding_index_error(position, int(indices[position].item()), rows)
    return indices


def _embedding_lookup(indices: Any, weight: torch.Tensor, attrs: Attrs) -> torch.Tensor:
    op_errors.check_embedding_table(weight, torch.Tensor, FLOAT_DTYPES)
    rows = check_indices(indices, int(weight.shape[0]))
    return weight.index_select(0, rows.to(device=weight.device))


embedding_lookup: sig.EmbeddingLookup[torch.Tensor] = implement(
    "embedding_lookup", _embedding_lookup, around=traced("embedding_lookup")
)
