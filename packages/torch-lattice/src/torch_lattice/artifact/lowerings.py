"""Torch lowerings of every lattice op: the contract's standard table bound to torch.

The lowerings themselves are written once, in
:mod:`lattice_contract.runtime.standard_lowerings`, over the
:class:`~lattice_contract.runtime.ops.RuntimeOps` that ``torch_lattice.ops``
satisfies, so an artifact computes exactly what the eager model computes with
the same functional ops.  Packed (``i4``/``i8``) weights arrive as
:class:`~torch_lattice.ops.quant.QuantizedWeight`; ``torch_lattice.ops``
dequantizes them in its compute dtype.
"""

from __future__ import annotations

from lattice_contract.runtime import standard_lowerings

from torch_lattice.artifact.backend import TORCH_BACKEND

__all__ = ["LOWERINGS"]

LOWERINGS = standard_lowerings(TORCH_BACKEND)
"""The torch runtime's lowerings and primitive implementations."""
