"""Result-type rules of the textual builder, one per schema op.

Each rule is bound to a schema op by name (checked at import) and returns the
result types in declaration order: strides follow the op's ``StrideRule``,
channel counts its ``ChannelRule``, element types the input's.  What the
generic, schema-driven argument checks cannot see (weight shapes against the
input's channels and the kernel size, strides along the chain) is checked
here; every failure names its rule ID from :mod:`lattice_contract.dialect.rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from lattice_contract.builder.text import (
    MISSING,
    Value,
    rule_error,
)
from lattice_contract.dialect import (
    FLOAT_DTYPES,
    PACKED_DTYPE_OF_BITS,
    SCHEMA,
    WEIGHT_DTYPES,
    ActivationKind,
    ChannelRule,
    GeluApprox,
    OpDef,
    StrideRule,
    Triple,
    WeightFamily,
    WeightLayout,
    forward_stride,
    geometry_int32_problem,
    layout_family,
    stride_divides,
    transposed_stride,
)
from lattice_contract.plan import ValueFacts, ValueType

# ---------------------------------------------------------------------------
# One builder call under validation.


@dataclass
class _Call:
    """The normalized arguments of one op call plus error helpers for rules."""

    op: OpDef
    operands: dict[str, Value | None]
    variadic: dict[str, tuple[Value, ...]]
    attrs: dict[str, Any]
    extras: dict[str, Any]

    def fail(self, rule_id: str, argument: str, problem: str) -> NoReturn:
        """Raise the BuilderError of rule ``rule_id``: the problem, the rule's fix, its tag."""
        raise rule_error(self.op, rule_id, argument, problem)

    def value(self, name: str) -> Value:
        found = self.operands[name]
        assert found is not None, name
        return found

    def sparse(self, name: str) -> tuple[Value, ValueType, Triple, int]:
        """A sparse operand with its type, stride and channel count."""
        found = self.value(name)
        vt = found.type
        assert vt.stride is not None and vt.channels is not None
        return found, vt, vt.stride, vt.channels


def _require_same_dtype(call: _Call, argument: str, got: str, want: str, other: str) -> None:
    if got != want:
        call.fail("dtype.same", argument, f"has element type {got} but {other} is {want}")


# ---------------------------------------------------------------------------
# Result-type rules.  Each is bound to a schema op by name (checked against the
# schema at import) and returns the result types in declaration order, after
# checking what the generic operand/attribute validation cannot.


@dataclass(frozen=True)
class _Rule:
    infer: Callable[[_Call], tuple[ValueType, ...]]
    extras: Mapping[str, Any]  # builder-side keyword -> default (MISSING: required)
    prepare: Callable[[dict[str, Any]], set[str]] | None = None


RESULT_TYPE_RULES: dict[str, _Rule] = {}


def _rule(
    *ops: str,
    extras: Mapping[str, Any] | None = None,
    prepare: Callable[[dict[str, Any]], set[str]] | None = None,
) -> Callable[[Callable[[_Call], tuple[ValueType, ...]]], Callable[[_Call], tuple[ValueType, ...]]]:
    def register(
        infer: Callable[[_Call], tuple[ValueType, ...]],
    ) -> Callable[[_Call], tuple[ValueType, ...]]:
        for name in ops:
            op = SCHEMA.op(name)  # KeyError if the schema lost the op
            for extra in extras or {}:
                if extra in {o.name for o in op.operands} | {a.name for a in op.attributes}:
                    raise TypeError(f"builder keyword {extra!r} shadows a schema name of {name}")
            RESULT_TYPE_RULES[op.name] = _Rule(infer, MappingProxyType(dict(extras or {})), prepare)
        return infer

    return register


def _sparse_type(dtype: str, stride: Triple, channels: int) -> ValueType:
    return ValueType("sparse", dtype, facts=ValueFacts(stride=stride, channels=channels))


