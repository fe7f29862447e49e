"""Point/voxel and sparse-algebra modules (no parameters)."""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.options import as_enum
from lattice_contract.schema import BinaryOp, Interpolation, Join, VoxelReduction

from mlx_lattice.nn.module import LatticeModule
from mlx_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex
from mlx_lattice.ops.points import devoxelize, voxelize
from mlx_lattice.sparse import SparseTensor

__all__ = ["Devoxelize", "SparseAdd", "SparseBinary", "SparseCat", "SparseReindex", "Voxelize"]


class Voxelize(LatticeModule):
    """Points to a stride-1 sparse value: ``m(points, features, batch)`` (``lattice.voxelize``)."""

    def __init__(
        self, voxel_size: float, reduction: VoxelReduction | str = VoxelReduction.mean
    ) -> None:
        super().__init__()
        self.voxel_size = float(voxel_size)
        self.reduction = as_enum(reduction, VoxelReduction, "reduction")

    def __call__(self, points: mx.array, features: mx.array, batch: mx.array) -> SparseTensor:
        return voxelize(
            points, features, batch, voxel_size=self.voxel_size, reduction=self.reduction
        )

    def _extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, reduction={self.reduction.value}"


class Devoxelize(LatticeModule):
    """Sparse features read back at points: ``m(x, points, batch)`` -> dense ``(P, C)``."""

    def __init__(
        self, voxel_size: float, interpolation: Interpolation | str = Interpolation.trilinear
    ) -> None:
        super().__init__()
        self.voxel_size = float(voxel_size)
        self.interpolation = as_enum(interpolation, Interpolation, "interpolation")

    def __call__(self, x: SparseTensor, points: mx.array, batch: mx.array) -> mx.array:
        return devoxelize(
            x, points, batch, voxel_size=self.voxel_size, interpolation=self.interpolation
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
