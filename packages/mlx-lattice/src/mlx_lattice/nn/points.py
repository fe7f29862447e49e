"""Point/voxel and sparse-algebra modules (no parameters).

Declared once for both runtimes in :mod:`lattice_contract.nn_layers`; the MLX
classes put :class:`~mlx_lattice.nn.module.LatticeModule` behind them.
"""

from __future__ import annotations

from lattice_contract import nn_layers

from mlx_lattice.nn.module import LatticeModule


class Voxelize(nn_layers.Voxelize, LatticeModule): ...


class Devoxelize(nn_layers.Devoxelize, LatticeModule): ...


class SparseBinary(nn_layers.SparseBinary, LatticeModule): ...


class SparseAdd(nn_layers.SparseAdd, SparseBinary): ...


class SparseCat(nn_layers.SparseCat, LatticeModule): ...


class SparseReindex(nn_layers.SparseReindex, LatticeModule): ...
