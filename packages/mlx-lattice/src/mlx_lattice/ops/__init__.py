"""Functional ops of the Lattice contract on MLX (names and signatures as in ``docs/semantics.md``).

Sparse convolutions and pooling take and return :class:`~mlx_lattice.SparseTensor`;
feature-only ops take and return dense ``(rows, channels)`` arrays.  The public
names, each op's keywords with their defaults and its help text are declared
once for both runtimes in :mod:`lattice_contract.frontend.ops`; this package holds
the MLX array code.
"""

from typing import TYPE_CHECKING

from lattice_contract.frontend import OP_NAMES, UPSTREAM_OP_NAMES

from mlx_lattice.ops.algebra import sparse_binary as sparse_binary
from mlx_lattice.ops.algebra import sparse_cat as sparse_cat
from mlx_lattice.ops.algebra import sparse_reindex as sparse_reindex
from mlx_lattice.ops.cast import cast as cast
from mlx_lattice.ops.conv import conv3d as conv3d
from mlx_lattice.ops.conv import conv_transpose3d as conv_transpose3d
from mlx_lattice.ops.conv import full_conv3d as full_conv3d
from mlx_lattice.ops.conv import generative_conv_transpose3d as generative_conv_transpose3d
from mlx_lattice.ops.conv import subm_conv3d as subm_conv3d
from mlx_lattice.ops.elementwise import elementwise as elementwise
from mlx_lattice.ops.embedding import embedding_lookup as embedding_lookup
from mlx_lattice.ops.feature import activation as activation
from mlx_lattice.ops.feature import batch_norm as batch_norm
from mlx_lattice.ops.feature import layer_norm as layer_norm
from mlx_lattice.ops.feature import linear as linear
from mlx_lattice.ops.feature import rms_norm as rms_norm
from mlx_lattice.ops.feature import softmax as softmax
from mlx_lattice.ops.grid import sparse_crop as sparse_crop
from mlx_lattice.ops.grid import sparse_to_dense as sparse_to_dense
from mlx_lattice.ops.normalized import normalized_conv_transpose3d as normalized_conv_transpose3d
from mlx_lattice.ops.normalized import (
    normalized_generative_conv_transpose3d as normalized_generative_conv_transpose3d,
)
from mlx_lattice.ops.normalized import normalized_subm_conv3d as normalized_subm_conv3d
from mlx_lattice.ops.points import devoxelize as devoxelize
from mlx_lattice.ops.points import voxelize as voxelize
from mlx_lattice.ops.pool import full_pool3d as full_pool3d
from mlx_lattice.ops.pool import global_pool as global_pool
from mlx_lattice.ops.pool import pool3d as pool3d
from mlx_lattice.ops.quant import QuantizedWeight as QuantizedWeight
from mlx_lattice.ops.quant import quantize_weight as quantize_weight
from mlx_lattice.ops.upsample import pool_transpose3d as pool_transpose3d
from mlx_lattice.ops.upsample import trilinear_upsample3d as trilinear_upsample3d
from mlx_lattice.ops.upstream import avg_pool3d as avg_pool3d
from mlx_lattice.ops.upstream import elu as elu
from mlx_lattice.ops.upstream import gelu as gelu
from mlx_lattice.ops.upstream import global_avg_pool as global_avg_pool
from mlx_lattice.ops.upstream import global_max_pool as global_max_pool
from mlx_lattice.ops.upstream import global_sum_pool as global_sum_pool
from mlx_lattice.ops.upstream import hardswish as hardswish
from mlx_lattice.ops.upstream import leaky_relu as leaky_relu
from mlx_lattice.ops.upstream import max_pool3d as max_pool3d
from mlx_lattice.ops.upstream import relu as relu
from mlx_lattice.ops.upstream import sigmoid as sigmoid
from mlx_lattice.ops.upstream import silu as silu
from mlx_lattice.ops.upstream import softplus as softplus
from mlx_lattice.ops.upstream import sparse_add as sparse_add
from mlx_lattice.ops.upstream import sparse_cat_aligned as sparse_cat_aligned
from mlx_lattice.ops.upstream import sparse_maximum as sparse_maximum
from mlx_lattice.ops.upstream import sparse_minimum as sparse_minimum
from mlx_lattice.ops.upstream import sparse_mul as sparse_mul
from mlx_lattice.ops.upstream import sparse_sub as sparse_sub
from mlx_lattice.ops.upstream import sum_pool3d as sum_pool3d
from mlx_lattice.ops.upstream import tanh as tanh

EXTRA_NAMES: tuple[str, ...] = UPSTREAM_OP_NAMES
"""Public names of this package beyond the contract's :data:`OP_NAMES` (none on MLX)."""

if not TYPE_CHECKING:
    # mypy cannot evaluate a computed ``__all__`` and would then hide the module's
    # names from the ``RuntimeOps`` protocol check; it reads the ``import ... as``
    # re-exports above instead, and a test checks ``__all__`` is exactly these names.
    __all__ = [*OP_NAMES, *EXTRA_NAMES]
