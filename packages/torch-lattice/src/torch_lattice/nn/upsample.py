"""Upsampling and lookup modules: ``PoolTranspose3d``, ``TrilinearUpsample3d``, ``Embedding``.

``PoolTranspose3d`` and ``TrilinearUpsample3d`` have no parameters; called
with a second argument (``m(x, target)``) they produce exactly the target's
rows, otherwise their derived support (see :mod:`torch_lattice.ops.upsample`).
``Embedding`` holds ``weight`` (num_embeddings, C) (layout ``embedding_n_c``)
and maps an int32 index vector to ``weight[indices]``; an index out of range
is an error naming it.  The two upsampling modules are declared once for both
runtimes in :mod:`lattice_contract.nn_layers`.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract import nn_features, nn_layers

from torch_lattice.nn.base import Module


class PoolTranspose3d(nn_layers.PoolTranspose3d, Module): ...


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, Module): ...


class Embedding(nn_features.Embedding, Module):
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        size = self._configure(num_embeddings, embedding_dim)
        self.weight = torch.nn.Parameter(torch.empty(*size, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Standard normal entries (``torch.nn.Embedding``'s default)."""
        torch.nn.init.normal_(self.weight)
