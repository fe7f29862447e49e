"""Functional sparse ops of the lattice contract, on torch with autograd.

Names and signatures are identical to ``mlx_lattice.ops``; each public op is
wrapped by :func:`torch_lattice._trace.traced` so the exporter can record it.
"""

from __future__ import annotations

from torch_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex
from torch_lattice.ops.cast import cast
from torch_lattice.ops.conv import (
    conv3d,
    conv_transpose3d,
    full_conv3d,
    generative_conv_transpose3d,
    schedule,
    subm_conv3d,
)
from torch_lattice.ops.elementwise import elementwise
from torch_lattice.ops.embedding import embedding_lookup
from torch_lattice.ops.feature import activation, batch_norm, layer_norm, linear, rms_norm, softmax
from torch_lattice.ops.normalized import (
    normalized_conv_transpose3d,
    normalized_generative_conv_transpose3d,
    normalized_subm_conv3d,
)
from torch_lattice.ops.points import devoxelize, voxelize
from torch_lattice.ops.pool import full_pool3d, global_pool, pool3d
from torch_lattice.ops.quant import QuantizedWeight, dequantize, quantize_weight
from torch_lattice.ops.upsample import pool_transpose3d, trilinear_upsample3d

__all__ = [
    "QuantizedWeight",
    "activation",
    "batch_norm",
    "cast",
    "conv3d",
    "conv_transpose3d",
    "dequantize",
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
    "schedule",
    "softmax",
    "sparse_binary",
    "sparse_cat",
    "sparse_reindex",
    "subm_conv3d",
    "trilinear_upsample3d",
    "voxelize",
]
