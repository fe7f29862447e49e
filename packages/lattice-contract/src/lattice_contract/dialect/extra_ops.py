"""The reference system's extra ops: weight-normalised convolutions, upsampling
onto finer supports, embedding lookup and elementwise maps.

Declared like every other op (semantics: docs/extra-ops.md) and registered by
subclassing :class:`~lattice_contract.dialect.op_base.Op`; :mod:`lattice_contract.dialect.schema`
imports this module before it builds ``SCHEMA``.
"""

from __future__ import annotations

from typing import Annotated

from lattice_contract.dialect.op_base import (
    Op,
    _Bias,
    _Conv,
    _DefaultAccumulation,
    _Eps,
    _Features,
    _FeaturesResult,
    _Padding,
    _Sparse,
    _SparseResult,
    _Triple,
)
from lattice_contract.dialect.rules import CONV_GEOMETRY_RULES, use
from lattice_contract.dialect.types import (
    BATCH_INDEX,
    ELEMENTWISE_KINDS,
    OPTIONAL,
    SPARSE,
    Attribute,
    AttrKind,
    AttrSpec,
    ChannelRule,
    Operand,
    StrideRule,
    WeightFamily,
    weight_of,
)

_OptionalTarget = Annotated[Operand, SPARSE, OPTIONAL]


class NormalizedSubmConv3d(Op):
    """Submanifold convolution normalised per row by the weight mass its support reaches."""

    __mnemonic__ = "normalized_subm_conv3d"
    __stride__ = StrideRule.input
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("subm.no_stride", "stride", "padding"),
        use("normalized.dense_weight", "weight"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    dilation: _Triple
    eps: _Eps
    accumulation: _DefaultAccumulation


class NormalizedConvTranspose3d(Op):
    """Weight-normalised transposed convolution over the support its taps derive."""

    __mnemonic__ = "normalized_conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("normalized.dense_weight", "weight"),
        use("stride.divides", "input"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    padding: _Padding
    dilation: _Triple
    eps: _Eps
    accumulation: _DefaultAccumulation


class TargetNormalizedConvTranspose3d(Op):
    """Weight-normalised transposed convolution evaluated exactly at a target's rows."""

    __mnemonic__ = "target_normalized_conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("normalized.dense_weight", "weight"),
        use("stride.divides", "input"),
        use("stride.target", "input", "target"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    target: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    padding: _Padding
    dilation: _Triple
    eps: _Eps
    accumulation: _DefaultAccumulation


class NormalizedGenerativeConvTranspose3d(Op):
    """Weight-normalised support expansion: every tap of every input row, one row per output."""

    __mnemonic__ = "normalized_generative_conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("generative.no_padding", "padding", "dilation"),
        use("normalized.dense_weight", "weight"),
        use("stride.divides", "input"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    eps: _Eps
    accumulation: _DefaultAccumulation


class PoolTranspose3d(Op):
    """Mean of the coarse rows reaching each finer row by the transposed relation."""

    __mnemonic__ = "pool_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.input
    __rules__ = (
        use("stride.divides", "input"),
        use("stride.target", "input", "target"),
        use("geometry.int32"),
    )
    input: _Sparse
    target: _OptionalTarget
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    padding: _Padding
    dilation: _Triple
    accumulation: _DefaultAccumulation


class TrilinearUpsample3d(Op):
    """Trilinear interpolation onto finer rows, renormalised over the coarse rows present."""

    __mnemonic__ = "trilinear_upsample3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.input
    __rules__ = (use("stride.divides", "input"), use("stride.target", "input", "target"))
    input: _Sparse
    target: _OptionalTarget
    result: _SparseResult
    stride: _Triple


class EmbeddingLookup(Op):
    """Rows of a dense embedding table picked by an i32 index vector."""

    __mnemonic__ = "embedding_lookup"
    __channels__ = ChannelRule.weight
    __rules__ = (use("embedding.rows"),)
    indices: Annotated[Operand, BATCH_INDEX]
    weight: Annotated[Operand, weight_of(WeightFamily.embedding)]
    result: _FeaturesResult


class Elementwise(Op):
    """Deterministic unary map of f32 features: exp, or round half to even."""

    __mnemonic__ = "elementwise"
    __channels__ = ChannelRule.input
    __rules__ = (use("elementwise.f32"), use("shape.same", "input", "result"))
    input: _Features
    result: _FeaturesResult
    kind: Annotated[Attribute, AttrSpec(AttrKind.string, allowed=ELEMENTWISE_KINDS)]
