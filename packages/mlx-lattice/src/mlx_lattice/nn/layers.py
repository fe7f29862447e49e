"""The MLX modules of every parameter-free layer declared in the contract.

Each layer -- its constructor, docstring, repr and op call -- is declared once
for both runtimes (:mod:`lattice_contract.frontend.nn_layers`,
:mod:`lattice_contract.frontend.nn_activations`); a class here puts
:class:`~mlx_lattice.nn.module.LatticeModule` behind it, which supplies the
MLX functional ops and runs ``forward`` when the module is called.  These
modules have no parameters.
"""

from __future__ import annotations

from lattice_contract.frontend import nn_activations, nn_layers

from mlx_lattice.nn.module import LatticeModule

# ----------------------------------------------------- pooling and upsampling


class MaxPool3d(nn_layers.MaxPool3d, LatticeModule): ...


class AvgPool3d(nn_layers.AvgPool3d, LatticeModule): ...


class SumPool3d(nn_layers.SumPool3d, LatticeModule): ...


class FullMaxPool3d(nn_layers.FullMaxPool3d, MaxPool3d): ...


class FullAvgPool3d(nn_layers.FullAvgPool3d, AvgPool3d): ...


class FullSumPool3d(nn_layers.FullSumPool3d, SumPool3d): ...


class GlobalPool(nn_layers.GlobalPool, LatticeModule): ...


class PoolTranspose3d(nn_layers.PoolTranspose3d, LatticeModule): ...


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, LatticeModule): ...


# ---------------------------------------------------- activations and softmax


class Softmax(nn_layers.Softmax, LatticeModule): ...


class Activation(nn_activations.Activation, LatticeModule): ...


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


class Voxelize(nn_layers.Voxelize, LatticeModule): ...


class Devoxelize(nn_layers.Devoxelize, LatticeModule): ...


class SparseBinary(nn_layers.SparseBinary, LatticeModule): ...


class SparseAdd(nn_layers.SparseAdd, SparseBinary): ...


class SparseCat(nn_layers.SparseCat, LatticeModule): ...


class SparseReindex(nn_layers.SparseReindex, LatticeModule): ...
