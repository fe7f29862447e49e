"""The epilogue a fused conv block offers the next Triton conv (see :mod:`.fuse`).

Kept apart from :mod:`.fuse` (which needs the nn modules) so that the conv
entry can read the offer without importing them.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from torch_lattice.triton.kernels import Epilogue

__all__ = ["PENDING", "Pending", "take_epilogue"]


@dataclass
class Pending:
    """An epilogue offered to the next Triton conv; ``taken`` once a conv applied it."""

    scale: torch.Tensor
    shift: torch.Tensor
    relu: bool
    taken: bool = field(default=False)


PENDING: ContextVar[Pending | None] = ContextVar("torch_lattice_triton_epilogue", default=None)


def take_epilogue(bias: torch.Tensor | None, c_out: int) -> Epilogue | None:
    """The epilogue a fused block offers this conv, with the conv's ``bias`` folded in; or None.

    Called by the Triton conv entry.  An offer is taken at most once (by the
    block's one conv) and only for inference; a channel count that does not
    match the block's batch norm leaves it untaken (the block then runs the
    batch norm itself, which reports the mismatch as it always does).
    """
    pending = PENDING.get()
    if pending is None or pending.taken or torch.is_grad_enabled():
        return None
    if int(pending.scale.shape[0]) != c_out:
        return None
    pending.taken = True
    shift = pending.shift
    if bias is not None:
        shift = torch.addcmul(shift, bias.detach().float(), pending.scale)
    return Epilogue(scale=pending.scale, shift=shift.contiguous(), relu=pending.relu)
