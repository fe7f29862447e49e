"""Point/voxel and sparse-algebra modules (no parameters)."""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.kernel import as_triple
from lattice_contract.options import as_enum, voxel_grid
from lattice_contract.schema import BinaryOp, Interpolation, Join, VoxelReduction

from mlx_lattice.nn.module import LatticeModule
from mlx_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex
from mlx_lattice.ops.points import devoxelize, voxelize
from mlx_lattice.sparse import SparseTensor

__all__ = ["Devoxelize", "SparseAdd", "SparseBinary", "SparseCat", "SparseReindex", "Voxelize"]


class Voxelize(LatticeModule):
    """Points to a sparse value: ``m(points, features, batch)`` (``lattice.voxelize``).

    Cells ``floor((p - origin) / voxel_size)``; the result sits at ``stride``
    (coordinates ``cell * stride``), rows in first-occurrence order.
    """

    def __init__(
        self,
        voxel_size: float | tuple[float, float, float],
        reduction: VoxelReduction | str = VoxelReduction.mean,
        *,
        origin: float | tuple[float, float, float] = 0.0,
        stride: int | tuple[int, int, int] = 1,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Voxelize")
        self.reduction = as_enum(reduction, VoxelReduction, "reduction")
        self.stride = as_triple(stride, "stride")

    def __call__(
        self,
        points: mx.array,
        features: mx.array,
        batch: mx.array,
        active_rows: mx.array | int | None = None,
    ) -> SparseTensor:
        return voxelize(
            points,
            features,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            reduction=self.reduction,
            stride=self.stride,
        )

    def _extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, reduction={self.reduction.value}"


class Devoxelize(LatticeModule):
    """Sparse features read back at points: ``m(x, points, batch)`` -> dense ``(P, C)``."""

    def __init__(
        self,
        voxel_size: float | tuple[float, float, float],
        interpolation: Interpolation | str = Interpolation.linear,
        *,
        origin: float | tuple[float, float, float] = 0.0,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Devoxelize")
        self.interpolation = as_enum(interpolation, Interpolation, "interpolation")

    def __call__(
        self,
        x: SparseTensor,
        points: mx.array,
        batch: mx.array,
        active_rows: mx.array | int | None = None,
    ) -> mx.array:
        return devoxelize(
            points,
            x,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            interpolation=self.interpolation,
        )

    def _extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, interpolation={self.interpolation.value}"


class SparseBinary(LatticeModule):
    """Coordinate-aligned elementwise op of two sparse values: ``m(lhs, rhs)``.

    The modules default to the outer join (every row of both sides survives),
    as torch_lattice's do; the functional ops default to inner.
    """

    def __init__(self, op: BinaryOp | str, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.op = as_enum(op, BinaryOp, "op")
        self.join = as_enum(join, Join, "join")

    def __call__(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        return sparse_binary(lhs, rhs, op=self.op, join=self.join)

    def _extra_repr(self) -> str:
        return f"op={self.op.value}, join={self.join.value}"


class SparseAdd(SparseBinary):
    """``lhs + rhs`` on aligned rows (a residual connection when supports match)."""

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__(BinaryOp.add, join)


class SparseCat(LatticeModule):
    """Channel concatenation ``[lhs | rhs]`` of aligned rows: ``m(lhs, rhs)`` (default outer)."""

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.join = as_enum(join, Join, "join")

    def __call__(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        return sparse_cat(lhs, rhs, join=self.join)

    def _extra_repr(self) -> str:
        return f"join={self.join.value}"


class SparseReindex(LatticeModule):
    """``input``'s features moved onto a target's rows (zeros where absent): ``m(x, target)``."""

    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return sparse_reindex(x, target)
