"""The MLX modules of every parameter-free layer declared in the contract.

Each layer's constructor, docstring and repr are declared once for both
runtimes (:mod:`lattice_contract.frontend.nn_layers`,
:mod:`lattice_contract.frontend.nn_activations`); a class here puts
:class:`~mlx_lattice.nn.module.LatticeModule` behind it and writes its
``__call__``, as ``mlx.nn``'s layers do: one call of a :mod:`mlx_lattice.ops`
function with the layer's stored attributes.  These modules have no
parameters.
"""

from __future__ import annotations

from typing import ClassVar

import mlx.core as mx
from lattice_contract.dialect import PoolMode, Triple
from lattice_contract.frontend import nn_activations, nn_layers, trusted

from mlx_lattice import ops
from mlx_lattice.nn.module import Features, LatticeModule, map_features
from mlx_lattice.sparse import SparseTensor

# ----------------------------------------------------- pooling and upsampling


class _Pool3d(LatticeModule):
    """``ops.pool3d`` with the layer's mode and window (MaxPool3d, AvgPool3d, SumPool3d)."""

    mode: ClassVar[PoolMode]
    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple

    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Pool ``x`` (a sparse value) window by window."""
        return ops.pool3d(
            x,
            mode=self.mode.value,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class _FullPool3d(LatticeModule):
    """``ops.full_pool3d`` with the layer's mode and window (the ``Full*Pool3d`` layers)."""

    mode: ClassVar[PoolMode]
    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple

    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Pool ``x`` over the indexed relation (its support grows)."""
        return ops.full_pool3d(
            x,
            mode=self.mode.value,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class MaxPool3d(nn_layers.MaxPool3d, _Pool3d): ...


class AvgPool3d(nn_layers.AvgPool3d, _Pool3d): ...


class SumPool3d(nn_layers.SumPool3d, _Pool3d): ...


# Each Full pool is its local pool's subclass (isinstance holds) with the full forward.
class FullMaxPool3d(nn_layers.FullMaxPool3d, _FullPool3d, MaxPool3d): ...


class FullAvgPool3d(nn_layers.FullAvgPool3d, _FullPool3d, AvgPool3d): ...


class FullSumPool3d(nn_layers.FullSumPool3d, _FullPool3d, SumPool3d): ...


class GlobalPool(nn_layers.GlobalPool, LatticeModule):
    def __call__(self, x: SparseTensor, batch_size: int | None = None) -> mx.array:
        """Reduce ``x``'s rows per batch item (``batch_size`` overrides the layer's)."""
        size = self.batch_size if batch_size is None else batch_size
        return ops.global_pool(x, mode=self.mode.value, batch_size=size)


class PoolTranspose3d(nn_layers.PoolTranspose3d, LatticeModule):
    def __call__(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        """Upsample ``x`` (onto ``target``'s rows when given)."""
        return ops.pool_transpose3d(
            x,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            coordinates=target,
        )


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, LatticeModule):
    def __call__(self, x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
        """Upsample ``x`` (onto ``target``'s rows when given)."""
        return ops.trilinear_upsample3d(x, stride=self.stride, coordinates=target)


# ---------------------------------------------------- activations and softmax


class Softmax(nn_layers.Softmax, LatticeModule):
    def __call__(self, x: Features) -> Features:
        """Softmax of a dense array's rows, or of a sparse value's features."""
        return map_features(x, lambda f: ops.softmax(f, axis=-1))


class Activation(nn_activations.Activation, LatticeModule):
    def __call__(self, x: Features) -> Features:
        """The activation of a dense array's rows, or of a sparse value's features."""
        activation = trusted(ops.activation)  # the attributes were checked in __init__
        return map_features(
            x,
            lambda f: activation(
                f,
                kind=self.kind,
                approximate=self.approximate,
                alpha=self.alpha,
                beta=self.beta,
                threshold=self.threshold,
            ),
        )


class ReLU(nn_activations.ReLU, Activation): ...


class LeakyReLU(nn_activations.LeakyReLU, Activation): ...


class GELU(nn_activations.GELU, Activation): ...


class SiLU(nn_activations.SiLU, Activation): ...


class Sigmoid(nn_activations.Sigmoid, Activation): ...


class Tanh(nn_activations.Tanh, Activation): ...


class Softplus(nn_activations.Softplus, Activation): ...


class ELU(nn_activations.ELU, Activation): ...


class Hardswish(nn_activations.Hardswish, Activation): ...


class Identity(nn_activations.Identity, Activation): ...


# -------------------------------------------------- points and sparse algebra


class Voxelize(nn_layers.Voxelize, LatticeModule):
    def __call__(
        self,
        points: mx.array,
        features: mx.array,
        batch: mx.array,
        active_rows: mx.array | int | None = None,
    ) -> SparseTensor:
        """Merge the active points into voxels."""
        return ops.voxelize(
            points,
            features,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            reduction=self.reduction.value,
            stride=self.stride,
        )


class Devoxelize(nn_layers.Devoxelize, LatticeModule):
    def __call__(
        self,
        x: SparseTensor,
        points: mx.array,
        batch: mx.array,
        active_rows: mx.array | int | None = None,
    ) -> mx.array:
        """Interpolate ``x``'s features at the active points."""
        return ops.devoxelize(
            points,
            x,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            interpolation=self.interpolation.value,
        )


class SparseBinary(nn_layers.SparseBinary, LatticeModule):
    def __call__(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        """Combine the aligned rows of ``lhs`` and ``rhs`` (a missing row reads zeros)."""
        return ops.sparse_binary(
            lhs, rhs, op=self.op.value, join=self.join.value, lhs_fill=0.0, rhs_fill=0.0
        )


class SparseAdd(nn_layers.SparseAdd, SparseBinary): ...


class SparseCat(nn_layers.SparseCat, LatticeModule):
    def __call__(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        """Concatenate the aligned rows' channels."""
        return ops.sparse_cat(lhs, rhs, join=self.join.value)


class SparseReindex(nn_layers.SparseReindex, LatticeModule):
    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        """Gather ``x``'s features at ``target``'s rows (zeros where absent)."""
        return ops.sparse_reindex(x, target, fill=0.0)
