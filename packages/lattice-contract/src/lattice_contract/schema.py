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

import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, get_type_hints

DIALECT = "lattice"

# ---------------------------------------------------------------------------
# Enums.  Each enum that appears as an attribute is spelled
# ``#lattice.<mnemonic><value>``; enums used only as type or struct parameters
# are spelled as bare keywords inside their owner.


class SchemaEnum(enum.Enum):
    """Base of every dialect enum: the value is the keyword spelled in MLIR.

    A member defined twice with one value is a *synonym*: ``max = "maximum"``
    after ``maximum = "maximum"`` makes the keyword ``max`` parse as
    ``maximum`` (Python: ``BinaryOp("max") is BinaryOp.maximum``), while
    printing, iteration and the digest see only the canonical keyword.
    """

    __mnemonic__: ClassVar[str]

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def _missing_(cls, value: object) -> SchemaEnum | None:
        member = cls.__members__.get(value) if isinstance(value, str) else None
        return member if isinstance(member, cls) else None


def enum_synonyms(enum_type: type[SchemaEnum]) -> Mapping[str, str]:
    """Synonym keyword -> canonical keyword of an enum (its aliases)."""
    return MappingProxyType(
        {name: m.value for name, m in enum_type.__members__.items() if name != m.name}
    )


class WeightFamily(SchemaEnum):
    """What a symbolic weight is for; the first parameter of ``!lattice.weight``."""

    __mnemonic__ = "weight_family"
    conv3d = "conv3d"
    linear = "linear"
    bias = "bias"
    channel = "channel"
    embedding = "embedding"


class WeightLayout(SchemaEnum):
    """Logical axis order of a weight payload (``#lattice.weight_layout<...>``)."""

    __mnemonic__ = "weight_layout"
    conv3d_o_xyz_i = "conv3d_o_xyz_i"
    linear_o_i = "linear_o_i"
    bias_c = "bias_c"
    channel_c = "channel_c"
    embedding_n_c = "embedding_n_c"


class PackingBits(SchemaEnum):
    """Storage of a weight: dense, or the bit width of packed affine quantization."""

    __mnemonic__ = "packing_bits"
    dense = "dense"
    int4 = "int4"
    int8 = "int8"


class ScaleDtype(SchemaEnum):
    """Storage type of packed-weight scales and biases."""

    __mnemonic__ = "scale_dtype"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"


class PackingMode(SchemaEnum):
    """Quantization mode of a packed weight: ``w = scale * q + bias``."""

    __mnemonic__ = "packing_mode"
    affine = "affine"


class CoordLayout(SchemaEnum):
    """Column meaning of a sparse coordinate row."""

    __mnemonic__ = "coord"
    batch_x_y_z = "batch_x_y_z"


class FeatureLayout(SchemaEnum):
    """Storage of sparse features: one row per coordinate row."""

    __mnemonic__ = "feature_layout"
    row_channel = "row_channel"


class ActivationKind(SchemaEnum):
    """Pointwise nonlinearity of ``lattice.activation``."""

    __mnemonic__ = "activation"
    relu = "relu"
    leaky_relu = "leaky_relu"
    gelu = "gelu"
    silu = "silu"
    sigmoid = "sigmoid"
    tanh = "tanh"
    softplus = "softplus"
    elu = "elu"
    hardswish = "hardswish"
    identity = "identity"


class GeluApprox(SchemaEnum):
    """GELU formula: erf (none, precise), tanh approximation, or x * sigmoid(1.702 x) (fast)."""

    __mnemonic__ = "gelu_approx"
    none = "none"
    tanh = "tanh"
    precise = "precise"
    fast = "fast"


class PoolMode(SchemaEnum):
    """Reduction over a pooling window or a whole batch item."""

    __mnemonic__ = "pool_mode"
    max = "max"
    avg = "avg"
    sum = "sum"


class Join(SchemaEnum):
    """Which coordinate rows survive a two-operand sparse op."""

    __mnemonic__ = "join"
    inner = "inner"
    left = "left"
    right = "right"
    outer = "outer"


