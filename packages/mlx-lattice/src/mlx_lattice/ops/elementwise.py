"""``elementwise`` on MLX: a deterministic unary transform of an f32 feature matrix.

Kinds are :data:`lattice_contract.op_rules.ELEMENTWISE_KINDS`: ``exp`` and
``round`` (round half to even, as ``mx.round``).  The contract types this op
on rank-2 f32 only; other dtypes are refused rather than silently promoted.
"""

from __future__ import annotations

from typing import Unpack

import mlx.core as mx
from lattice_contract import api_ops as api
from lattice_contract.shared_errors import check_elementwise

__all__ = ["elementwise"]


@api.declare("elementwise")
def elementwise(x: mx.array, **attrs: Unpack[api.ElementwiseAttrs]) -> mx.array:
    exp = check_elementwise(api.normalise("elementwise", attrs)["kind"], x, mx.array) == "exp"
    return mx.exp(x) if exp else mx.round(x)
