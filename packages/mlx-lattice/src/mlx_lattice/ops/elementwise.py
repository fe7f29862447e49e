"""``elementwise`` on MLX: a deterministic unary transform of an f32 feature matrix.

Kinds are :data:`lattice_contract.op_rules.ELEMENTWISE_KINDS`: ``exp`` and
``round`` (round half to even, as ``mx.round``).  The contract types this op
on rank-2 f32 only; other dtypes are refused rather than silently promoted.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.shared_errors import check_elementwise

__all__ = ["elementwise"]


def elementwise(x: mx.array, *, kind: str) -> mx.array:
    """``exp(x)`` or ``round(x)`` (half to even) of a rank-2 float32 array."""
    exp = check_elementwise(kind, x, mx.array) == "exp"
    return mx.exp(x) if exp else mx.round(x)