class BinaryOp(SchemaEnum):
    """Elementwise combination of coordinate-aligned sparse features."""

    __mnemonic__ = "binary_op"
    add = "add"
    sub = "sub"
    mul = "mul"
    maximum = "maximum"
    minimum = "minimum"
    max = "maximum"  # Lattice's earlier spelling, read as a synonym
    min = "minimum"


class VoxelReduction(SchemaEnum):
    """How ``lattice.voxelize`` merges the features of points in one voxel."""

    __mnemonic__ = "voxel_reduction"
    mean = "mean"
    sum = "sum"
    max = "max"


class Interpolation(SchemaEnum):
    """How ``lattice.devoxelize`` reads voxels: nearest, linear corners, trilinear renormalised."""

    __mnemonic__ = "point_interpolation"
    nearest = "nearest"
    linear = "linear"
    trilinear = "trilinear"


class Rounding(SchemaEnum):
    """IEEE 754 rounding direction of ``lattice.cast``."""

    __mnemonic__ = "rounding"
    nearest_even = "nearest_even"
    nearest_away = "nearest_away"
    toward_zero = "toward_zero"
    upward = "upward"
    downward = "downward"


ENUMS: tuple[type[SchemaEnum], ...] = (
    WeightFamily,
    WeightLayout,
    PackingBits,
    ScaleDtype,
    PackingMode,
    CoordLayout,
    FeatureLayout,
    ActivationKind,
    GeluApprox,
    PoolMode,
    Join,
    BinaryOp,
    VoxelReduction,
    Interpolation,
    Rounding,
)


class StrideRule(enum.Enum):
    """How an op's sparse result stride follows statically from its operands.

    Not a dialect enum (nothing spells it in MLIR): the verifier's one forward
    pass over a block and the builder read it.  Whatever the rule, an op whose
    ``target`` operand is present takes the target's stride (the op's own
    verifier checks that it equals what the rule derives).
    """

    none = "none"  # no sparse result
    attribute = "attribute"  # the op's ``stride`` attribute (sparse.make, voxelize)
    input = "input"  # the ``input`` operand's stride
    lhs = "lhs"  # the ``lhs`` operand's stride
    target = "target"  # the ``target`` operand's stride
    multiply = "multiply"  # input stride x ``stride`` (strided conv and pool)
    divide = "divide"  # input stride / ``stride`` (transposes, upsampling)


# ---------------------------------------------------------------------------
# Element types.

FLOAT_DTYPES: tuple[str, ...] = ("f16", "bf16", "f32")
"""Floating element types a feature tensor may have."""

INT_DTYPES: tuple[str, ...] = ("i32",)
"""Integer element types a dense tensor may have (coordinates, labels)."""

PACKED_DTYPES: tuple[str, ...] = ("i4", "i8")
"""Integer element types of packed weights; each needs a packed ``packing`` attribute.

A packed weight may instead declare the float type of its dequantised values
(upstream's producer does); the packing attribute then says it is packed."""

WEIGHT_DTYPES: tuple[str, ...] = FLOAT_DTYPES + PACKED_DTYPES

PACKED_DTYPE_OF_BITS: Mapping[str, str] = MappingProxyType({"int4": "i4", "int8": "i8"})

# ---------------------------------------------------------------------------
# Type constraints of operands and results.


class TypeKind(enum.Enum):
    """Shape of value an operand or result carries."""

    sparse = "sparse"  # !lattice.sparse_tensor<...>
    weight = "weight"  # !lattice.weight<family, dtype>
    coords = "coords"  # tensor<?x4xi32>
    active = "active"  # tensor<1xi32>
    features = "features"  # rank-2 float tensor, one row per sparse row
    points = "points"  # tensor<?x3xf32>
    batch_index = "batch_index"  # tensor<?xi32>
    tensor = "tensor"  # any ranked tensor of a float or i32 element type


