"""Embedding lookup on MLX: rows of a ``(num_embeddings, C)`` table picked by integer indices.

The contract's ``embedding_lookup`` reads ``weight[indices]``.  An index
outside ``[0, num_embeddings)`` is an error naming the first bad index and its
position (the reference system leaves it undefined; MLX's gather would read
out of bounds), checked with one vectorised comparison before the gather.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from lattice_contract.dialect import embedding_index_error
from lattice_contract.frontend import Attrs, implement, op_errors
from lattice_contract.frontend import signatures as sig

from mlx_lattice.coords import scalar_int

__all__ = ["check_indices", "embedding_lookup"]

_FLOATS = (mx.float32, mx.float16, mx.bfloat16)
_INDEX_DTYPES = (mx.int32, mx.int64)


def check_indices(indices: object, rows: int, op: str = "embedding_lookup") -> mx.array:
    """A rank-1 int32/int64 index vector with every entry in ``[0, rows)``, or a clear error."""
    op_errors.check_index_array(op, indices, mx.array)
    assert isinstance(indices, mx.array)
    bad = (indices < 0) | (indices >= rows)
    if indices.size and bool(mx.any(bad).item()):
        position = scalar_int(mx.argmax(bad.astype(mx.int32)))
        raise embedding_index_error(position, scalar_int(indices[position]), rows)
    return indices


def _embedding_lookup(indices: Any, weight: mx.array, attrs: Attrs) -> mx.array:
    op_errors.check_embedding_table(weight, mx.array, _FLOATS)
    rows = check_indices(indices, int(weight.shape[0]))
    return weight[rows]


embedding_lookup: sig.EmbeddingLookup[mx.array] = implement("embedding_lookup", _embedding_lookup)
