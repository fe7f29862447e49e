"""The dense hand-off: ``ToDense`` and OpenPCDet's ``HeightCompression``.

A sparse backbone ends where a 2D head begins: spconv's ``dense()`` writes the
rows into a zero ``(N, C, D, H, W)`` array and OpenPCDet's height compression
folds depth into channels, ``(N, C * D, H, W)``.  Each layer stores its grid
and calls one functional op, :func:`torch_lattice.ops.sparse_to_dense`, which
exports as ``lattice.sparse.to_dense``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from lattice_contract.dialect import DENSE_LAYOUTS, as_triple

from torch_lattice import ops
from torch_lattice.sparse import SparseTensor

__all__ = ["HeightCompression", "ToDense"]


class ToDense(torch.nn.Module):
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

    def forward(self, x: SparseTensor) -> torch.Tensor:
        return ops.sparse_to_dense(
            x, spatial_shape=self.spatial_shape, batch_size=self.batch_size, layout=self.layout
        )

    def extra_repr(self) -> str:
        grid = f"spatial_shape={self.spatial_shape}, batch_size={self.batch_size}"
        return f"{grid}, layout={self.layout!r}"


class HeightCompression(ToDense):
    """OpenPCDet's map-to-BEV: ``dense()`` then ``(N, C, Z, Y, X) -> (N, C * Z, Y, X)``.

    Channel ``c * Z + z`` of the result is channel c at height z, as OpenPCDet's
    ``view`` gives; ``spatial_shape`` is (X, Y, Z) as for :class:`ToDense`.
    """

    def __init__(self, spatial_shape: int | Sequence[int], batch_size: int) -> None:
        super().__init__(spatial_shape, batch_size, layout="b_cz_y_x")

    def extra_repr(self) -> str:
        return f"spatial_shape={self.spatial_shape}, batch_size={self.batch_size}"
