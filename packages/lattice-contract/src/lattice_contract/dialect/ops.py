"""The dialect's core operations, one declaration each (see :mod:`.op_base` for the form)."""

from __future__ import annotations

from typing import Annotated

from lattice_contract.dialect.op_base import (
    Op,
    _Accumulation,
    _Bias,
    _Channel,
    _ChannelBias,
    _Conv,
    _DefaultAccumulation,
    _Eps,
    _Features,
    _FeaturesResult,
    _Fill,
    _Padding,
    _Sparse,
    _SparseResult,
    _Triple,
)
from lattice_contract.dialect.rules import (
    CONV_GEOMETRY_RULES,
    use,
)
from lattice_contract.dialect.types import (
    ACTIVE,
    AXIS,
    BATCH_INDEX,
    BATCH_SIZE,
    COORDS,
    F32,
    F64_TRIPLE,
    FEATURES,
    PACKING,
    POINTS,
    POSITIVE_F64_TRIPLE,
    STRING,
    SYMBOL,
    TENSOR,
    VARIADIC,
    ActivationKind,
    Attribute,
    BinaryOp,
    ChannelRule,
    CoordLayout,
    GeluApprox,
    Interpolation,
    Join,
    Operand,
    PoolMode,
    Result,
    Rounding,
    StrideRule,
    VoxelReduction,
    WeightFamily,
    WeightLayout,
    enum_attr,
    weight_of,
)


class SparseMake(Op):
    """Assemble a sparse value from coordinates, features and an active-row count at a stride."""

    __mnemonic__ = "sparse.make"
    __stride__ = StrideRule.attribute
    __channels__ = ChannelRule.features
    __rules__ = (use("make.rows"),)
    coords: Annotated[Operand, COORDS]
    features: _Features
    active: Annotated[Operand, ACTIVE]
    result: _SparseResult
    stride: _Triple
    coord_order: Annotated[
        Attribute, enum_attr(CoordLayout).optional(default=CoordLayout.batch_x_y_z.value)
    ]


class SparseDecompose(Op):
    """Split a sparse value into its coordinates, features and active-row count."""

    __mnemonic__ = "sparse.decompose"
    __channels__ = ChannelRule.input
    input: _Sparse
    coords: Annotated[Result, COORDS]
    features: _FeaturesResult
    active: Annotated[Result, ACTIVE]


class SparseWithFeatures(Op):
    """Keep a sparse value's support and replace its features row for row."""

    __mnemonic__ = "sparse.with_features"
    __stride__ = StrideRule.input
    __channels__ = ChannelRule.features
    input: _Sparse
    features: _Features
    result: _SparseResult


class SparseReindex(Op):
    """Gather features onto the target's exact rows, ``fill`` where the input has no row."""

    __mnemonic__ = "sparse.reindex"
    __stride__ = StrideRule.target
    __channels__ = ChannelRule.input
    __rules__ = (use("stride.same", "input", "target"),)
    input: _Sparse
    target: _Sparse
    result: _SparseResult
    fill: _Fill


class Weight(Op):
    """Bind a symbolic weight to its safetensors payload."""

    __mnemonic__ = "weight"
    __channels__ = ChannelRule.none
    __rules__ = (
        use("weight.layout"),
        use("weight.storage_key"),
        use("weight.packed_dtype"),
        use("weight.packable"),
        use("weight.packing_bits"),
        use("weight.group_size"),
        use("weight.shape"),
        use("weight.scale_dtype"),
        use("weight.unique"),
    )
    result: Annotated[Result, weight_of(*WeightFamily)]
    sym_name: Annotated[Attribute, SYMBOL]
    storage_key: Annotated[Attribute, STRING]
    layout: Annotated[Attribute, enum_attr(WeightLayout)]
    packing: Annotated[Attribute, PACKING.optional()]


class Conv3d(Op):
    """Strided sparse convolution over the coarsened input support, taps centred on odd axes."""

    __mnemonic__ = "conv3d"
    __stride__ = StrideRule.multiply
    __channels__ = ChannelRule.weight
    __rules__ = (*CONV_GEOMETRY_RULES,)
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    padding: _Padding
    dilation: _Triple
    accumulation: _Accumulation


class FullConv3d(Conv3d):
    """Sparse convolution over every output an active input reaches by a tap (spconv's)."""

    __mnemonic__ = "full_conv3d"


