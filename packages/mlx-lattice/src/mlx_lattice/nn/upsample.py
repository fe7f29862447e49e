"""Upsampling and lookup modules on MLX: PoolTranspose3d, TrilinearUpsample3d, Embedding.

Mirrors of the ``torch_lattice.nn`` modules of the same names: the two
upsampling modules have no parameters and take an optional target
(``m(x, target)``) and are declared once for both runtimes in
:mod:`lattice_contract.nn_layers`; ``Embedding`` holds ``weight`` (num_embeddings, C).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract import nn_features, nn_layers

from mlx_lattice.nn.module import LatticeModule


class PoolTranspose3d(nn_layers.PoolTranspose3d, LatticeModule): ...


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, LatticeModule): ...


class Embedding(nn_features.Embedding, LatticeModule):
    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.weight = mx.random.normal(self._configure(num_embeddings, embedding_dim))
