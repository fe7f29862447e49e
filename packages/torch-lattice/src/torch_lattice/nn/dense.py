"""The dense hand-off on torch: ``ToDense`` and OpenPCDet's ``HeightCompression``.

Each layer's constructor, docstring and repr are declared once for both
runtimes (:mod:`lattice_contract.frontend.nn_layers`); the class here puts
:class:`~torch_lattice.nn.base.Module` behind it and its ``forward`` calls
:func:`torch_lattice.ops.sparse_to_dense` (``lattice.sparse.to_dense``).
"""

from __future__ import annotations

import torch
from lattice_contract.frontend import nn_layers

from torch_lattice import ops
from torch_lattice.nn.base import Module
from torch_lattice.sparse import SparseTensor

__all__ = ["HeightCompression", "ToDense"]


class ToDense(nn_layers.ToDense, Module):
    def forward(self, x: SparseTensor) -> torch.Tensor:
        """Scatter ``x``'s rows into the layer's zero grid."""
        return ops.sparse_to_dense(
            x, spatial_shape=self.spatial_shape, batch_size=self.batch_size, layout=self.layout
        )


class HeightCompression(nn_layers.HeightCompression, ToDense): ...