@dataclass(frozen=True)
class TypeConstraint:
    """What an operand or result must be; ``families`` restricts weights."""

    kind: TypeKind
    families: tuple[WeightFamily, ...] = ()

    def describe(self) -> str:
        """A short phrase for diagnostics and docs."""
        if self.kind is TypeKind.weight:
            return "!lattice.weight<" + "|".join(f.value for f in self.families) + ", dtype>"
        return {
            TypeKind.sparse: "!lattice.sparse_tensor",
            TypeKind.coords: "tensor<?x4xi32>",
            TypeKind.active: "tensor<1xi32>",
            TypeKind.features: "rank-2 float tensor",
            TypeKind.points: "tensor<?x3xf32>",
            TypeKind.batch_index: "tensor<?xi32>",
            TypeKind.tensor: "ranked tensor",
        }[self.kind]


SPARSE = TypeConstraint(TypeKind.sparse)
COORDS = TypeConstraint(TypeKind.coords)
ACTIVE = TypeConstraint(TypeKind.active)
FEATURES = TypeConstraint(TypeKind.features)
POINTS = TypeConstraint(TypeKind.points)
BATCH_INDEX = TypeConstraint(TypeKind.batch_index)
TENSOR = TypeConstraint(TypeKind.tensor)


def weight_of(*families: WeightFamily) -> TypeConstraint:
    """Constraint for a ``!lattice.weight`` operand of the given families."""
    return TypeConstraint(TypeKind.weight, tuple(families))


# ---------------------------------------------------------------------------
# Attribute kinds.


class AttrKind(enum.Enum):
    """How an attribute is spelled in MLIR and what Python value it becomes."""

    triple = "triple"  # array<i64: a, b, c>          -> tuple[int, int, int]
    i64 = "i64"  # 3 : i64                            -> int
    f32 = "f32"  # 0.5 : f32                          -> float
    string = "string"  # "text"                       -> str
    symbol = "symbol"  # @name (the op's symbol)       -> str
    enum = "enum"  # #lattice.<mnemonic><value>       -> str
    packing = "packing"  # #lattice.packing<...>      -> Mapping[str, Any]
    f64_triple = "f64_triple"  # array<f64: a, b, c>  -> tuple[float, float, float]


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its kind and the values it may take."""

    kind: AttrKind
    enum: type[SchemaEnum] | None = None
    minimum: int | float | None = None  # inclusive, per element for triples
    exclusive_minimum: bool = False
    allowed: tuple[str, ...] = ()  # closed value set of a string, or of an i64 as decimal text
    required: bool = True
    default: int | float | str | None = None  # what an absent optional attribute means

    def optional(self, default: int | float | str | None = None) -> AttrSpec:
        """The same attribute, allowed to be absent; ``default`` is what absence means.

        The plan fills the default in, so lowerings always see a value; with no
        default (``packing``) absence is itself the meaning (dense).
        """
        return AttrSpec(
            self.kind,
            self.enum,
            self.minimum,
            self.exclusive_minimum,
            self.allowed,
            False,
            default,
        )


def enum_attr(enum_type: type[SchemaEnum]) -> AttrSpec:
    """An attribute spelled ``#lattice.<mnemonic><value>``."""
    return AttrSpec(AttrKind.enum, enum=enum_type)


POSITIVE_TRIPLE = AttrSpec(AttrKind.triple, minimum=1)
NONNEGATIVE_TRIPLE = AttrSpec(AttrKind.triple, minimum=0)
POSITIVE_I64 = AttrSpec(AttrKind.i64, minimum=1)
BATCH_SIZE = AttrSpec(AttrKind.i64, minimum=-1)
"""``global_pool`` rows: B >= 1 fixed, 0 an empty batch set, -1 inferred at run time."""
AXIS = AttrSpec(AttrKind.i64, allowed=("-1", "1")).optional(default=-1)
"""``softmax`` over the channel axis of a rank-2 tensor, spelled -1 or 1 (default -1)."""
F32 = AttrSpec(AttrKind.f32)
FILL = AttrSpec(AttrKind.f32).optional(default=0.0)
"""Value an absent row or side contributes (default 0)."""
POSITIVE_F64_TRIPLE = AttrSpec(AttrKind.f64_triple, minimum=0.0, exclusive_minimum=True)
F64_TRIPLE = AttrSpec(AttrKind.f64_triple)
POSITIVE_F32 = AttrSpec(AttrKind.f32, minimum=0.0, exclusive_minimum=True)
STRING = AttrSpec(AttrKind.string)
SYMBOL = AttrSpec(AttrKind.symbol)
PACKING = AttrSpec(AttrKind.packing)
ACCUMULATION = AttrSpec(AttrKind.string, allowed=("canonical_f32",))
"""Every conv, pool and linear op sums products in f32 whatever the storage.

Required on convolutions; optional (same single value) on pools,
``global_pool`` and ``linear``, which upstream spells without it."""
DEFAULT_ACCUMULATION = ACCUMULATION.optional(default="canonical_f32")