class SubmConv3d(Op):
    """Support-preserving (submanifold) sparse convolution centred on each input row."""

    __mnemonic__ = "subm_conv3d"
    __stride__ = StrideRule.input
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("subm.no_stride", "stride", "padding"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    dilation: _Triple
    accumulation: _Accumulation


class TargetConv3d(Op):
    """Sparse convolution evaluated exactly at the rows of a target sparse value."""

    __mnemonic__ = "target_conv3d"
    __stride__ = StrideRule.multiply
    __channels__ = ChannelRule.weight
    __rules__ = (
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
    accumulation: _Accumulation


class ConvTranspose3d(Op):
    """Transposed sparse convolution over the support its taps derive."""

    __mnemonic__ = "conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
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
    accumulation: _Accumulation


class TargetConvTranspose3d(Op):
    """Transposed sparse convolution evaluated exactly at the rows of a target sparse value."""

    __mnemonic__ = "target_conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
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
    accumulation: _Accumulation


class GenerativeConvTranspose3d(Op):
    """Transposed convolution that emits every tap of every input row (support expansion)."""

    __mnemonic__ = "generative_conv_transpose3d"
    __stride__ = StrideRule.divide
    __channels__ = ChannelRule.weight
    __rules__ = (
        use("generative.no_padding", "padding", "dilation"),
        use("stride.divides", "input"),
        *CONV_GEOMETRY_RULES,
    )
    input: _Sparse
    weight: _Conv
    bias: _Bias
    result: _SparseResult
    kernel_size: _Triple
    stride: _Triple
    accumulation: _Accumulation


class Pool3d(Op):
    """Local sparse pooling (max, mean or sum) over the coarsened support, taps as conv3d's."""

    __mnemonic__ = "pool3d"
    __stride__ = StrideRule.multiply
    __channels__ = ChannelRule.input
    __rules__ = (use("geometry.int32"),)
    input: _Sparse
    result: _SparseResult
    mode: Annotated[Attribute, enum_attr(PoolMode)]
    kernel_size: _Triple
    stride: _Triple
    padding: _Padding
    dilation: _Triple
    accumulation: _DefaultAccumulation


class FullPool3d(Pool3d):
    """Local sparse pooling over every output an active input reaches by a tap (spconv's)."""

    __mnemonic__ = "full_pool3d"


class GlobalPool(Op):
    """Reduce each batch item's rows to one dense feature row."""

    __mnemonic__ = "global_pool"
    __channels__ = ChannelRule.input
    __rules__ = (use("global_pool.rows"),)
    input: _Sparse
    result: Annotated[Result, FEATURES]
    mode: Annotated[Attribute, enum_attr(PoolMode)]
    batch_size: Annotated[Attribute, BATCH_SIZE]
    accumulation: _DefaultAccumulation


class Voxelize(Op):
    """Quantize the active points to voxels floor((p - origin) / voxel_size), reducing features."""

    __mnemonic__ = "voxelize"
    __stride__ = StrideRule.attribute
    __channels__ = ChannelRule.features
    __rules__ = (use("rows.per_point"),)
    points: Annotated[Operand, POINTS]
    features: _Features
    batch_indices: Annotated[Operand, BATCH_INDEX]
    active_rows: Annotated[Operand, ACTIVE]
    result: _SparseResult
    voxel_size: Annotated[Attribute, POSITIVE_F64_TRIPLE]
    origin: Annotated[Attribute, F64_TRIPLE]
    reduction: Annotated[Attribute, enum_attr(VoxelReduction)]
    stride: _Triple


class Devoxelize(Op):
    """Read sparse voxel features back at the active points (nearest, linear or trilinear)."""

    __mnemonic__ = "devoxelize"
    __channels__ = ChannelRule.input
    __rules__ = (use("rows.per_point"),)
    points: Annotated[Operand, POINTS]
    voxels: _Sparse
    batch_indices: Annotated[Operand, BATCH_INDEX]
    point_active_rows: Annotated[Operand, ACTIVE]
    result: _FeaturesResult
    voxel_size: Annotated[Attribute, POSITIVE_F64_TRIPLE]
    origin: Annotated[Attribute, F64_TRIPLE]
    interpolation: Annotated[Attribute, enum_attr(Interpolation)]


class Linear(Op):
    """Dense projection of feature rows: x @ W^T + b."""

    __mnemonic__ = "linear"
    __channels__ = ChannelRule.weight
    __rules__ = (use("linear.rows"), use("weight.in_channels"), use("weight.channel_shape"))
    input: _Features
    weight: Annotated[Operand, weight_of(WeightFamily.linear)]
    bias: _Bias
    result: _FeaturesResult
    accumulation: _DefaultAccumulation


class Activation(Op):
    """Pointwise nonlinearity on feature rows."""

    __mnemonic__ = "activation"
    __channels__ = ChannelRule.input
    __rules__ = (use("shape.same", "input", "result"), use("activation.approximate"))
    input: _Features
    result: _FeaturesResult
    kind: Annotated[Attribute, enum_attr(ActivationKind)]
    approximate: Annotated[Attribute, enum_attr(GeluApprox)]
    alpha: Annotated[Attribute, F32]
    beta: Annotated[Attribute, F32]
    threshold: Annotated[Attribute, F32]


class BatchNorm(Op):
    """Frozen-statistics batch norm: (x - mean) / sqrt(var + eps) * scale + bias."""

    __mnemonic__ = "batch_norm"
    __channels__ = ChannelRule.input
    __rules__ = (use("shape.same", "input", "result"), use("weight.channel_shape"))
    input: _Features
    scale: _Channel
    bias: _ChannelBias
    mean: _Channel
    var: _Channel
    result: _FeaturesResult
    eps: _Eps


class LayerNorm(Op):
    """Normalize each feature row over its channels, then scale and shift."""

    __mnemonic__ = "layer_norm"
    __channels__ = ChannelRule.input
    __rules__ = (use("shape.same", "input", "result"), use("weight.channel_shape"))
    input: _Features
    scale: _Channel
    bias: _ChannelBias
    result: _FeaturesResult
    eps: _Eps


class RmsNorm(Op):
    """Divide each feature row by its root mean square, then scale."""

    __mnemonic__ = "rms_norm"
    __channels__ = ChannelRule.input
    __rules__ = (use("shape.same", "input", "result"), use("weight.channel_shape"))
    input: _Features
    scale: _Channel
    result: _FeaturesResult
    eps: _Eps


class Softmax(Op):
    """Softmax of each feature row over its channels."""

    __mnemonic__ = "softmax"
    __channels__ = ChannelRule.input
    __rules__ = (use("shape.same", "input", "result"),)
    input: _Features
    result: _FeaturesResult
    axis: Annotated[Attribute, AXIS]


class SparseBinary(Op):
    """Elementwise op of two coordinate-aligned sparse values at one stride."""

    __mnemonic__ = "sparse.binary"
    __stride__ = StrideRule.lhs
    __channels__ = ChannelRule.lhs
    __rules__ = (use("stride.same", "lhs", "rhs"), use("binary.channels"))
    lhs: _Sparse
    rhs: _Sparse
    result: _SparseResult
    op: Annotated[Attribute, enum_attr(BinaryOp)]
    join: Annotated[Attribute, enum_attr(Join)]
    lhs_fill: _Fill
    rhs_fill: _Fill


class SparseCat(Op):
    """Channel concatenation of two coordinate-aligned sparse values; a missing side gives zeros."""

    __mnemonic__ = "sparse.cat"
    __stride__ = StrideRule.lhs
    __channels__ = ChannelRule.concat
    __rules__ = (use("stride.same", "lhs", "rhs"),)
    lhs: _Sparse
    rhs: _Sparse
    result: _SparseResult
    join: Annotated[Attribute, enum_attr(Join)]


class Cast(Op):
    """Convert a dense tensor to another float type with an explicit IEEE rounding direction."""

    __mnemonic__ = "cast"
    __channels__ = ChannelRule.input
    __rules__ = (use("cast.float"), use("cast.shape"))
    input: Annotated[Operand, TENSOR]
    result: Annotated[Result, TENSOR]
    rounding: Annotated[Attribute, enum_attr(Rounding).optional(default="nearest_even")]


class Call(Op):
    """Apply a registered primitive with an explicit element-type signature."""

    __mnemonic__ = "call"
    __channels__ = ChannelRule.none
    __rules__ = (use("call.registered"), use("call.signature"))
    inputs: Annotated[Operand, TENSOR, VARIADIC]
    result: Annotated[Result, TENSOR]
    callee: Annotated[Attribute, STRING]


# ---------------------------------------------------------------------------
