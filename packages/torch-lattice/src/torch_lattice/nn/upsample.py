"""Upsampling and lookup modules: ``PoolTranspose3d``, ``TrilinearUpsample3d``, ``Embedding``.

``PoolTranspose3d`` and ``TrilinearUpsample3d`` have no parameters; called
with a second argument (``m(x, target)``) they produce exactly the target's
rows, otherwise their derived support (see :mod:`torch_lattice.ops.upsample`).
``Embedding`` holds ``weight`` (num_embeddings, C) (layout ``embedding_n_c``)
and maps an int32 index vector to ``weight[indices]``; an index out of range
is an error naming it.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.options import positive_int, window

from torch_lattice import ops
from torch_lattice.sparse import SparseTensor

__all__ = ["Embedding", "PoolTranspose3d", "TrilinearUpsample3d"]

Triple = tuple[int, int, int]


class PoolTranspose3d(torch.nn.Module):
    """Mean of the coarse rows reaching each fine row (``lattice.pool_transpose3d``).

    ``stride`` defaults to the kernel size (the inverse of a non-overlapping
    pool, as ``torch.nn`` pools default their stride).
    """

    def __init__(
        self,
        kernel_size: int | Triple,
        stride: int | Triple | None = None,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = window(
            kernel_size, stride, padding, dilation
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}"
        )

    def forward(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        return ops.pool_transpose3d(
            x,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            coordinates=target,
        )


class TrilinearUpsample3d(torch.nn.Module):
    """Renormalised trilinear upsampling by ``stride`` (``lattice.trilinear_upsample3d``)."""

    def __init__(self, stride: int | Triple) -> None:
        super().__init__()
        self.stride = window(1, stride).stride

    def extra_repr(self) -> str:
        return f"stride={self.stride}"

    def forward(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        return ops.trilinear_upsample3d(x, stride=self.stride, coordinates=target)


class Embedding(torch.nn.Module):
    """A learned table ``weight`` (num_embeddings, C) read by ``lattice.embedding_lookup``.

    Initialised N(0, 1) like ``torch.nn.Embedding``.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim")
        self.weight = torch.nn.Parameter(
            torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Standard normal entries (``torch.nn.Embedding``'s default)."""
        torch.nn.init.normal_(self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return ops.embedding_lookup(indices, self.weight)