def _features_type(rows: int | None, channels: int, dtype: str) -> ValueType:
    """Rank-2 features; ``rows`` None is dynamic (``-1`` in the type, MLIR's ``?``)."""
    return ValueType("tensor", dtype, shape=(-1 if rows is None else rows, channels))


def _static(dim: int) -> int | None:
    """A tensor dimension, None when dynamic."""
    return None if dim < 0 else dim


_COORDS_TYPE = ValueType("tensor", "i32", shape=(-1, 4))
_ACTIVE_TYPE = ValueType("tensor", "i32", shape=(1,))


def _layout_axes(layout: WeightLayout) -> str:
    return layout_family(layout).axes


@_rule("sparse.make")
def _sparse_make(call: _Call) -> tuple[ValueType, ...]:
    features = call.value("features").type
    assert features.shape is not None and features.shape[1] >= 0  # checked as features
    return (_sparse_type(features.dtype, call.attrs["stride"], features.shape[1]),)


@_rule("sparse.decompose")
def _sparse_decompose(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("input")
    return (_COORDS_TYPE, _features_type(None, channels, vt.dtype), _ACTIVE_TYPE)


@_rule("sparse.with_features")
def _sparse_with_features(call: _Call) -> tuple[ValueType, ...]:
    _, vt, stride, _ = call.sparse("input")
    features = call.value("features").type
    assert features.shape is not None and features.shape[1] >= 0  # checked as features
    _require_same_dtype(call, "features", features.dtype, vt.dtype, "'input'")
    return (_sparse_type(features.dtype, stride, features.shape[1]),)


def _same_stride(call: _Call, lhs: str, rhs: str) -> None:
    _, _, left, _ = call.sparse(lhs)
    _, _, right, _ = call.sparse(rhs)
    if left != right:
        call.fail("stride.same", rhs, f"has stride {right} but {lhs!r} has stride {left}")


@_rule("sparse.reindex")
def _sparse_reindex(call: _Call) -> tuple[ValueType, ...]:
    _same_stride(call, "input", "target")
    _, vt, _, channels = call.sparse("input")
    _, target, target_stride, _ = call.sparse("target")
    _require_same_dtype(call, "target", target.dtype, vt.dtype, "'input'")
    return (_sparse_type(vt.dtype, target_stride, channels),)


def _sparse_pair(call: _Call) -> tuple[ValueType, Triple, int, int]:
    """Common checks of two coordinate-aligned sparse operands ``lhs`` and ``rhs``."""
    _same_stride(call, "lhs", "rhs")
    _, left, stride, left_channels = call.sparse("lhs")
    _, right, _, right_channels = call.sparse("rhs")
    _require_same_dtype(call, "rhs", right.dtype, left.dtype, "'lhs'")
    return left, stride, left_channels, right_channels


@_rule("sparse.binary")
def _sparse_binary(call: _Call) -> tuple[ValueType, ...]:
    left, stride, left_channels, right_channels = _sparse_pair(call)
    if left_channels != right_channels:
        call.fail(
            "binary.channels", "rhs", f"has {right_channels} channels but 'lhs' has {left_channels}"
        )
    return (_sparse_type(left.dtype, stride, left_channels),)


@_rule("sparse.cat")
def _sparse_cat(call: _Call) -> tuple[ValueType, ...]:
    left, stride, left_channels, right_channels = _sparse_pair(call)
    return (_sparse_type(left.dtype, stride, left_channels + right_channels),)


def _weight_shape(vt: ValueType) -> tuple[int, ...]:
    assert vt.weight_shape is not None  # every builder weight knows its logical shape
    return vt.weight_shape


def _check_weight_dtype(call: _Call, name: str, want: str) -> ValueType:
    """Dense weights share the input's element type; packed ones dequantize to it."""
    vt = call.value(name).type
    if vt.packing is None:
        _require_same_dtype(call, name, vt.dtype, want, "the input")
    return vt


def _check_bias(call: _Call, out_channels: int, dtype: str) -> None:
    bias = call.operands.get("bias")
    if bias is None:
        return
    _check_weight_dtype(call, "bias", dtype)
    shape = _weight_shape(bias.type)
    if shape != (out_channels,):
        call.fail(
            "weight.channel_shape",
            "bias",
            f"has shape {shape} but the op produces {out_channels} channels "
            f"(bind shape ({out_channels},))",
        )


def _conv_weight(call: _Call, in_channels: int, dtype: str) -> int:
    """Check a conv weight against the input and kernel size; return C_out."""
    weight = _check_weight_dtype(call, "weight", dtype)
    assert weight.layout is not None
    shape = _weight_shape(weight)
    kernel = call.attrs["kernel_size"]
    axes = _layout_axes(weight.layout)
    taps = tuple(shape[axes.index(a)] for a in "xyz")
    if taps != kernel:
        call.fail(
            "weight.kernel_extent",
            "weight",
            f"has kernel extent {taps} (shape {shape}) but kernel_size is {kernel}",
        )
    weight_in = shape[axes.index("i")]
    if weight_in != in_channels:
        call.fail(
            "weight.in_channels",
            "weight",
            f"expects {weight_in} input channels (shape {shape}) but the input has {in_channels}",
        )
    return shape[axes.index("o")]


_STRIDE_STEPS: Mapping[StrideRule, Literal["multiply", "keep", "divide"]] = MappingProxyType(
    {StrideRule.multiply: "multiply", StrideRule.input: "keep", StrideRule.divide: "divide"}
)


def _conv_like(
    call: _Call,
    stride_rule: Literal["multiply", "keep", "divide"] | None = None,
    target: bool | None = None,
) -> tuple[ValueType, ...]:
    """Result type of a convolution-like op; the stride rule is the schema's by default.

    The output stride follows the op's schema ``StrideRule`` (the verifier
    reads the same declaration), checked against a ``target`` when one is
    given.
    """
    if stride_rule is None:
        stride_rule = _STRIDE_STEPS[call.op.stride]
    if target is None:
        target = call.operands.get("target") is not None
    _, vt, in_stride, in_channels = call.sparse("input")
    channels = (
        _conv_weight(call, in_channels, vt.dtype)
        if call.op.channels is ChannelRule.weight
        else in_channels
    )
    _check_bias(call, channels, vt.dtype)
    if stride_rule == "keep":
        out_stride = in_stride
    else:
        s = call.attrs["stride"]
        if stride_rule == "multiply":
            out_stride = forward_stride(in_stride, s)
        else:
            if not stride_divides(in_stride, s):
                call.fail(
                    "stride.divides", "stride", f"{s} does not divide the input stride {in_stride}"
                )
            out_stride = transposed_stride(in_stride, s, call.op.mlir_name)
    _check_target_and_geometry(call, in_stride, out_stride, target)
    return (_sparse_type(vt.dtype, out_stride, channels),)


def _check_target_and_geometry(
    call: _Call, in_stride: Triple, out_stride: Triple, target: bool
) -> None:
    """stride.target (when a target is given), then geometry.int32 (when the op declares it)."""
    if target:
        _, _, target_stride, _ = call.sparse("target")
        if target_stride != out_stride:
            call.fail(
                "stride.target",
                "target",
                f"has stride {target_stride} but input stride {in_stride} with stride "
                f"{call.attrs['stride']} gives {out_stride}",
            )
    if any(u.rule.id == "geometry.int32" for u in call.op.rules):
        problem = geometry_int32_problem(
            kernel_size=call.attrs.get("kernel_size"),
            stride=call.attrs.get("stride"),
            padding=call.attrs.get("padding"),
            dilation=call.attrs.get("dilation"),
            input_stride=in_stride,
            step=_STRIDE_STEPS[call.op.stride],
        )
        if problem is not None:
            call.fail("geometry.int32", "kernel_size", problem)


@_rule(
    "conv3d",
    "full_conv3d",
    "pool3d",
    "full_pool3d",
    "target_conv3d",
    "subm_conv3d",
    "conv_transpose3d",
    "target_conv_transpose3d",
    "generative_conv_transpose3d",
)
def _convolution(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call)


@_rule("global_pool")
def _global_pool(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("input")
    batch = call.attrs["batch_size"]
    return (_features_type(None if batch == -1 else batch, channels, vt.dtype),)


@_rule("voxelize")
def _voxelize(call: _Call) -> tuple[ValueType, ...]:
    features = call.value("features").type
    assert features.shape is not None and features.shape[1] >= 0  # checked as features
    return (_sparse_type(features.dtype, call.attrs["stride"], features.shape[1]),)


@_rule("devoxelize")
def _devoxelize(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("voxels")
    points = call.value("points").type
    assert points.shape is not None
    return (_features_type(_static(points.shape[0]), channels, vt.dtype),)


def _feature_input(call: _Call) -> tuple[ValueType, int | None, int]:
    vt = call.value("input").type
    assert vt.shape is not None and vt.shape[1] >= 0  # checked as features
    return vt, _static(vt.shape[0]), vt.shape[1]


@_rule("linear")
def _linear(call: _Call) -> tuple[ValueType, ...]:
    vt, rows, in_channels = _feature_input(call)
    weight = _check_weight_dtype(call, "weight", vt.dtype)
    assert weight.layout is not None
    shape = _weight_shape(weight)
    axes = _layout_axes(weight.layout)
    if shape[axes.index("i")] != in_channels:
        call.fail(
            "weight.in_channels",
            "weight",
            f"has shape {shape} (C_out, C_in) but the input has {in_channels} channels",
        )
    out_channels = shape[axes.index("o")]
    _check_bias(call, out_channels, vt.dtype)
    return (_features_type(rows, out_channels, vt.dtype),)


@_rule("activation")
def _activation(call: _Call) -> tuple[ValueType, ...]:
    vt, _, _ = _feature_input(call)
    kind = call.attrs["kind"]
    approximate = call.attrs["approximate"]
    if kind is not ActivationKind.gelu and approximate is not GeluApprox.none:
        call.fail(
            "activation.approximate",
            "approximate",
            f"is {approximate.value!r} but only gelu has an approximation (kind is {kind.value!r})",
        )
    return (vt,)


@_rule("batch_norm", "layer_norm", "rms_norm")
def _norm(call: _Call) -> tuple[ValueType, ...]:
    vt, _, channels = _feature_input(call)
    for operand in call.op.operands[1:]:
        _check_weight_dtype(call, operand.name, vt.dtype)
        shape = _weight_shape(call.value(operand.name).type)
        if shape != (channels,):
            call.fail(
                "weight.channel_shape",
                operand.name,
                f"has shape {shape} but the input has {channels} channels "
                f"(bind shape ({channels},))",
            )
    return (vt,)


@_rule("softmax")
def _softmax(call: _Call) -> tuple[ValueType, ...]:
    return (_feature_input(call)[0],)


@_rule("cast", extras={"dtype": MISSING})
def _cast(call: _Call) -> tuple[ValueType, ...]:
    vt = call.value("input").type
    target = call.extras["dtype"]
    if vt.dtype not in FLOAT_DTYPES:
        call.fail(
            "cast.float",
            "input",
            f"has element type {vt.dtype}, not a float type ({', '.join(FLOAT_DTYPES)})",
        )
    if target not in FLOAT_DTYPES:
        call.fail(
            "cast.float",
            "dtype",
            f"is {target!r}, not a float element type ({', '.join(FLOAT_DTYPES)})",
        )
    if target == vt.dtype:
        call.fail("cast.float", "dtype", f"equals the input's element type {target}")
    return (ValueType("tensor", target, shape=vt.shape),)


@_rule("call")
def _call(call: _Call) -> tuple[ValueType, ...]:
    callee = call.attrs["callee"]
    primitive = SCHEMA.primitives.get(callee)
    if primitive is None:
        call.fail(
            "call.registered",
            "callee",
            f"names {callee!r}, which is not a registered primitive (registered: "
            + ", ".join(sorted(SCHEMA.primitives))
            + ")",
        )
    inputs = call.variadic[call.op.operands[0].name]
    expected = ", ".join(
        f"{d} rank {r}" for d, r in zip(primitive.inputs, primitive.input_ranks, strict=True)
    )
    if len(inputs) != len(primitive.inputs):
        call.fail(
            "call.signature",
            "inputs",
            f"has {len(inputs)} values but {callee} takes {len(primitive.inputs)} ({expected})",
        )
    for index, (value, dtype, rank) in enumerate(
        zip(inputs, primitive.inputs, primitive.input_ranks, strict=True)
    ):
        if value.type.dtype != dtype or value.type.rank != rank:
            call.fail(
                "call.signature",
                "inputs",
                f"item {index} is {value.type_text} but {callee} expects {dtype} of rank {rank} "
                f"({expected})",
            )
    return (ValueType("tensor", primitive.output, shape=(-1,) * primitive.output_rank),)


BUILDER_SCALE_DTYPES: tuple[str, ...] = ("f16", "f32")
"""Scale dtypes the builder writes (every reader, upstream's too, accepts them)."""


def _prepare_weight(kwargs: dict[str, Any]) -> set[str]:
    """The symbol defaults to the storage key (quoted when it is not a bare identifier)."""
    if kwargs.get("sym_name") is None and "storage_key" in kwargs:
        kwargs["sym_name"] = kwargs["storage_key"]
        return {"sym_name"}
    return set()


@_rule(
    "weight",
    extras={"dtype": None, "shape": MISSING, "family": None},
    prepare=_prepare_weight,
)
def _weight(call: _Call) -> tuple[ValueType, ...]:
    layout: WeightLayout = call.attrs["layout"]
    packing: Mapping[str, object] | None = call.attrs.get("packing")
    derived = layout_family(layout)
    family = call.extras["family"]
    if family is None:
        family = derived
    elif not isinstance(family, WeightFamily):
        try:
            family = WeightFamily(family)
        except ValueError:
            call.fail(
                "weight.layout",
                "family",
                f"is {family!r}, not one of " + ", ".join(f.value for f in WeightFamily),
            )
    if family is not derived:
        call.fail(
            "weight.layout",
            "family",
            f"is {family.value} but layout {layout.value} belongs to family {derived.value}",
        )
    dtype = call.extras["dtype"]
    if packing is not None:
        if not family.packable:
            call.fail("weight.packable", "packing", f"is given for a {family.value} weight")
        if packing["scale_dtype"] not in BUILDER_SCALE_DTYPES:
            call.fail("weight.scale_dtype", "packing", f"has scale_dtype {packing['scale_dtype']}")
        packed = PACKED_DTYPE_OF_BITS[str(packing["bits"])]
        if dtype is None:
            dtype = packed
        elif dtype != packed and dtype not in FLOAT_DTYPES:
            call.fail(
                "weight.packing_bits",
                "dtype",
                f"is {dtype!r} but packing bits {packing['bits']} store {packed}",
            )
    elif dtype is None:
        call.fail("type.params", "dtype", f"is missing (pass one of {', '.join(FLOAT_DTYPES)})")
    elif dtype not in WEIGHT_DTYPES:
        call.fail("type.params", "dtype", f"is {dtype!r}, not one of {', '.join(FLOAT_DTYPES)}")
    elif dtype not in FLOAT_DTYPES:
        call.fail(
            "weight.packed_dtype", "dtype", f"is {dtype!r}, a packed type, but no packing is given"
        )
    axes = _layout_axes(layout)
    raw_shape = call.extras["shape"]
    if isinstance(raw_shape, int) and not isinstance(raw_shape, bool):
        raw_shape = (raw_shape,)
    if (
        not isinstance(raw_shape, Sequence)
        or len(raw_shape) != len(axes)
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in raw_shape)
    ):
        call.fail(
            "weight.shape",
            "shape",
            f"is {raw_shape!r}, not {len(axes)} positive ints ({', '.join(axes)}) for layout "
            f"{layout.value}",
        )
    shape = tuple(int(d) for d in raw_shape)
    facts = ValueFacts(layout=layout, weight_shape=shape, packing=packing)
    return (ValueType("weight", dtype, family=family.value, facts=facts),)


# ---------------------------------------------------------------------------
# The weight-normalised convolutions (which always write accumulation =
# "canonical_f32", as upstream's producer does, although the dialect accepts
# its absence), upsampling, lookup and elementwise ops.


def _write_accumulation(kwargs: dict[str, Any]) -> set[str]:
    if kwargs.get("accumulation") is None:
        kwargs["accumulation"] = "canonical_f32"
    return set()


@_rule(
    "normalized_subm_conv3d",
    "normalized_conv_transpose3d",
    "target_normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    prepare=_write_accumulation,
)
def _normalized(call: _Call) -> tuple[ValueType, ...]:
    """Result stride by the op's schema stride rule (checked against a target when given)."""
    return _conv_like(call)


@_rule("pool_transpose3d", "trilinear_upsample3d")
def _upsample(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call)


@_rule("embedding_lookup")
def _embedding_lookup(call: _Call) -> tuple[ValueType, ...]:
    indices = call.value("indices").type
    table = call.value("weight").type
    if table.packing is not None:
        call.fail("weight.packable", "weight", "is packed")
    shape = _weight_shape(table)
    rows = _static(indices.shape[0]) if indices.shape else None
    return (_features_type(rows, shape[-1], table.dtype),)


@_rule("elementwise")
def _elementwise(call: _Call) -> tuple[ValueType, ...]:
    vt, _, _ = _feature_input(call)
    if vt.dtype != "f32":
        call.fail("elementwise.f32", "input", f"has element type {vt.dtype}")
    return (vt,)


@_rule("sparse.crop")
def _sparse_crop(call: _Call) -> tuple[ValueType, ...]:
    """Same stride, channels and dtype; the box must be non-empty and on the stride's lattice."""
    _, vt, stride, channels = call.sparse("input")
    lower, upper = call.attrs["lower"], call.attrs["upper"]
    if any(lo >= hi for lo, hi in zip(lower, upper, strict=True)):
        call.fail("crop.box", "upper", f"= {tuple(upper)} is not above lower = {tuple(lower)}")
    for name, box in (("lower", lower), ("upper", upper)):
        if any(v % t for v, t in zip(box, stride, strict=True)):
            call.fail("crop.stride", name, f"= {tuple(box)} is not a multiple of stride {stride}")
    return (_sparse_type(vt.dtype, stride, channels),)


def dense_shape(layout: str, batch: int, channels: int, spatial: Triple) -> tuple[int, ...]:
    """The result shape of ``sparse.to_dense``: ``spatial`` is (X, Y, Z), ordered by layout."""
    x, y, z = spatial
    return {
        "b_c_z_y_x": (batch, channels, z, y, x),
        "b_z_y_x_c": (batch, z, y, x, channels),
        "b_c_x_y_z": (batch, channels, x, y, z),
        "b_x_y_z_c": (batch, x, y, z, channels),
        "b_cz_y_x": (batch, channels * z, y, x),
    }[layout]


@_rule("sparse.to_dense")
def _sparse_to_dense(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("input")
    shape = dense_shape(
        call.attrs["layout"], call.attrs["batch_size"], channels, call.attrs["spatial_shape"]
    )
    return (ValueType("tensor", vt.dtype, shape=shape),)
