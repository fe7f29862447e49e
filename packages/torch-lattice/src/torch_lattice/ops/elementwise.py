"""``elementwise``: a deterministic unary transform of an f32 feature matrix.

Kinds are :data:`lattice_contract.dialect.extra_semantics.ELEMENTWISE_KINDS`: ``exp`` and
``round`` (round half to even, IEEE ``roundTiesToEven``, as ``torch.round``).
The contract types this op on rank-2 f32 only; other dtypes are refused
rather than silently promoted.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.frontend import Attrs, check_elementwise, implement
from lattice_contract.frontend import signatures as sig

from torch_lattice._trace import traced

__all__ = ["elementwise"]


def _elementwise(x: Any, attrs: Attrs) -> torch.Tensor:
    kind = attrs["kind"]
    exp = check_elementwise(kind, x, torch.Tensor) == "exp"
    return torch.exp(x) if exp else torch.round(x)


elementwise: sig.Elementwise[torch.Tensor] = implement(
    "elementwise", _elementwise, around=traced("elementwise")
)
