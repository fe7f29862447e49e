"""The torch modules of every parameter-free layer declared in the contract.

Each layer -- its constructor, docstring, repr and op call -- is declared once
for both runtimes (:mod:`lattice_contract.frontend.nn_layers`,
:mod:`lattice_contract.frontend.nn_activations`); a class here puts
:class:`~torch_lattice.nn.base.Module` behind it, which supplies the torch
functional ops (``torch.nn.Module.__call__`` runs the layer's ``forward``,
hooks included).  These modules have no parameters.
"""

from __future__ import annotations

from lattice_contract.frontend import nn_activations, nn_layers

from torch_lattice.nn.base import Module

# ----------------------------------------------------- pooling and upsampling


class MaxPool3d(nn_layers.MaxPool3d, Module): ...


class AvgPool3d(nn_layers.AvgPool3d, Module): ...


class SumPool3d(nn_layers.SumPool3d, Module): ...


class FullMaxPool3d(nn_layers.FullMaxPool3d, MaxPool3d): ...


class FullAvgPool3d(nn_layers.FullAvgPool3d, AvgPool3d): ...


class FullSumPool3d(nn_layers.FullSumPool3d, SumPool3d): ...


class GlobalPool(nn_layers.GlobalPool, Module): ...


class PoolTranspose3d(nn_layers.PoolTranspose3d, Module): ...


class TrilinearUpsample3d(nn_layers.TrilinearUpsample3d, Module): ...


# ---------------------------------------------------- activations and softmax


class Softmax(nn_layers.Softmax, Module): ...


class Activation(nn_activations.Activation, Module): ...


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


class Voxelize(nn_layers.Voxelize, Module): ...


class Devoxelize(nn_layers.Devoxelize, Module): ...


class SparseBinary(nn_layers.SparseBinary, Module): ...


class SparseAdd(nn_layers.SparseAdd, SparseBinary): ...


class SparseCat(nn_layers.SparseCat, Module): ...


class SparseReindex(nn_layers.SparseReindex, Module): ...
