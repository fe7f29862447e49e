"""Functional ops of the Lattice contract on MLX (names and signatures as in ``docs/semantics.md``).

Sparse convolutions and pooling take and return :class:`~mlx_lattice.SparseTensor`;
feature-only ops take and return dense ``(rows, channels)`` arrays.
"""

from mlx_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex
from mlx_lattice.ops.cast import cast
from mlx_lattice.ops.conv import (
    conv3d,
    conv_transpose3d,
    full_conv3d,
    generative_conv_transpose3d,
    subm_conv3d,
)
from mlx_lattice.ops.elementwise import elementwise
from mlx_lattice.ops.embedding import embedding_lookup
from mlx_lattice.ops.feature import (
    activation,
    batch_norm,
    layer_norm,
    linear,
    rms_norm,
    softmax,
)
from mlx_lattice.ops.normalized import (
    normalized_conv_transpose3d,
    normalized_generative_conv_transpose3d,
    normalized_subm_conv3d,
)
from mlx_lattice.ops.points import devoxelize, voxelize
from mlx_lattice.ops.pool import full_pool3d, global_pool, pool3d
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight
from mlx_lattice.ops.upsample import pool_transpose3d, trilinear_upsample3d

__all__ = [
    "QuantizedWeight",
    "activation",
    "batch_norm",
    "cast",
    "conv3d",
    "conv_transpose3d",
    "devoxelize",
    "elementwise",
    "embedding_lookup",
    "full_conv3d",
    "full_pool3d",
    "generative_conv_transpose3d",
    "global_pool",
    "layer_norm",
    "linear",
    "normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    "normalized_subm_conv3d",
    "pool3d",
    "pool_transpose3d",
    "quantize_weight",
    "rms_norm",
    "softmax",
    "sparse_binary",
    "sparse_cat",
    "sparse_reindex",
    "subm_conv3d",
    "trilinear_upsample3d",
    "voxelize",
]
