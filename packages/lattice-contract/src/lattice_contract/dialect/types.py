"""The vocabulary of the lattice dialect schema: enums, element types, type and
attribute constraints, annotation markers and the definition records.

:mod:`lattice_contract.dialect.schema` declares the ops with these and re-exports
every name here, so ``from lattice_contract.dialect.schema import WeightFamily`` keeps
working; import from there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from lattice_contract.dialect.rules import RuleUse

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
    """What a symbolic weight is for; the first parameter of ``!lattice.weight``.

    Each family fixes its layout, the logical rank and axes of its payload and
    whether it may be affine-packed (:data:`WEIGHT_FAMILY_INFO`); every
    consumer (builder, verifier, plan, exporter) reads them from here.
    """

    __mnemonic__ = "weight_family"
    conv3d = "conv3d"
    linear = "linear"
    bias = "bias"
    channel = "channel"
    embedding = "embedding"

    @property
    def info(self) -> WeightFamilyInfo:
        """Layout, axes and packability of this family."""
        return WEIGHT_FAMILY_INFO[self]

    @property
    def layout(self) -> WeightLayout:
        """The one layout weights of this family declare."""
        return self.info.layout

    @property
    def rank(self) -> int:
        """Logical rank of the payload (one axis per letter of :attr:`axes`)."""
        return len(self.info.axes)

    @property
    def axes(self) -> str:
        """Logical axes of the payload in order: o (C_out), i (C_in), x/y/z taps, n rows, c."""
        return self.info.axes

    @property
    def packable(self) -> bool:
        """Whether weights of this family may be affine-packed (int4/int8)."""
        return self.info.packable


class WeightLayout(SchemaEnum):
    """Logical axis order of a weight payload (``#lattice.weight_layout<...>``)."""

    __mnemonic__ = "weight_layout"
    conv3d_o_xyz_i = "conv3d_o_xyz_i"
    linear_o_i = "linear_o_i"
    bias_c = "bias_c"
    channel_c = "channel_c"
    embedding_n_c = "embedding_n_c"


@dataclass(frozen=True)
class WeightFamilyInfo:
    """What a weight family fixes about its payload."""

    layout: WeightLayout
    axes: str  # logical axes in payload order, e.g. "oxyzi" = (C_out, Kx, Ky, Kz, C_in)
    packable: bool  # affine int4/int8 packing allowed (the big matrices; never bias or norm)


WEIGHT_FAMILY_INFO: Mapping[WeightFamily, WeightFamilyInfo] = MappingProxyType(
    {
        WeightFamily.conv3d: WeightFamilyInfo(WeightLayout.conv3d_o_xyz_i, "oxyzi", True),
        WeightFamily.linear: WeightFamilyInfo(WeightLayout.linear_o_i, "oi", True),
        WeightFamily.bias: WeightFamilyInfo(WeightLayout.bias_c, "c", False),
        WeightFamily.channel: WeightFamilyInfo(WeightLayout.channel_c, "c", False),
        WeightFamily.embedding: WeightFamilyInfo(WeightLayout.embedding_n_c, "nc", False),
    }
)
"""Layout, axes and packability of each weight family (not part of the digest)."""


def layout_family(layout: WeightLayout) -> WeightFamily:
    """The family whose weights declare ``layout``."""
    return next(f for f, info in WEIGHT_FAMILY_INFO.items() if info.layout is layout)


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
    """IEEE 754 rounding direction of ``lattice.cast``.

    ``nearest`` (the typed-program text's name for IEEE's default, and the
    default when ``rounding`` is left out) is a synonym of ``nearest_even``,
    the precise keyword that prints.
    """

    __mnemonic__ = "rounding"
    nearest_even = "nearest_even"
    nearest_away = "nearest_away"
    toward_zero = "toward_zero"
    upward = "upward"
    downward = "downward"
    nearest = "nearest_even"


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


class ChannelRule(enum.Enum):
    """How an op's result channel count follows from its operands (result-type inference).

    Not a dialect enum and not in the digest: the builder reads it.  The
    element type of every sparse or feature result is the input's (only
    ``cast`` and ``call`` declare theirs), and the stride follows
    :class:`StrideRule`.
    """

    none = "none"  # no sparse or feature result with channels of its own (weights, call)
    input = "input"  # the input's (pools, norms, activations, reindex, upsampling)
    weight = "weight"  # the weight's C_out (convolutions, linear, embedding rows: its C)
    features = "features"  # the ``features`` operand's (sparse.make, with_features, voxelize)
    concat = "concat"  # lhs + rhs (sparse.cat)
    lhs = "lhs"  # the lhs's, rhs equal (sparse.binary)


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

ELEMENTWISE_KINDS: tuple[str, ...] = ("exp", "round")
"""Kinds of ``lattice.elementwise`` (``round`` rounds half to even)."""

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


OP_DECLARATIONS: dict[str, tuple[tuple[RuleUse, ...], ChannelRule]] = {}
"""Per op name: its rules and channel inference (filled as the schema is built)."""

_NO_DECLARATIONS: tuple[tuple[RuleUse, ...], ChannelRule] = ((), ChannelRule.none)


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
    def rules(self) -> tuple[RuleUse, ...]:
        """The op's own rules, declared next to it (``DIALECT_RULES`` apply to every op).

        Kept beside the record rather than in it: rules are not part of the
        contract, so they never enter the digest (every OpDef field does).
        """
        return OP_DECLARATIONS.get(self.name, _NO_DECLARATIONS)[0]

    @property
    def channels(self) -> ChannelRule:
        """How the result's channel count follows (result-type inference; not digested)."""
        return OP_DECLARATIONS.get(self.name, _NO_DECLARATIONS)[1]

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
