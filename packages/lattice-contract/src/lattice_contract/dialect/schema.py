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

from lattice_contract.dialect.extra_ops import (
    Elementwise,
    EmbeddingLookup,
    NormalizedConvTranspose3d,
    NormalizedGenerativeConvTranspose3d,
    NormalizedSubmConv3d,
    PoolTranspose3d,
    TargetNormalizedConvTranspose3d,
    TrilinearUpsample3d,
)
from lattice_contract.dialect.grid_ops import DENSE_LAYOUTS, SparseCrop, SparseToDense
from lattice_contract.dialect.op_base import Op, op_def
from lattice_contract.dialect.ops import (
    Activation,
    BatchNorm,
    Call,
    Cast,
    Conv3d,
    ConvTranspose3d,
    Devoxelize,
    FullConv3d,
    FullPool3d,
    GenerativeConvTranspose3d,
    GlobalPool,
    LayerNorm,
    Linear,
    Pool3d,
    RmsNorm,
    Softmax,
    SparseBinary,
    SparseCat,
    SparseDecompose,
    SparseMake,
    SparseReindex,
    SparseWithFeatures,
    SubmConv3d,
    TargetConv3d,
    TargetConvTranspose3d,
    Voxelize,
    Weight,
)
from lattice_contract.dialect.rules import (
    DIALECT_RULES,
    RULES,
    Rule,
    RuleCheck,
    RuleKind,
    RuleUse,
    rule,
    rule_tag,
)
from lattice_contract.dialect.types import (
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
    "DENSE_LAYOUTS",
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
    "SparseCrop",
    "SparseDecompose",
    "SparseMake",
    "SparseReindex",
    "SparseToDense",
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


def _build_schema() -> DialectSchema:
    ops = {d.name: d for d in map(op_def, Op._registry)}
    return DialectSchema(
        name=DIALECT,
        ops=MappingProxyType(ops),
        enums=ENUMS,
        types=TYPES,
        primitives=PRIMITIVES,
    )


SCHEMA: DialectSchema = _build_schema()
"""The lattice dialect.  Import this, never the op classes, to enumerate it."""
