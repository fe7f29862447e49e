"""``elementwise`` on MLX: a deterministic unary transform of an f32 feature matrix.

Kinds are :data:`lattice_contract.dialect.extra_semantics.ELEMENTWISE_KINDS`: ``exp`` and
``round`` (round half to even, as ``mx.round``).  The contract types this op
on rank-2 f32 only; other dtypes are refused rather than silently promoted.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from lattice_contract.frontend import Attrs, check_elementwise, implement
from lattice_contract.frontend import signatures as sig

__all__ = ["elementwise"]


def _elementwise(x: Any, attrs: Attrs) -> mx.array:
    exp = check_elementwise(attrs["kind"], x, mx.array) == "exp"
    return mx.exp(x) if exp else mx.round(x)


elementwise: sig.Elementwise[mx.array] = implement("elementwise", _elementwise)
