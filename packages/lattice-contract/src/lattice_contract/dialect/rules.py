"""The dialect's semantic rules, each declared once with a stable ID.

Every check that can reject an op -- in the native verifier, in the textual
builder or in the plan -- is one :class:`Rule` here: an ID, the kind of
condition, a one-line statement (what ``docs/dialect.md`` lists) and the fix a
diagnostic names.  Ops declare the rules that apply to them next to their
operands (``__rules__`` in :mod:`lattice_contract.dialect.schema`); the rules in
:data:`DIALECT_RULES` apply to every op and are evaluated from the generated
schema tables.

**IDs.** ``<area>.<slug>``: lowercase ASCII words joined by ``_``, one dot.
The area is the concept the rule is about (``attr``, ``value``, ``dtype``,
``stride``, ``geometry``, ``weight``) or the op family it belongs to
(``subm``, ``generative``, ``cast``, ``call``...).  An ID never changes
meaning once released; a retired rule's ID is not reused.

**Diagnostics** end with `` [rule <id>]``: the verifier writes
``'lattice.op' op <problem>; <fix> [rule <id>]``, the builder
``lattice.op: argument 'x' <problem>; <fix> [rule <id>]``.  The problem part
names the values involved; the fix is the rule's.

**Where a rule is evaluated** (:class:`RuleKind`):

* ``generic``: for every op, by the verifier's walk over the generated schema
  tables and by the builder's schema-driven argument checks;
* ``generated``: declared on ops with operand/attribute parameters, emitted by
  the TableGen generator as per-op tables that the verifier evaluates
  (``stride``, ``shape``, ``weight`` standard kinds);
* ``native``: exotic rules the hand-written C++ keeps (each still tagged
  with its ID from the generated rule table);
* ``builder``: needs weight shapes, which the IR types do not carry, so only
  the builder (and the plan, which sees the weight file) can check it.

Nothing here enters the schema digest: IDs, statements and fixes can be
reworded without changing the contract.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "CONV_GEOMETRY_RULES",
    "DIALECT_RULES",
    "INT32_MAX",
    "RULES",
    "Rule",
    "RuleCheck",
    "RuleKind",
    "RuleUse",
    "geometry_int32_problem",
    "rule",
    "rule_message",
    "rule_tag",
]

_ID = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\Z")


class RuleKind(enum.Enum):
    """Where and how a rule is evaluated (see the module docstring)."""

    generic = "generic"
    generated = "generated"
    native = "native"
    builder = "builder"


class RuleCheck(enum.Enum):
    """The standard condition of a ``generated`` rule, evaluated by table in C++.

    Parameters of a use (:class:`RuleUse`) name the operands or attributes
    involved.
    """

    absent_attrs = "absent_attrs"  # params: attribute names the op must not carry
    stride_divides = "stride_divides"  # params: (input operand,) -- input stride % stride == 0
    stride_target = "stride_target"  # params: (input, target) -- target at the derived stride
    stride_same = "stride_same"  # params: (lhs, rhs) -- both operands at one stride
    shape_same = "shape_same"  # params: (input, result) -- identical types
    dense_weight = "dense_weight"  # params: (weight operand,) -- not packed
    geometry_int32 = "geometry_int32"  # params: () -- products of the geometry fit int32
    weight_layout = "weight_layout"  # lattice.weight: layout is the family's
    weight_packable = "weight_packable"  # lattice.weight: packed only for packable families
    weight_packed_dtype = "weight_packed_dtype"  # lattice.weight: i4/i8 need packed packing
    weight_packing_bits = "weight_packing_bits"  # lattice.weight: bits match the dtype


@dataclass(frozen=True)
class Rule:
    """One semantic rule of the dialect."""

    id: str
    kind: RuleKind
    statement: str  # one line, as docs/dialect.md lists it
    fix: str  # what the diagnostic tells the author to do
    check: RuleCheck | None = None  # the standard condition of a ``generated`` rule

    def __post_init__(self) -> None:
        if not _ID.match(self.id):  # pragma: no cover - a schema authoring error
            raise ValueError(f"rule ID {self.id!r} is not <area>.<slug>")
        if (self.kind is RuleKind.generated) != (self.check is not None):  # pragma: no cover
            raise ValueError(f"rule {self.id}: generated rules (only) name a RuleCheck")

    @property
    def tag(self) -> str:
        """The trailing diagnostic tag, `` [rule <id>]``."""
        return rule_tag(self.id)

    def message(self, problem: str) -> str:
        """The one diagnostic of this rule: ``<problem>; <fix> [rule <id>]``.

        ``problem`` names the values involved; the fix and the tag are the
        rule's, so the builder, the plan freezer and the type checker word a
        broken rule as the native verifier does.
        """
        return f"{problem}; {self.fix}{self.tag}"

    @property
    def cpp_name(self) -> str:
        """The C++ enumerator of this rule in ``schema::RuleId``."""
        return self.id.replace(".", "_")

    @property
    def verified(self) -> bool:
        """Whether the native verifier evaluates this rule (so an invalid lit file shows it)."""
        return self.kind is not RuleKind.builder


@dataclass(frozen=True)
class RuleUse:
    """A rule applied to one op, with the operand/attribute names its check reads."""

    rule: Rule
    params: tuple[str, ...] = ()


def rule_tag(rule_id: str) -> str:
    """`` [rule <id>]``: how every diagnostic names its rule."""
    return f" [rule {rule_id}]"


_G, _N, _B, _T = RuleKind.generic, RuleKind.native, RuleKind.builder, RuleKind.generated
C = RuleCheck

_ALL: tuple[Rule, ...] = (
    # --- Generic: every op, from the generated schema tables. -------------------
    Rule(
        "attr.declared",
        _G,
        "An op carries only the attributes it declares.",
        "remove the attribute",
    ),
    Rule(
        "attr.required",
        _G,
        "Every required attribute is present (accumulation's absence is reported last).",
        "add the attribute",
    ),
    Rule(
        "attr.triple",
        _G,
        "Triple attributes have exactly three components, one per axis.",
        "write all three axes",
    ),
    Rule(
        "attr.minimum",
        _G,
        "Numeric attributes are at least their declared minimum, per component for triples.",
        "fix the value in the exported layer",
    ),
    Rule(
        "attr.allowed",
        _G,
        "Attributes with a closed value set take one of its values.",
        "use one of the allowed values",
    ),
    Rule(
        "attr.finite",
        _G,
        "Float attributes are finite (no NaN or infinity).",
        "write a finite value",
    ),
    Rule(
        "value.kind",
        _G,
        "Operands and results have their declared kind: sparse, weight, coordinates, "
        "active count, features, points, batch index or tensor.",
        "pass a value of the declared kind",
    ),
    Rule(
        "weight.family",
        _G,
        "Weight operands are of a family the operand allows.",
        "bind a weight of the family the operand takes",
    ),
    Rule(
        "type.params",
        _G,
        "Dialect type parameters take their allowed values: sparse values have rank 3 and a "
        "float dtype (f16, bf16, f32); weights f16, bf16, f32, or i4/i8 when packed.",
        "declare an allowed element type",
    ),
    Rule(
        "dtype.same",
        _G,
        "Every sparse value, feature tensor and dense weight of an op stores one element type.",
        "only cast and registered primitives change element types: insert a lattice.cast or "
        "store the weight in the matching dtype",
    ),
    # --- Generated: standard kinds declared per op. -------------------------------
    Rule(
        "subm.no_stride",
        _T,
        "Submanifold convolutions take no stride or padding; they keep the input's rows and "
        "stride.",
        "drop the attribute, or use lattice.conv3d for a strided or support-generating convolution",
        C.absent_attrs,
    ),
    Rule(
        "generative.no_padding",
        _T,
        "Generative transposes take no padding or dilation (o = c*s + k: padding 0 and "
        "dilation 1 are implied).",
        "drop the attribute, or use lattice.conv_transpose3d for a padded or dilated transpose",
        C.absent_attrs,
    ),
    Rule(
        "stride.divides",
        _T,
        "A transposed or upsampling op's stride divides the input stride per axis "
        "(output stride = input stride / stride).",
        "lower the stride or apply the op to a coarser input",
        C.stride_divides,
    ),
    Rule(
        "stride.target",
        _T,
        "A target operand sits exactly at the stride the op derives (input stride x stride, "
        "or / stride for transposes).",
        "pass a target at the op's output stride (for a transpose, the input of the paired "
        "strided convolution) or fix stride",
        C.stride_target,
    ),
    Rule(
        "stride.same",
        _T,
        "Coordinate-aligned ops take operands at one stride.",
        "bring both operands to one stride with a convolution or pooling first",
        C.stride_same,
    ),
    Rule(
        "geometry.int32",
        _T,
        "Every coordinate quantity the op's attributes imply fits int32: each component, "
        "(K-1)*d, s*K, input stride x stride, and input stride x ((K-1)*d + p).",
        "coordinates are int32: use smaller strides, kernel sizes, paddings or dilations",
        C.geometry_int32,
    ),
    Rule(
        "shape.same",
        _T,
        "Feature-only ops that map a row to a row return their input's type.",
        "declare the result with the input's type",
        C.shape_same,
    ),
    Rule(
        "normalized.dense_weight",
        _T,
        "Weight-normalised convolutions take dense weights (the normaliser needs the weight's "
        "own values).",
        "store this weight dense (packing = #lattice.packing<dense>)",
        C.dense_weight,
    ),
    Rule(
        "weight.layout",
        _T,
        "A weight declares its family's layout (conv3d_o_xyz_i, linear_o_i, bias_c, "
        "channel_c, embedding_n_c).",
        "declare the layout of the weight's family",
        C.weight_layout,
    ),
    Rule(
        "weight.packable",
        _T,
        "Only conv3d and linear weights are packed (groups run along C_in).",
        "store this weight dense (packing = #lattice.packing<dense>)",
        C.weight_packable,
    ),
    Rule(
        "weight.packed_dtype",
        _T,
        "An i4/i8 element type requires a packed packing attribute.",
        "add packing = #lattice.packing<int4|int8, group_size = N, scale_dtype = T, "
        "mode = affine>, or declare a float dtype",
        C.weight_packed_dtype,
    ),
    Rule(
        "weight.packing_bits",
        _T,
        "A packed weight's element type is the packed type of its bits (int4: i4, int8: i8) "
        "or the float type it dequantises to.",
        "declare i4 for int4 packing, i8 for int8, or the float type the weight dequantises to",
        C.weight_packing_bits,
    ),
    # --- Native: exotic rules of the hand-written C++. -----------------------------
    Rule(
        "weight.storage_key",
        _N,
        "A weight names a non-empty safetensors entry (storage_key) and a non-empty symbol.",
        "name the safetensors entry the weight reads",
    ),
    Rule(
        "weight.group_size",
        _N,
        "A packed weight's group_size is one MLX's affine quantization supports (32, 64, 128).",
        "use group_size 32, 64 or 128",
    ),
    Rule(
        "make.rows",
        _N,
        "sparse.make's coordinates and features have the same number of rows.",
        "row i of features belongs to row i of coords: pass tensors with equal row counts",
    ),
    Rule(
        "rows.per_point",
        _N,
        "Point ops give every point-indexed tensor one row per point.",
        "pass point, feature and batch tensors with equal row counts",
    ),
    Rule(
        "linear.rows",
        _N,
        "linear returns one row per input row.",
        "declare the result with the input's row count",
    ),
    Rule(
        "embedding.rows",
        _N,
        "embedding_lookup returns one row per index.",
        "declare the result with one row per index",
    ),
    Rule(
        "global_pool.rows",
        _N,
        "global_pool returns batch_size rows, or dynamic rows when batch_size = -1.",
        "write tensor<BxCxT> for batch_size = B, or tensor<?xCxT>",
    ),
    Rule(
        "activation.approximate",
        _N,
        "Only gelu has an approximation; every other kind has approximate = none.",
        "use approximate = #lattice.gelu_approx<none> (the builder's default)",
    ),
    Rule(
        "cast.float",
        _N,
        "cast converts between float types only (f16, bf16, f32), to a different type.",
        "integer conversions are registered primitives (lattice.call); drop a no-op cast",
    ),
    Rule(
        "cast.shape",
        _N,
        "cast changes only the element type, never the shape.",
        "declare the result with the input's shape",
    ),
    Rule(
        "call.registered",
        _N,
        "call names a registered primitive.",
        "call one of the registered primitives",
    ),
    Rule(
        "call.signature",
        _N,
        "call's operands and result match the primitive's signature (count, element types, ranks).",
        "pass and declare exactly the primitive's signature (insert a lattice.cast if only the "
        "element type differs)",
    ),
    Rule(
        "elementwise.f32",
        _N,
        "elementwise maps rank-2 f32 features to features of the same shape.",
        "convert with lattice.cast first and return the input's shape",
    ),
    Rule(
        "crop.box",
        _N,
        "sparse.crop's box is non-empty: lower < upper on every axis.",
        "give lower <= coordinate < upper per axis with lower below upper (spconv: lower 0, "
        "upper the layer's output shape times the value's stride)",
    ),
    Rule(
        "crop.stride",
        _N,
        "sparse.crop's lower and upper are multiples of the input's stride on every axis.",
        "write the box in physical units: grid cells times the value's stride",
    ),
    Rule(
        "dense.shape",
        _N,
        "sparse.to_dense's result has the rank and extents its layout, batch_size and "
        "spatial_shape give (channels may be dynamic).",
        "declare the result as the layout orders (batch_size, channels, spatial_shape); "
        "b_cz_y_x is rank 4 with channels times spatial z",
    ),
    Rule(
        "dense.dtype",
        _N,
        "sparse.to_dense's result has the input's element type.",
        "declare the result with the sparse input's dtype",
    ),
    # --- Builder: need weight shapes, which IR types do not carry. ----------------
    Rule(
        "weight.shape",
        _B,
        "A weight's logical shape has one positive extent per axis of its layout.",
        "pass the logical shape of the layout",
    ),
    Rule(
        "weight.kernel_extent",
        _B,
        "A conv weight's (Kx, Ky, Kz) extents equal kernel_size.",
        "make kernel_size match the weight's (Kx, Ky, Kz) axes",
    ),
    Rule(
        "weight.in_channels",
        _B,
        "A conv or linear weight's C_in equals the input's channel count.",
        "bind a weight whose C_in equals the input's channel count",
    ),
    Rule(
        "weight.channel_shape",
        _B,
        "A bias or per-channel weight has shape (C,) for the C channels it applies to.",
        "bind a per-channel weight of shape (C,)",
    ),
    Rule(
        "weight.scale_dtype",
        _B,
        "The builder writes packed scales as f16 or f32 (bf16 is read, never written, because "
        "upstream's verifier rejects it).",
        "write scales as f16 or f32",
    ),
    Rule(
        "weight.unique",
        _B,
        "A module binds each weight symbol and storage key once (the artifact verifier also "
        "refuses a symbol declared twice).",
        "reuse the Value of the first weight() call to share a weight, or pick another name",
    ),
    Rule(
        "binary.channels",
        _B,
        "sparse.binary takes operands with equal channel counts.",
        "project one side with lattice.linear, or use sparse_cat to concatenate",
    ),
)

RULES: Mapping[str, Rule] = MappingProxyType({r.id: r for r in _ALL})
"""Every rule of the dialect by ID, in declaration order (the C++ RuleId order)."""

if len(RULES) != len(_ALL):  # pragma: no cover - a schema authoring error
    raise ValueError("duplicate rule ID")

DIALECT_RULES: tuple[Rule, ...] = tuple(r for r in _ALL if r.kind is RuleKind.generic)
"""Rules that apply to every op (evaluated from the generated schema tables)."""


INT32_MAX = 2**31 - 1
"""Largest int32: coordinates, and every coordinate quantity, are int32."""

_Triple = tuple[int, int, int]


def geometry_int32_problem(
    *,
    kernel_size: _Triple | None,
    stride: _Triple | None,
    padding: _Triple | None,
    dilation: _Triple | None,
    input_stride: _Triple | None,
    step: str,
) -> str | None:
    """What breaks ``geometry.int32`` for one op's attributes, or None.

    ``step`` is how the op's result stride follows (``"multiply"``,
    ``"divide"`` or ``"input"``, its StrideRule).  Per axis, the tap reach
    ``(K - 1) * d + p``, the cell ``s * K``, the output stride ``t * s`` of a
    strided op and the physical tap reach (the finer stride times the reach)
    must fit int32.  The native verifier evaluates the same quantities
    (LatticeVerifySchema.cpp, checkGeometry).
    """
    for axis, name in enumerate("xyz"):

        def over(what: str, value: int, axis_name: str = name) -> str:
            return f"{what} = {value} on axis {axis_name} exceeds {INT32_MAX}"

        reach: int | None = None
        if kernel_size is not None:
            d = dilation[axis] if dilation is not None else 1
            p = padding[axis] if padding is not None else 0
            reach = (kernel_size[axis] - 1) * d + p
            if reach > INT32_MAX:
                return over("(kernel_size - 1) x dilation + padding", reach)
            if stride is not None and stride[axis] * kernel_size[axis] > INT32_MAX:
                return over("stride x kernel_size", stride[axis] * kernel_size[axis])
        fine = input_stride[axis] if input_stride is not None else None
        if fine is not None and stride is not None:
            if step == "multiply" and fine * stride[axis] > INT32_MAX:
                return over("output stride (input stride x stride)", fine * stride[axis])
            if step == "divide" and fine % stride[axis] == 0:
                fine //= stride[axis]
        if fine is not None and reach is not None and fine * reach > INT32_MAX:
            return over(
                "physical tap reach (stride of the finer side x ((kernel_size - 1) x dilation "
                "+ padding))",
                fine * reach,
            )
    return None


def rule_message(rule_id: str, problem: str) -> str:
    """``rule(rule_id).message(problem)``: the diagnostic of a broken rule."""
    return rule(rule_id).message(problem)


def rule(rule_id: str) -> Rule:
    """The rule called ``rule_id``; KeyError names the known IDs when absent."""
    found = RULES.get(rule_id)
    if found is None:
        raise KeyError(f"unknown rule {rule_id!r}; the schema declares: " + ", ".join(RULES))
    return found


def use(rule_id: str, *params: str) -> RuleUse:
    """``rule(rule_id)`` applied with ``params`` (for op declarations)."""
    return RuleUse(rule(rule_id), tuple(params))


CONV_GEOMETRY_RULES: tuple[RuleUse, ...] = (
    use("geometry.int32"),
    use("weight.kernel_extent"),
    use("weight.in_channels"),
    use("weight.channel_shape"),
)
"""The rules every convolution with a conv3d-family weight obeys (one tuple for all of them)."""
