"""Upsampling and lookup modules on MLX: PoolTranspose3d, TrilinearUpsample3d, Embedding.

Mirrors of the ``torch_lattice.nn`` modules of the same names: the two
upsampling modules have no parameters and take an optional target
(``m(x, target)``); ``Embedding`` holds ``weight`` (num_embeddings, C).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.options import positive_int, window

from mlx_lattice.nn.module import LatticeModule
from mlx_lattice.ops.conv import IntOrTriple
from mlx_lattice.ops.embedding import embedding_lookup
from mlx_lattice.ops.upsample import pool_transpose3d, trilinear_upsample3d
from mlx_lattice.sparse import SparseTensor

__all__ = ["Embedding", "PoolTranspose3d", "TrilinearUpsample3d"]


class PoolTranspose3d(LatticeModule):
    """Mean of the coarse rows reaching each fine row; ``stride`` defaults to the kernel size."""

    def __init__(
        self,
        kernel_size: IntOrTriple,
        stride: IntOrTriple | None = None,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
    ) -> None:
        super().__init__()
        geometry = window(kernel_size, stride, padding, dilation)
        self.kernel_size, self.stride, self.padding, self.dilation = geometry

    def __call__(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        return pool_transpose3d(
            x,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            coordinates=target,
        )

    def _extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}"
        )


class TrilinearUpsample3d(LatticeModule):
    """Renormalised trilinear upsampling by ``stride`` (``lattice.trilinear_upsample3d``)."""

    def __init__(self, stride: IntOrTriple) -> None:
        super().__init__()
        self.stride = window(1, stride).stride

    def __call__(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        return trilinear_upsample3d(x, stride=self.stride, coordinates=target)

    def _extra_repr(self) -> str:
        return f"stride={self.stride}"


class Embedding(LatticeModule):
    """A table ``weight`` (num_embeddings, C) read by ``lattice.embedding_lookup``; N(0, 1) init."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim")
        self.weight = mx.random.normal((num_embeddings, embedding_dim))

    def __call__(self, indices: mx.array) -> mx.array:
        return embedding_lookup(indices, self.weight)

    def _extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
