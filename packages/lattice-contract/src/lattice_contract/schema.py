"""The lattice dialect, declared once.

Everything that names a piece of the dialect -- the textual builder, the C++
TableGen generator, the schema digest, the plan freezer, the type checker and
the lowering registry -- reads the declarations in this module.  Nothing else
keeps a list of op, attribute or enum names.

An op is a class whose annotations declare its operands, results and
attributes in order::

    class Conv3d(Op):
        "Support-generating sparse convolution."
        input: Annotated[Operand, SPARSE]
        weight: Annotated[Operand, weight_of(WeightFamily.conv3d)]
        bias: Annotated[Operand, weight_of(WeightFamily.bias), OPTIONAL]
        result: Annotated[Result, SPARSE]
        kernel_size: Annotated[Attribute, POSITIVE_TRIPLE]

Annotation order is declaration order, which is the operand, result and
attribute order of the MLIR op and of the builder's keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, get_type_hints

from lattice_contract.schema_rules import (
    CONV_GEOMETRY_RULES,
    DIALECT_RULES,
    RULES,
    Rule,
    RuleCheck,
    RuleKind,
    RuleUse,
    rule,
    rule_tag,
    use,
)
from lattice_contract.schema_types import (
    ACCUMULATION,
    ACTIVE,
    AXIS,
    BATCH_INDEX,
    BATCH_SIZE,
    COORDS,
    DEFAULT_ACCUMULATION,
    DIALECT,
    ELEMENTWISE_KINDS,
    ENUMS,
    F32,
    F64_TRIPLE,
    FEATURES,
    FILL,
    FLOAT_DTYPES,
    INT_DTYPES,
    NONNEGATIVE_TRIPLE,
    OP_DECLARATIONS,
    OPTIONAL,
    PACKED_DTYPE_OF_BITS,
    PACKED_DTYPES,
    PACKING,
    PACKING_FIELDS,
    PACKING_GROUP_SIZES,
    POINTS,
    POSITIVE_F32,
    POSITIVE_F64_TRIPLE,
    POSITIVE_I64,
    POSITIVE_TRIPLE,
    PRIMITIVES,
    SPARSE,
    STRING,
    SYMBOL,
    TENSOR,
    TYPES,
    VARIADIC,
    WEIGHT_DTYPES,
    WEIGHT_FAMILY_INFO,
    ActivationKind,
    AttrDef,
    Attribute,
    AttrKind,
    AttrSpec,
    BinaryOp,
    ChannelRule,
    CoordLayout,
    FeatureLayout,
    GeluApprox,
    Interpolation,
    Join,
    OpDef,
    Operand,
    OperandDef,
    PackingBits,
    PackingMode,
    PoolMode,
    PrimitiveDef,
    Result,
    ResultDef,
    Rounding,
    ScaleDtype,
    SchemaEnum,
    StrideRule,
    TypeConstraint,
    TypeDef,
    TypeKind,
    TypeParamDef,
    VoxelReduction,
    WeightFamily,
    WeightFamilyInfo,
    WeightLayout,
    enum_attr,
    enum_synonyms,
    layout_family,
    weight_of,
)

__all__ = [
    "ACCUMULATION",
    "ACTIVE",
    "AXIS",
    "BATCH_INDEX",
    "BATCH_SIZE",
    "COORDS",
    "DEFAULT_ACCUMULATION",
    "DIALECT",
    "DIALECT_RULES",
    "ELEMENTWISE_KINDS",
    "ENUMS",
    "F32",
    "F64_TRIPLE",
    "FEATURES",
    "FILL",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "NONNEGATIVE_TRIPLE",
    "OPTIONAL",
    "PACKED_DTYPES",
    "PACKED_DTYPE_OF_BITS",
    "PACKING",
    "PACKING_FIELDS",
    "PACKING_GROUP_SIZES",
    "POINTS",
    "POSITIVE_F32",
    "POSITIVE_F64_TRIPLE",
    "POSITIVE_I64",
    "POSITIVE_TRIPLE",
    "PRIMITIVES",
    "RULES",
    "SCHEMA",
    "SPARSE",
    "STRING",
    "SYMBOL",
    "TENSOR",
    "TYPES",
    "VARIADIC",
    "WEIGHT_DTYPES",
    "WEIGHT_FAMILY_INFO",
    "Activation",
    "ActivationKind",
    "AttrDef",
    "AttrKind",
    "AttrSpec",
    "Attribute",
    "BatchNorm",
    "BinaryOp",
    "Call",
    "Cast",
    "ChannelRule",
    "Conv3d",
    "ConvTranspose3d",
    "CoordLayout",
    "Devoxelize",
    "DialectSchema",
    "Elementwise",
    "EmbeddingLookup",
    "FeatureLayout",
    "FullConv3d",
    "FullPool3d",
    "GeluApprox",
    "GenerativeConvTranspose3d",
    "GlobalPool",
    "Interpolation",
    "Join",
    "LayerNorm",
    "Linear",
    "NormalizedConvTranspose3d",
    "NormalizedGenerativeConvTranspose3d",
    "NormalizedSubmConv3d",
    "Op",
    "OpDef",
    "Operand",
    "OperandDef",
    "PackingBits",
    "PackingMode",
    "Pool3d",
    "PoolMode",
    "PoolTranspose3d",
    "PrimitiveDef",
    "Result",
    "ResultDef",
    "RmsNorm",
    "Rounding",
    "Rule",
    "RuleCheck",
    "RuleKind",
    "RuleUse",
    "ScaleDtype",
    "SchemaEnum",
    "Softmax",
    "SparseBinary",
    "SparseCat",
    "SparseDecompose",
    "SparseMake",
    "SparseReindex",
    "SparseWithFeatures",
    "StrideRule",
    "SubmConv3d",
    "TargetConv3d",
    "TargetConvTranspose3d",
    "TargetNormalizedConvTranspose3d",
    "TrilinearUpsample3d",
    "TypeConstraint",
    "TypeDef",
    "TypeKind",
    "TypeParamDef",
    "VoxelReduction",
    "Voxelize",
    "Weight",
    "WeightFamily",
    "WeightFamilyInfo",
    "WeightLayout",
    "enum_attr",
    "enum_synonyms",
    "layout_family",
    "rule",
    "rule_tag",
    "weight_of",
]


class Op:
    """Base class of op declarations; subclasses are collected into ``SCHEMA``."""

    __mnemonic__: ClassVar[str]
    __traits__: ClassVar[tuple[str, ...]] = ()
    __stride__: ClassVar[StrideRule] = StrideRule.none
    __channels__: ClassVar[ChannelRule] = ChannelRule.none
    __rules__: ClassVar[tuple[RuleUse, ...]] = ()
    _registry: ClassVar[list[type[Op]]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Op._registry.append(cls)


def _op_def(cls: type[Op]) -> OpDef:
    hints = get_type_hints(cls, include_extras=True)  # each base in its own module
    operands: list[OperandDef] = []
    results: list[ResultDef] = []
    attributes: list[AttrDef] = []
    # Base classes first: an op may extend another's declaration (FullConv3d(Conv3d)).
    declaring = [k for k in reversed(cls.__mro__) if issubclass(k, Op) and k is not Op]
    names = {n: None for k in declaring for n in vars(k).get("__annotations__", {})}
    for name in names:
        hint = hints[name]
        base, meta = hint.__origin__, hint.__metadata__
        if base is Operand:
            constraint = next(m for m in meta if isinstance(m, TypeConstraint))
            operands.append(
                OperandDef(
                    name,
                    constraint,
                    optional=any(m is OPTIONAL for m in meta),
                    variadic=any(m is VARIADIC for m in meta),
                )
            )
        elif base is Result:
            results.append(ResultDef(name, next(m for m in meta if isinstance(m, TypeConstraint))))
        elif base is Attribute:
            attributes.append(AttrDef(name, next(m for m in meta if isinstance(m, AttrSpec))))
        else:  # pragma: no cover - a schema authoring error
            raise TypeError(f"{cls.__name__}.{name}: annotate with Operand, Result or Attribute")
    summary = (cls.__doc__ or "").strip().splitlines()[0]
    if not summary:  # pragma: no cover - a schema authoring error
        raise TypeError(f"{cls.__name__} needs a one-line docstring summary")
    OP_DECLARATIONS[cls.__mnemonic__] = (tuple(cls.__rules__), cls.__channels__)
    return OpDef(
        name=cls.__mnemonic__,
        class_name=cls.__name__,
        summary=summary,
        operands=tuple(operands),
        results=tuple(results),
        attributes=tuple(attributes),
        traits=tuple(cls.__traits__),
        stride=cls.__stride__,
    )


# ---------------------------------------------------------------------------
# The operations.  Attribute annotations use the shared specs above.

_Conv = Annotated[Operand, weight_of(WeightFamily.conv3d)]
_Bias = Annotated[Operand, weight_of(WeightFamily.bias), OPTIONAL]
_Sparse = Annotated[Operand, SPARSE]
_SparseResult = Annotated[Result, SPARSE]
_Features = Annotated[Operand, FEATURES]
_FeaturesResult = Annotated[Result, FEATURES]
_Triple = Annotated[Attribute, POSITIVE_TRIPLE]
_Padding = Annotated[Attribute, NONNEGATIVE_TRIPLE]
_Accumulation = Annotated[Attribute, ACCUMULATION]
_DefaultAccumulation = Annotated[Attribute, DEFAULT_ACCUMULATION]
_Fill = Annotated[Attribute, FILL]
_Eps = Annotated[Attribute, POSITIVE_F32]
_Channel = Annotated[Operand, weight_of(WeightFamily.channel)]
_ChannelBias = Annotated[Operand, weight_of(WeightFamily.bias)]


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
    rounding: Annotated[Attribute, enum_attr(Rounding)]


class Call(Op):
    """Apply a registered primitive with an explicit element-type signature."""

    __mnemonic__ = "call"
    __channels__ = ChannelRule.none
    __rules__ = (use("call.registered"), use("call.signature"))
    inputs: Annotated[Operand, TENSOR, VARIADIC]
    result: Annotated[Result, TENSOR]
    callee: Annotated[Attribute, STRING]


# ---------------------------------------------------------------------------
# The schema object.


@dataclass(frozen=True)
class DialectSchema:
    """The whole dialect: ops by name, enums, types and registered primitives."""

    name: str
    ops: Mapping[str, OpDef]
    enums: tuple[type[SchemaEnum], ...]
    types: tuple[TypeDef, ...]
    primitives: Mapping[str, PrimitiveDef]
    packing_fields: tuple[tuple[str, type[SchemaEnum] | None], ...] = field(default=PACKING_FIELDS)

    def op(self, name: str) -> OpDef:
        """Resolve ``name`` (``conv3d``, ``lattice.conv3d`` or ``sparse_make``) to its OpDef."""
        key = name[len(DIALECT) + 1 :] if name.startswith(DIALECT + ".") else name
        found = self.ops.get(key) or self._by_python_name.get(key)
        if found is None:
            raise KeyError(
                f"unknown lattice operation {name!r}; the schema defines: "
                + ", ".join(sorted(self.ops))
            )
        return found

    @property
    def _by_python_name(self) -> Mapping[str, OpDef]:
        return {o.python_name: o for o in self.ops.values()}


# The reference system's extra ops register from their own module (subclassing Op).
from lattice_contract.schema_extra_ops import (  # noqa: E402
    Elementwise,
    EmbeddingLookup,
    NormalizedConvTranspose3d,
    NormalizedGenerativeConvTranspose3d,
    NormalizedSubmConv3d,
    PoolTranspose3d,
    TargetNormalizedConvTranspose3d,
    TrilinearUpsample3d,
)


def _build_schema() -> DialectSchema:
    ops = {d.name: d for d in map(_op_def, Op._registry)}
    return DialectSchema(
        name=DIALECT,
        ops=MappingProxyType(ops),
        enums=ENUMS,
        types=TYPES,
        primitives=PRIMITIVES,
    )


SCHEMA: DialectSchema = _build_schema()
"""The lattice dialect.  Import this, never the op classes, to enumerate it."""
