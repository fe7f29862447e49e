"""Upsampling and lookup modules on MLX: PoolTranspose3d, TrilinearUpsample3d, Embedding.

Mirrors of the ``torch_lattice.nn`` modules of the same names: the two
upsampling modules have no parameters and take an optional target
(``m(x, target)``) and are declared once for both runtimes in
:mod:`lattice_contract.nn_layers`; ``Embedding`` holds ``weight`` (num_embeddings, C).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract import nn_layers
from lattice_contract.options import positive_int

from mlx_lattice.nn.module import LatticeModule
from mlx_lattice.ops.embedding import embedding_lookup


class PoolTranspose3d(nn_layers.PoolTranspose3d, LatticeModule): ...


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, LatticeModule): ...


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