PACKING_FIELDS: tuple[tuple[str, type[SchemaEnum] | None], ...] = (
    ("bits", PackingBits),
    ("group_size", None),
    ("scale_dtype", ScaleDtype),
    ("mode", PackingMode),
)
"""Parameters of ``#lattice.packing<bits, group_size = N, scale_dtype = T, mode = M>``.

``#lattice.packing<dense>`` (bits ``dense``) has no other parameter; a
packed weight has all four."""

PACKING_GROUP_SIZES: tuple[int, ...] = (32, 64, 128)
"""Group sizes of packed weights (those MLX's affine quantization supports)."""

# ---------------------------------------------------------------------------
# Annotation markers.


class Operand:
    """Marker: the annotated name is an SSA operand."""


class Result:
    """Marker: the annotated name is an SSA result."""


class Attribute:
    """Marker: the annotated name is an attribute."""


class _Optional:
    def __repr__(self) -> str:
        return "OPTIONAL"


class _Variadic:
    def __repr__(self) -> str:
        return "VARIADIC"


OPTIONAL = _Optional()
"""Annotation flag: the operand may be omitted (at most one per op)."""

VARIADIC = _Variadic()
"""Annotation flag: the operand takes zero or more values (``call`` only)."""

# ---------------------------------------------------------------------------
# Definitions derived from the annotations.


@dataclass(frozen=True)
class OperandDef:
    """One operand of an op, in declaration order."""

    name: str
    type: TypeConstraint
    optional: bool = False
    variadic: bool = False


@dataclass(frozen=True)
class ResultDef:
    """One result of an op, in declaration order."""

    name: str
    type: TypeConstraint


@dataclass(frozen=True)
class AttrDef:
    """One attribute of an op, in declaration order."""

    name: str
    spec: AttrSpec


@dataclass(frozen=True)
class OpDef:
    """A dialect operation as every consumer of the schema sees it."""

    name: str  # without the dialect prefix, e.g. "sparse.make"
    class_name: str  # e.g. "SparseMake"
    summary: str
    operands: tuple[OperandDef, ...]
    results: tuple[ResultDef, ...]
    attributes: tuple[AttrDef, ...]
    traits: tuple[str, ...] = ()
    stride: StrideRule = StrideRule.none

    @property
    def mlir_name(self) -> str:
        """Full operation name, e.g. ``lattice.sparse.make``."""
        return f"{DIALECT}.{self.name}"

    @property
    def python_name(self) -> str:
        """Name of the builder method and lowering key, e.g. ``sparse_make``."""
        return self.name.replace(".", "_")

    def operand(self, name: str) -> OperandDef:
        """The operand called ``name``; KeyError names the op when absent."""
        for item in self.operands:
            if item.name == name:
                return item
        raise KeyError(f"{self.mlir_name} has no operand {name!r}")

    def attribute(self, name: str) -> AttrDef:
        """The attribute called ``name``; KeyError names the op when absent."""
        for item in self.attributes:
            if item.name == name:
                return item
        raise KeyError(f"{self.mlir_name} has no attribute {name!r}")

    @property
    def variadic(self) -> bool:
        """Whether any operand is variadic (so operand counts vary)."""
        return any(o.variadic for o in self.operands)

    @property
    def min_operands(self) -> int:
        """Fewest operands a use of this op may have."""
        return sum(1 for o in self.operands if not (o.optional or o.variadic))

    @property
    def max_operands(self) -> int | None:
        """Most operands a use may have; None when a variadic operand is unbounded."""
        return None if self.variadic else len(self.operands)


