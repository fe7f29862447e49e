"""``elementwise`` on MLX: a deterministic unary transform of an f32 feature matrix.

Kinds are :data:`lattice_contract.op_rules.ELEMENTWISE_KINDS`: ``exp`` and
``round`` (round half to even, as ``mx.round``).  The contract types this op
on rank-2 f32 only; other dtypes are refused rather than silently promoted.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.op_rules import check_elementwise_kind

__all__ = ["elementwise"]


def elementwise(x: mx.array, *, kind: str) -> mx.array:
    """``exp(x)`` or ``round(x)`` (half to even) of a rank-2 float32 array."""
    check_elementwise_kind(kind)
    if not isinstance(x, mx.array):
        raise TypeError(f"elementwise: x must be an mx.array, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"elementwise: x must have shape (N, C), got {tuple(x.shape)}")
    if x.dtype != mx.float32:
        raise TypeError(f"elementwise: x must be float32, got {x.dtype}; cast it first")
    return mx.exp(x) if kind == "exp" else mx.round(x)
