"""MLX lowerings of the normalised convolutions, the upsampling ops, embedding_lookup and elementwise.

Registered on :data:`mlx_lattice.artifact.lowerings.MLX_LOWERINGS` like every other MLX lowering
(parameters named after the op's operands and attributes, checked against the
schema at import time); each forwards to the functional op of
``mlx_lattice.ops`` of the same name, the target variants through
``coordinates=``.  ``accumulation`` is accepted and not branched on: its only
value, ``canonical_f32``, is what those ops compute.  Imported by
``mlx_lattice.artifact`` so that the registry is complete whenever a program is
compiled.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.kernel import Triple
from lattice_contract.lowering import bias_weight, conv_weight

from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.ops.elementwise import elementwise
from mlx_lattice.ops.embedding import embedding_lookup
from mlx_lattice.ops.normalized import (
    normalized_conv_transpose3d,
    normalized_generative_conv_transpose3d,
    normalized_subm_conv3d,
)
from mlx_lattice.ops.upsample import pool_transpose3d, trilinear_upsample3d
from mlx_lattice.sparse import SparseTensor

__all__: list[str] = []

_CONV = {"weight": conv_weight(input="input"), "bias": bias_weight(of="weight")}


@MLX_LOWERINGS.artifact_lowering(op="normalized_subm_conv3d", weights=_CONV)
def normalized_subm_conv3d_from_artifact(
    input: SparseTensor,
    weight: mx.array,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    dilation: Triple,
    eps: float,
    accumulation: str | None = None,
) -> SparseTensor:
    """Weight-normalised submanifold convolution."""
    return normalized_subm_conv3d(
        input, weight, bias, kernel_size=kernel_size, dilation=dilation, eps=eps
    )


@MLX_LOWERINGS.artifact_lowering(op="normalized_conv_transpose3d", weights=_CONV)
def normalized_conv_transpose3d_from_artifact(
    input: SparseTensor,
    weight: mx.array,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    eps: float,
    accumulation: str | None = None,
) -> SparseTensor:
    """Weight-normalised transposed convolution over its derived support."""
    return normalized_conv_transpose3d(
        input,
        weight,
        bias,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        eps=eps,
    )


@MLX_LOWERINGS.artifact_lowering(op="target_normalized_conv_transpose3d", weights=_CONV)
def target_normalized_conv_transpose3d_from_artifact(
    input: SparseTensor,
    target: SparseTensor,
    weight: mx.array,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    eps: float,
    accumulation: str | None = None,
) -> SparseTensor:
    """Weight-normalised transposed convolution at the target's rows."""
    return normalized_conv_transpose3d(
        input,
        weight,
        bias,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        eps=eps,
        coordinates=target,
    )


@MLX_LOWERINGS.artifact_lowering(op="normalized_generative_conv_transpose3d", weights=_CONV)
def normalized_generative_conv_transpose3d_from_artifact(
    input: SparseTensor,
    weight: mx.array,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    eps: float,
    accumulation: str | None = None,
) -> SparseTensor:
    """Weight-normalised support expansion."""
    return normalized_generative_conv_transpose3d(
        input, weight, bias, kernel_size=kernel_size, stride=stride, eps=eps
    )


@MLX_LOWERINGS.artifact_lowering(op="pool_transpose3d")
def pool_transpose3d_from_artifact(
    input: SparseTensor,
    target: SparseTensor | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    accumulation: str | None = None,
) -> SparseTensor:
    """Mean of the coarse rows reaching each fine row (the target's rows when given)."""
    return pool_transpose3d(
        input,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        coordinates=target,
    )


@MLX_LOWERINGS.artifact_lowering(op="trilinear_upsample3d")
def trilinear_upsample3d_from_artifact(
    input: SparseTensor, target: SparseTensor | None = None, *, stride: Triple
) -> SparseTensor:
    """Renormalised trilinear upsampling (onto the target's rows when given)."""
    return trilinear_upsample3d(input, stride=stride, coordinates=target)


@MLX_LOWERINGS.artifact_lowering(op="embedding_lookup")
def embedding_lookup_from_artifact(indices: mx.array, weight: mx.array) -> mx.array:
    """Rows of the embedding table; an out-of-range index is an error naming it."""
    return embedding_lookup(indices, weight)


@MLX_LOWERINGS.artifact_lowering(op="elementwise")
def elementwise_from_artifact(input: mx.array, *, kind: str) -> mx.array:
    """exp or round (half to even) of f32 features."""
    return elementwise(input, kind=kind)
