"""The dense hand-off on MLX: ``ToDense`` and OpenPCDet's ``HeightCompression``.

The same layers as ``torch_lattice.nn.dense``, declared once in
:mod:`lattice_contract.frontend.nn_layers`; each ``__call__`` calls
:func:`mlx_lattice.ops.sparse_to_dense` (``lattice.sparse.to_dense``).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.frontend import nn_layers

from mlx_lattice import ops
from mlx_lattice.nn.module import LatticeModule
from mlx_lattice.sparse import SparseTensor

__all__ = ["HeightCompression", "ToDense"]


class ToDense(nn_layers.ToDense, LatticeModule):
    def __call__(self, x: SparseTensor) -> mx.array:
        """Scatter ``x``'s rows into the layer's zero grid."""
        return ops.sparse_to_dense(
            x, spatial_shape=self.spatial_shape, batch_size=self.batch_size, layout=self.layout
        )


class HeightCompression(nn_layers.HeightCompression, ToDense): ...
