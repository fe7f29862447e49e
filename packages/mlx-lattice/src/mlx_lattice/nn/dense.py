"""The dense hand-off on MLX: ``ToDense`` and OpenPCDet's ``HeightCompression``.

The same layers as ``torch_lattice.nn.dense``: each stores its grid and calls
:func:`mlx_lattice.ops.sparse_to_dense` (``lattice.sparse.to_dense``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
from lattice_contract.dialect import DENSE_LAYOUTS, as_triple
from mlx.nn.layers.base import Module

from mlx_lattice import ops
from mlx_lattice.sparse import SparseTensor

__all__ = ["HeightCompression", "ToDense"]


class ToDense(Module):
    """The sparse value as a zero-filled dense array of a static grid (spconv's ``ToDense``).

    ``spatial_shape`` is the grid's (X, Y, Z) in cells of the value's stride
    and ``batch_size`` its batch items; ``layout`` orders the result
    (``"b_c_z_y_x"``, spconv's ``dense()`` of ``(b, z, y, x)`` indices, is the
    default).  A row outside the grid is an error, as in spconv.
    """

    def __init__(
        self, spatial_shape: int | Sequence[int], batch_size: int, layout: str = "b_c_z_y_x"
    ) -> None:
        super().__init__()
        if layout not in DENSE_LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(DENSE_LAYOUTS)}, got {layout!r}")
        self.spatial_shape = as_triple(spatial_shape, "spatial_shape")
        self.batch_size = int(batch_size)
        self.layout = layout

    def __call__(self, x: SparseTensor) -> mx.array:
        return ops.sparse_to_dense(
            x, spatial_shape=self.spatial_shape, batch_size=self.batch_size, layout=self.layout
        )


class HeightCompression(ToDense):
    """OpenPCDet's map-to-BEV: ``dense()`` then ``(N, C, Z, Y, X) -> (N, C * Z, Y, X)``."""

    def __init__(self, spatial_shape: int | Sequence[int], batch_size: int) -> None:
        super().__init__(spatial_shape, batch_size, layout="b_cz_y_x")