class Op:
    """Base class of op declarations; subclasses are collected into ``SCHEMA``."""

    __mnemonic__: ClassVar[str]
    __traits__: ClassVar[tuple[str, ...]] = ()
    __stride__: ClassVar[StrideRule] = StrideRule.none
    _registry: ClassVar[list[type[Op]]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Op._registry.append(cls)


def _op_def(cls: type[Op]) -> OpDef:
    hints = get_type_hints(cls, include_extras=True, globalns=vars(sys.modules[__name__]))
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
    input: _Sparse
    coords: Annotated[Result, COORDS]
    features: _FeaturesResult
    active: Annotated[Result, ACTIVE]


class SparseWithFeatures(Op):
    """Keep a sparse value's support and replace its features row for row."""

    __mnemonic__ = "sparse.with_features"
    __stride__ = StrideRule.input
    input: _Sparse
    features: _Features
    result: _SparseResult


class SparseReindex(Op):
    """Gather features onto the target's exact rows, ``fill`` where the input has no row."""

    __mnemonic__ = "sparse.reindex"
    __stride__ = StrideRule.target
    input: _Sparse
    target: _Sparse
    result: _SparseResult
    fill: _Fill


class Weight(Op):
    """Bind a symbolic weight to its safetensors payload."""

    __mnemonic__ = "weight"
    result: Annotated[Result, weight_of(*WeightFamily)]
    sym_name: Annotated[Attribute, SYMBOL]
    storage_key: Annotated[Attribute, STRING]
    layout: Annotated[Attribute, enum_attr(WeightLayout)]
    packing: Annotated[Attribute, PACKING.optional()]


class Conv3d(Op):
    """Strided sparse convolution over the coarsened input support, taps centred on odd axes."""

    __mnemonic__ = "conv3d"
    __stride__ = StrideRule.multiply
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
    input: _Sparse
    result: Annotated[Result, FEATURES]
    mode: Annotated[Attribute, enum_attr(PoolMode)]
    batch_size: Annotated[Attribute, BATCH_SIZE]
    accumulation: _DefaultAccumulation


class Voxelize(Op):
    """Quantize the active points to voxels floor((p - origin) / voxel_size), reducing features."""

    __mnemonic__ = "voxelize"
    __stride__ = StrideRule.attribute
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
    input: _Features
    weight: Annotated[Operand, weight_of(WeightFamily.linear)]
    bias: _Bias
    result: _FeaturesResult
    accumulation: _DefaultAccumulation


class Activation(Op):
    """Pointwise nonlinearity on feature rows."""

    __mnemonic__ = "activation"
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
    input: _Features
    scale: _Channel
    bias: _ChannelBias
    result: _FeaturesResult
    eps: _Eps


class RmsNorm(Op):
    """Divide each feature row by its root mean square, then scale."""

    __mnemonic__ = "rms_norm"
    input: _Features
    scale: _Channel
    result: _FeaturesResult
    eps: _Eps


class Softmax(Op):
    """Softmax of each feature row over its channels."""

    __mnemonic__ = "softmax"
    input: _Features
    result: _FeaturesResult
    axis: Annotated[Attribute, AXIS]


class SparseBinary(Op):
    """Elementwise op of two coordinate-aligned sparse values at one stride."""

    __mnemonic__ = "sparse.binary"
    __stride__ = StrideRule.lhs
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
    lhs: _Sparse
    rhs: _Sparse
    result: _SparseResult
    join: Annotated[Attribute, enum_attr(Join)]


class Cast(Op):
    """Convert a dense tensor to another float type with an explicit IEEE rounding direction."""

    __mnemonic__ = "cast"
    input: Annotated[Operand, TENSOR]
    result: Annotated[Result, TENSOR]
    rounding: Annotated[Attribute, enum_attr(Rounding)]


class Call(Op):
    """Apply a registered primitive with an explicit element-type signature."""

    __mnemonic__ = "call"
    inputs: Annotated[Operand, TENSOR, VARIADIC]
    result: Annotated[Result, TENSOR]
    callee: Annotated[Attribute, STRING]


# ---------------------------------------------------------------------------
# The reference system's weight-normalised convolutions, upsampling onto finer
# supports, embedding lookup and elementwise maps (semantics: docs/extra-ops.md).

ELEMENTWISE_KINDS: tuple[str, ...] = ("exp", "round")
"""Kinds of ``lattice.elementwise`` (``round`` rounds half to even)."""

_OptionalTarget = Annotated[Operand, SPARSE, OPTIONAL]


class NormalizedSubmConv3d(Op):
    """Submanifold convolution normalised per row by the weight mass its support reaches."""

    __mnemonic__ = "normalized_subm_conv3d"
    __stride__ = StrideRule.input
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
    input: _Sparse
    target: _OptionalTarget
    result: _SparseResult
    stride: _Triple


class EmbeddingLookup(Op):
    """Rows of a dense embedding table picked by an i32 index vector."""

    __mnemonic__ = "embedding_lookup"
    indices: Annotated[Operand, BATCH_INDEX]
    weight: Annotated[Operand, weight_of(WeightFamily.embedding)]
    result: _FeaturesResult


class Elementwise(Op):
    """Deterministic unary map of f32 features: exp, or round half to even."""

    __mnemonic__ = "elementwise"
    input: _Features
    result: _FeaturesResult
    kind: Annotated[Attribute, AttrSpec(AttrKind.string, allowed=ELEMENTWISE_KINDS)]


# ---------------------------------------------------------------------------
# Registered primitives for ``lattice.call``.


@dataclass(frozen=True)
class PrimitiveDef:
    """A primitive ``lattice.call`` may name: its exact element-type signature.

    ``input_ranks`` and ``output_rank`` pin ranks; shapes beyond rank are the
    runtime's to check.  Runtimes must register an implementation of each
    primitive they execute; a program using one they lack does not compile.
    """

    name: str
    summary: str
    inputs: tuple[str, ...]
    output: str
    input_ranks: tuple[int, ...]
    output_rank: int


PRIMITIVES: Mapping[str, PrimitiveDef] = MappingProxyType(
    {
        p.name: p
        for p in (
            PrimitiveDef(
                "argmax",
                "Index of the largest channel of each f32 feature row, as i32 (ties: first).",
                inputs=("f32",),
                output="i32",
                input_ranks=(2,),
                output_rank=1,
            ),
            PrimitiveDef(
                "gather_rows",
                "Rows of an f32 matrix picked by an i32 index vector.",
                inputs=("f32", "i32"),
                output="f32",
                input_ranks=(2, 1),
                output_rank=2,
            ),
        )
    }
)

# ---------------------------------------------------------------------------
# The schema object.


@dataclass(frozen=True)
class TypeParamDef:
    """One parameter of a dialect type, spelled ``name = value`` or positionally."""

    name: str
    kind: str  # "unsigned" | "enum" | "dtype"
    enum: type[SchemaEnum] | None = None
    allowed: tuple[str, ...] = ()
    keyword: bool = True


@dataclass(frozen=True)
class TypeDef:
    """A dialect type, e.g. ``!lattice.sparse_tensor<rank = 3, ...>``."""

    mnemonic: str
    class_name: str
    summary: str
    params: tuple[TypeParamDef, ...]


TYPES: tuple[TypeDef, ...] = (
    TypeDef(
        "sparse_tensor",
        "SparseTensorType",
        "A sparse value: physical coordinates, row-aligned features, an active count and a stride.",
        (
            TypeParamDef("rank", "unsigned", allowed=("3",)),
            TypeParamDef("coord", "enum", CoordLayout),
            TypeParamDef("feature", "enum", FeatureLayout),
            TypeParamDef("dtype", "dtype", allowed=FLOAT_DTYPES),
        ),
    ),
    TypeDef(
        "weight",
        "WeightType",
        "A symbolic weight bound to safetensors storage.",
        (
            TypeParamDef("family", "enum", WeightFamily, keyword=False),
            TypeParamDef("dtype", "dtype", allowed=WEIGHT_DTYPES, keyword=False),
        ),
    ),
)


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
