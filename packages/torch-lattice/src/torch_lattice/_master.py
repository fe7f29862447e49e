"""Half-precision copies of f32 master weights that a conv saves by their master.

Under ``torch.autocast`` the nn modules run each conv with its f32 weight cast
to the autocast dtype (:mod:`torch_lattice.nn._amp`), a new tensor every call.
A conv's autograd function must keep its weight for the backward pass; keeping
that half copy would hold a second copy of every weight of the network from
the forward pass to the backward pass (tens of MiB for a MinkUNet).  The copy
instead records its master (:func:`half_copy`), and the conv functions save
the master, which the module holds anyway, and cast it again in backward
(:func:`weight_to_save`, :func:`restore_weight`): the same values, no extra
memory.  A weight without a recorded master is saved as it is.
"""

from __future__ import annotations

import torch

__all__ = ["half_copy", "master_of", "restore_weight", "weight_to_save"]

_MASTER = "_torch_lattice_master"


def half_copy(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``weight.to(dtype)`` (differentiable), remembering ``weight`` as its master.

    A conv weight (C_out, Kx, Ky, Kz, C_in) is copied into tap-major memory
    (Kx, Ky, Kz, C_in, C_out), the layout the Triton kernels read, so that the
    cast is the only copy a conv call makes of it (the shape, and every value,
    are ``weight``'s; only the strides differ).
    """
    if weight.dtype == dtype:
        return weight
    if weight.ndim == 5:
        c_out, _, ky, kz, c_in = weight.shape
        strides = (1, ky * kz * c_in * c_out, kz * c_in * c_out, c_in * c_out, c_out)
        copy = torch.empty_strided(weight.shape, strides, dtype=dtype, device=weight.device)
        copy.copy_(weight)
    else:
        copy = weight.to(dtype)
    setattr(copy, _MASTER, weight)
    return copy


def master_of(weight: torch.Tensor) -> torch.Tensor | None:
    """The f32 master ``weight`` was cast from (:func:`half_copy`), or None for any other weight."""
    master = getattr(weight, _MASTER, None)
    if isinstance(master, torch.Tensor) and master.shape == weight.shape:
        return master
    return None


def weight_to_save(weight: torch.Tensor) -> tuple[torch.Tensor, torch.dtype | None]:
    """What a conv saves for ``weight``: its master and the dtype to recast to, or itself."""
    master = master_of(weight)
    return (weight, None) if master is None else (master, weight.dtype)


def restore_weight(saved: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """The weight the forward pass used, from what :func:`weight_to_save` gave."""
    return saved if dtype is None else saved.detach().to(dtype)
