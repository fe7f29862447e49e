"""Textual MLIR builder for lattice artifacts, generated from the dialect schema.

Producers (the torch exporter, tests, examples) describe a graph by calling one
builder method per dialect op; the builder checks every argument against the
schema while the graph is being built, infers each result's type, and finally
prints the module exactly as MLIR itself prints it.  Nothing outside
:mod:`lattice_contract.schema` lists op, operand or attribute names: the
methods (``conv3d``, ``sparse_make``, ``sparse_binary``...) and their keyword
arguments are created from the :class:`~lattice_contract.schema.OpDef`
records when this module is imported.  What the schema cannot say -- how a
result's type follows from the operands (strides multiply or divide, channel
counts come from weight shapes) -- lives in the result-type rules below, each
bound to a schema op by name and checked against it.

Typical use::

    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=16, dtype="f16", stride=1)
    w = b.weight(storage_key="stem.weight", layout="conv3d_o_xyz_i",
                 dtype="f16", shape=(32, 3, 3, 3, 16))
    y = b.conv3d(input=x, weight=w, kernel_size=3, stride=2, padding=1)
    b.add_output("y", y)
    text = b.build()

Errors are :class:`BuilderError` (a ``ValueError``) naming the op, the
argument and the fix, raised at the call that introduced the problem, so an
exporter fails at the layer that caused it rather than in the native verifier.
"""

from __future__ import annotations

import difflib
import inspect
import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from lattice_contract.constants import (
    CURRENT_IR_VERSION,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
    WEIGHT_FILE,
)
from lattice_contract.digest import SCHEMA_DIGEST
from lattice_contract.kernel import Triple, as_triple
from lattice_contract.schema import (
    DIALECT,
    FLOAT_DTYPES,
    INT_DTYPES,
    PACKED_DTYPE_OF_BITS,
    PACKING_FIELDS,
    PACKING_GROUP_SIZES,
    SCHEMA,
    TYPES,
    WEIGHT_DTYPES,
    ActivationKind,
    AttrKind,
    AttrSpec,
    GeluApprox,
    OpDef,
    PackingBits,
    SchemaEnum,
    TypeConstraint,
    TypeDef,
    TypeKind,
    WeightFamily,
    WeightLayout,
)

__all__ = [
    "BuilderError",
    "BuiltOp",
    "MLIRModuleBuilder",
    "Value",
    "ValueType",
    "mlir_f32",
    "mlir_string",
    "mlir_symbol",
    "tensor_type",
]


class BuilderError(ValueError):
    """A builder call that would produce an invalid lattice module.

    The message names the op (or ABI call), the offending argument, what is
    wrong with it and how to fix it.
    """


# ---------------------------------------------------------------------------
# MLIR spellings.  These mirror MLIR's own printer so that builder output is a
# fixed point of parsing and printing with the native dialect.


def _apfloat_digits(
    negative: bool,
    exp: int,
    significand: int,
    semantics_precision: int,
    format_precision: int,
    max_padding: int,
    truncate_zero: bool,
) -> str:
    """Port of LLVM's ``APFloat::toString`` for a finite non-zero value.

    ``significand * 2**exp`` is the magnitude.  The digit selection (including
    LLVM's truncate-then-round-half-up quirk) must match bit for bit, because
    MLIR prints float attributes with it and the builder's output has to equal
    MLIR's.
    """
    if format_precision == 0:
        format_precision = 2 + semantics_precision * 59 // 196
    trailing = (significand & -significand).bit_length() - 1
    exp += trailing
    significand >>= trailing
    if exp > 0:
        significand <<= exp
        exp = 0
    elif exp < 0:
        significand *= 5 ** (-exp)  # N * 2^-e == N * 5^e * 10^-e
    bits_required = (format_precision * 196 + 58) // 59
    if significand.bit_length() > bits_required:
        removable = (significand.bit_length() - bits_required) * 59 // 196
        if removable:
            exp += removable
            significand //= 10**removable
    digits = str(significand)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    count = len(digits)
    if count > format_precision:
        dropped = count - format_precision
        kept = digits[:format_precision]
        if digits[format_precision] < "5":
            kept_stripped = kept.rstrip("0")
            exp += dropped + len(kept) - len(kept_stripped)
            digits = kept_stripped
        else:
            i = len(kept) - 1
            while i >= 0 and kept[i] == "9":
                i -= 1
            if i < 0:
                exp += count
                digits = "1"
            else:
                exp += dropped + (len(kept) - 1 - i)
                digits = kept[:i] + chr(ord(kept[i]) + 1)
    count = len(digits)
    if max_padding == 0:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or count + exp > format_precision
    else:
        msd = exp + count - 1
        scientific = msd < 0 and -msd > max_padding
    sign = "-" if negative else ""
    if scientific:
        exponent = exp + count - 1
        text = digits[0] + "."
        text += "0" if count == 1 and truncate_zero else digits[1:]
        if not truncate_zero and format_precision > count - 1:
            text += "0" * (format_precision - count + 1)
        exp_digits = str(abs(exponent))
        if not truncate_zero and len(exp_digits) < 2:
            exp_digits = "0" + exp_digits
        marker = "E" if truncate_zero else "e"
        return f"{sign}{text}{marker}{'+' if exponent >= 0 else '-'}{exp_digits}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + count
    if whole > 0:
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    return f"{sign}0.{'0' * -whole}{digits}"


def _f32_bits(value: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def _f32_round(value: float) -> float:
    """Round a Python float to the nearest f32, as MLIR does when it parses one."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _f64_bits(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


# (bit pattern, exponent bits, mantissa bits, hex digits) of the two IEEE
# formats attributes use.
_FLOAT_FORMATS: Mapping[int, tuple[Callable[[float], int], int, int, int]] = MappingProxyType(
    {32: (_f32_bits, 8, 23, 8), 64: (_f64_bits, 11, 52, 16)}
)


def _mlir_float(value: float, width: int) -> str:
    """MLIR's ``printFloatValue`` for an IEEE float of ``width`` bits."""
    to_bits, exp_bits, mant_bits, hex_digits = _FLOAT_FORMATS[width]
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    try:
        bits = to_bits(value)
    except OverflowError:
        raise ValueError(f"{value!r} is outside the f{width} range") from None
    negative = bool(bits >> (width - 1))
    biased = (bits >> mant_bits) & ((1 << exp_bits) - 1)
    mantissa = bits & ((1 << mant_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    if biased == (1 << exp_bits) - 1:
        raise ValueError(f"{value!r} rounds to infinity in f{width}")
    if biased == 0 and mantissa == 0:
        return ("-" if negative else "") + "0.000000e+00"
    if biased == 0:
        exponent, significand = 1 - bias, mantissa
    else:
        exponent, significand = biased - bias, mantissa | (1 << mant_bits)
    exp = exponent - mant_bits
    text = _apfloat_digits(negative, exp, significand, mant_bits + 1, 6, 0, False)
    if to_bits(float(text)) == bits:
        return text
    text = _apfloat_digits(negative, exp, significand, mant_bits + 1, 0, 3, True)
    if "." in text:
        return text
    return f"0x{bits:0{hex_digits}X}" if width == 64 else f"0x{bits:X}"


def mlir_f32(value: float) -> str:
    """Spell an f32 attribute value as MLIR prints it (without the ``: f32`` suffix).

    MLIR prints ``%e``-style with six digits when that reads back exactly
    (``1.000000e-02``), otherwise the shortest round-tripping decimal, and
    falls back to the hexadecimal bit pattern.  Raises ValueError on values
    that are not finite in f32.
    """
    return _mlir_float(value, 32)


def mlir_f64(value: float) -> str:
    """Spell an f64 element as MLIR prints it (in ``array<f64: ...>``); see :func:`mlir_f32`."""
    return _mlir_float(value, 64)


def mlir_string(text: str) -> str:
    """Spell a string literal as MLIR prints it (``llvm::printEscapedString``)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F and char != '"':
            out.append(char)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")


def mlir_symbol(name: str) -> str:
    """Spell a symbol reference: ``@name`` when it is a bare identifier, else ``@"..."``."""
    return "@" + (name if _BARE_ID.match(name) else mlir_string(name))


def _triple_text(value: Triple) -> str:
    return "array<i64: " + ", ".join(str(v) for v in value) + ">"


def _f64_triple_text(value: tuple[float, float, float]) -> str:
    return "array<f64: " + ", ".join(mlir_f64(v) for v in value) + ">"


def _enum_text(member: SchemaEnum) -> str:
    return f"#{DIALECT}.{type(member).__mnemonic__}<{member.value}>"


SPELLED_WHEN_ABSENT: Mapping[str, str] = MappingProxyType({"packing": f"#{DIALECT}.packing<dense>"})
"""Optional attributes the builder always writes (as upstream does), with the
text of their absent meaning; the plan shows them absent."""


def _packing_text(packing: Mapping[str, object]) -> str:
    parts = []
    for index, (name, _enum) in enumerate(PACKING_FIELDS):
        value = packing[name]
        parts.append(f"{value}" if index == 0 else f"{name} = {value}")
    return f"#{DIALECT}.packing<" + ", ".join(parts) + ">"


# ---------------------------------------------------------------------------
# Types and values.

ValueKind = Literal["sparse", "weight", "tensor"]
Shape = tuple[int | None, ...]
_TENSOR_DTYPES: tuple[str, ...] = FLOAT_DTYPES + INT_DTYPES
_TENSOR_TEXT = re.compile(r"tensor<((?:(?:\?|[0-9]+)x)*)([a-z0-9]+)>\Z")


def _type_def(mnemonic: str) -> TypeDef:
    for item in TYPES:
        if item.mnemonic == mnemonic:
            return item
    raise KeyError(f"the schema defines no type !{DIALECT}.{mnemonic}")  # pragma: no cover


def _dialect_type_text(mnemonic: str, values: Mapping[str, str]) -> str:
    """Spell ``!lattice.<mnemonic><...>`` from the schema's type parameters.

    Parameters with a single permitted value (``rank = 3``, the one coordinate
    and feature layout) are filled from the schema; the others come from
    ``values``.
    """
    parts = []
    for param in _type_def(mnemonic).params:
        if param.name in values:
            value = values[param.name]
        elif len(param.allowed) == 1:
            value = param.allowed[0]
        elif param.enum is not None and len(param.enum) == 1:
            value = next(iter(param.enum)).value
        else:  # pragma: no cover - a builder bug, not a user error
            raise KeyError(f"type !{DIALECT}.{mnemonic} needs parameter {param.name!r}")
        parts.append(f"{param.name} = {value}" if param.keyword else value)
    return f"!{DIALECT}.{mnemonic}<" + ", ".join(parts) + ">"


@dataclass(frozen=True)
class ValueType:
    """What the builder knows statically about a value.

    ``kind`` is ``sparse``, ``weight`` or ``tensor``.  Sparse values carry
    their static ``stride`` and ``channels`` (not part of the MLIR type, but
    the builder needs them to check target strides and infer feature widths);
    weights carry their ``family``, ``layout``, logical ``shape`` and optional
    ``packing``; tensors carry ``shape`` with ``None`` for dynamic dimensions.
    """

    kind: ValueKind
    dtype: str
    shape: Shape | None = None
    family: WeightFamily | None = None
    layout: WeightLayout | None = None
    packing: Mapping[str, object] | None = field(default=None, hash=False)
    stride: Triple | None = None
    channels: int | None = None

    @property
    def text(self) -> str:
        """The type as MLIR prints it."""
        if self.kind == "sparse":
            return _dialect_type_text("sparse_tensor", {"dtype": self.dtype})
        if self.kind == "weight":
            assert self.family is not None
            return _dialect_type_text("weight", {"family": self.family.value, "dtype": self.dtype})
        assert self.shape is not None
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"

    @property
    def rank(self) -> int | None:
        """Tensor rank; None for sparse values and weights."""
        return None if self.kind != "tensor" or self.shape is None else len(self.shape)

    def describe(self) -> str:
        """The type text plus builder-side facts, for error messages."""
        if self.kind == "sparse":
            return f"{self.text} (stride {self.stride}, {self.channels} channels)"
        if self.kind == "weight":
            return f"{self.text} (shape {self.shape})"
        return self.text


def tensor_type(shape: Sequence[int | None], dtype: str) -> ValueType:
    """A builtin ranked tensor type; ``None`` (or -1) marks a dynamic dimension."""
    if dtype not in _TENSOR_DTYPES:
        raise BuilderError(
            f"tensor element type {dtype!r} is not supported; "
            f"use one of {', '.join(_TENSOR_DTYPES)}"
        )
    dims: list[int | None] = []
    for d in shape:
        if d is None or d == -1:
            dims.append(None)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            dims.append(d)
        else:
            raise BuilderError(
                f"tensor dimension {d!r} is invalid; use a non-negative int or None (dynamic)"
            )
    return ValueType("tensor", dtype, shape=tuple(dims))


def _parse_tensor_type(text: str, where: str) -> ValueType:
    match = _TENSOR_TEXT.match(text.strip())
    if match is None or match.group(2) not in _TENSOR_DTYPES:
        raise BuilderError(
            f"{where}: type {text!r} is not a ranked builtin tensor type; spell it like "
            f"'tensor<?x3xf32>' with element type one of {', '.join(_TENSOR_DTYPES)}"
        )
    dims = [None if d == "?" else int(d) for d in match.group(1).split("x")[:-1]]
    return tensor_type(dims, match.group(2))


@dataclass(frozen=True, eq=False)
class Value:
    """A typed SSA value owned by one builder.

    ``name`` is the SSA name as printed (``%arg0``, ``%3``, ``%features``); ``type``
    the structured type; ``type_text`` its MLIR spelling.  Values compare by
    identity and may only be used with the builder that created them.
    """

    name: str
    type: ValueType
    _owner: object = field(repr=False)

    @property
    def type_text(self) -> str:
        """The value's MLIR type."""
        return self.type.text

    @property
    def kind(self) -> ValueKind:
        """``sparse``, ``weight`` or ``tensor``."""
        return self.type.kind

    @property
    def dtype(self) -> str:
        """Element type (for weights, the storage type, e.g. ``i4``)."""
        return self.type.dtype


# ---------------------------------------------------------------------------
# One builder call under validation.

_MISSING: Any = object()


@dataclass
class _Call:
    """The normalized arguments of one op call plus error helpers for rules."""

    op: OpDef
    operands: dict[str, Value | None]
    variadic: dict[str, tuple[Value, ...]]
    attrs: dict[str, Any]
    extras: dict[str, Any]

    def fail(self, argument: str, problem: str, fix: str) -> NoReturn:
        raise BuilderError(f"{self.op.mlir_name}: argument {argument!r} {problem}; {fix}")

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
        call.fail(
            argument,
            f"has element type {got} but {other} is {want}",
            "only cast and registered primitives change element types; insert a lattice.cast "
            "(or bind the weight in the matching dtype)",
        )


# ---------------------------------------------------------------------------
# Result-type rules.  Each is bound to a schema op by name (checked against the
# schema at import) and returns the result types in declaration order, after
# checking what the generic operand/attribute validation cannot.


@dataclass(frozen=True)
class _Rule:
    infer: Callable[[_Call], tuple[ValueType, ...]]
    extras: Mapping[str, Any]  # builder-side keyword -> default (_MISSING: required)
    prepare: Callable[[dict[str, Any]], set[str]] | None = None


_RULES: dict[str, _Rule] = {}


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
            _RULES[op.name] = _Rule(infer, MappingProxyType(dict(extras or {})), prepare)
        return infer

    return register


def _sparse_type(dtype: str, stride: Triple, channels: int) -> ValueType:
    return ValueType("sparse", dtype, stride=stride, channels=channels)


def _features_type(rows: int | None, channels: int | None, dtype: str) -> ValueType:
    return ValueType("tensor", dtype, shape=(rows, channels))


_COORDS_TYPE = ValueType("tensor", "i32", shape=(None, 4))
_ACTIVE_TYPE = ValueType("tensor", "i32", shape=(1,))


def _layout_family(layout: WeightLayout) -> WeightFamily:
    for family in WeightFamily:
        if layout.value.startswith(family.value + "_"):
            return family
    raise AssertionError(f"layout {layout.value} names no weight family")  # pragma: no cover


def _layout_axes(layout: WeightLayout) -> str:
    return layout.value[len(_layout_family(layout).value) + 1 :].replace("_", "")


@_rule("sparse.make")
def _sparse_make(call: _Call) -> tuple[ValueType, ...]:
    features = call.value("features").type
    assert features.shape is not None
    channels = features.shape[1]
    assert channels is not None
    return (_sparse_type(features.dtype, call.attrs["stride"], channels),)


@_rule("sparse.decompose")
def _sparse_decompose(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("input")
    return (_COORDS_TYPE, _features_type(None, channels, vt.dtype), _ACTIVE_TYPE)


@_rule("sparse.with_features")
def _sparse_with_features(call: _Call) -> tuple[ValueType, ...]:
    _, vt, stride, _ = call.sparse("input")
    features = call.value("features").type
    assert features.shape is not None and features.shape[1] is not None
    _require_same_dtype(call, "features", features.dtype, vt.dtype, "'input'")
    return (_sparse_type(features.dtype, stride, features.shape[1]),)


def _same_stride(call: _Call, lhs: str, rhs: str) -> None:
    _, _, left, _ = call.sparse(lhs)
    _, _, right, _ = call.sparse(rhs)
    if left != right:
        call.fail(
            rhs,
            f"has stride {right} but {lhs!r} has stride {left}",
            "coordinate-aligned sparse ops need operands at the same stride; "
            "resample one side first (conv3d / conv_transpose3d)",
        )


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
            "rhs",
            f"has {right_channels} channels but 'lhs' has {left_channels}",
            "elementwise sparse ops need equal channel counts; project one side "
            "with lattice.linear or use sparse_cat to concatenate",
        )
    return (_sparse_type(left.dtype, stride, left_channels),)


@_rule("sparse.cat")
def _sparse_cat(call: _Call) -> tuple[ValueType, ...]:
    left, stride, left_channels, right_channels = _sparse_pair(call)
    return (_sparse_type(left.dtype, stride, left_channels + right_channels),)


def _weight_shape(vt: ValueType) -> tuple[int, ...]:
    assert vt.shape is not None
    return tuple(d for d in vt.shape if d is not None)


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
            "bias",
            f"has shape {shape} but the op produces {out_channels} channels",
            f"bind a bias of shape ({out_channels},)",
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
            "weight",
            f"has kernel extent {taps} (shape {shape}) but kernel_size is {kernel}",
            "make kernel_size match the weight's (Kx, Ky, Kz) axes",
        )
    weight_in = shape[axes.index("i")]
    if weight_in != in_channels:
        call.fail(
            "weight",
            f"expects {weight_in} input channels (shape {shape}) but the input has {in_channels}",
            "bind a weight of layout (C_out, Kx, Ky, Kz, C_in) with C_in equal to the "
            "input's channel count",
        )
    return shape[axes.index("o")]


def _conv_like(
    call: _Call, stride_rule: Literal["multiply", "keep", "divide"], target: bool
) -> tuple[ValueType, ...]:
    _, vt, in_stride, in_channels = call.sparse("input")
    channels = (
        _conv_weight(call, in_channels, vt.dtype) if "weight" in call.operands else in_channels
    )
    _check_bias(call, channels, vt.dtype)
    if stride_rule == "keep":
        out_stride = in_stride
    else:
        s = call.attrs["stride"]
        if stride_rule == "multiply":
            out_stride = (in_stride[0] * s[0], in_stride[1] * s[1], in_stride[2] * s[2])
        else:
            if any(t % k for t, k in zip(in_stride, s, strict=True)):
                call.fail(
                    "stride",
                    f"{s} does not divide the input stride {in_stride}",
                    "a transposed conv divides the input stride by its stride; "
                    "pick a stride that divides it exactly",
                )
            out_stride = (in_stride[0] // s[0], in_stride[1] // s[1], in_stride[2] // s[2])
    if target:
        _, _, target_stride, _ = call.sparse("target")
        if target_stride != out_stride:
            call.fail(
                "target",
                f"has stride {target_stride} but input stride {in_stride} with stride "
                f"{call.attrs['stride']} gives {out_stride}",
                "pass a target at the output stride (or change stride)",
            )
    return (_sparse_type(vt.dtype, out_stride, channels),)


@_rule("conv3d", "full_conv3d", "pool3d", "full_pool3d")
def _conv3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "multiply", target=False)


@_rule("target_conv3d")
def _target_conv3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "multiply", target=True)


@_rule("subm_conv3d")
def _subm_conv3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "keep", target=False)


@_rule("conv_transpose3d")
def _conv_transpose3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=False)


@_rule("target_conv_transpose3d")
def _target_conv_transpose3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=True)


@_rule("generative_conv_transpose3d")
def _generative_conv_transpose3d(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=False)


@_rule("global_pool")
def _global_pool(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("input")
    batch = call.attrs["batch_size"]
    return (_features_type(None if batch == -1 else batch, channels, vt.dtype),)


@_rule("voxelize")
def _voxelize(call: _Call) -> tuple[ValueType, ...]:
    features = call.value("features").type
    assert features.shape is not None and features.shape[1] is not None
    return (_sparse_type(features.dtype, call.attrs["stride"], features.shape[1]),)


@_rule("devoxelize")
def _devoxelize(call: _Call) -> tuple[ValueType, ...]:
    _, vt, _, channels = call.sparse("voxels")
    points = call.value("points").type
    assert points.shape is not None
    return (_features_type(points.shape[0], channels, vt.dtype),)


def _feature_input(call: _Call) -> tuple[ValueType, int | None, int]:
    vt = call.value("input").type
    assert vt.shape is not None and vt.shape[1] is not None
    return vt, vt.shape[0], vt.shape[1]


@_rule("linear")
def _linear(call: _Call) -> tuple[ValueType, ...]:
    vt, rows, in_channels = _feature_input(call)
    weight = _check_weight_dtype(call, "weight", vt.dtype)
    assert weight.layout is not None
    shape = _weight_shape(weight)
    axes = _layout_axes(weight.layout)
    if shape[axes.index("i")] != in_channels:
        call.fail(
            "weight",
            f"has shape {shape} (C_out, C_in) but the input has {in_channels} channels",
            f"bind a linear weight of shape (C_out, {in_channels})",
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
            "approximate",
            f"is {approximate.value!r} but only gelu has an approximation (kind is {kind.value!r})",
            "omit approximate (it defaults to 'none')",
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
                operand.name,
                f"has shape {shape} but the input has {channels} channels",
                f"bind a per-channel weight of shape ({channels},)",
            )
    return (vt,)


@_rule("softmax")
def _softmax(call: _Call) -> tuple[ValueType, ...]:
    return (_feature_input(call)[0],)


@_rule("cast", extras={"dtype": _MISSING})
def _cast(call: _Call) -> tuple[ValueType, ...]:
    vt = call.value("input").type
    target = call.extras["dtype"]
    if vt.dtype not in FLOAT_DTYPES:
        call.fail(
            "input",
            f"has element type {vt.dtype}",
            f"cast converts float tensors ({', '.join(FLOAT_DTYPES)})",
        )
    if target not in FLOAT_DTYPES:
        call.fail(
            "dtype",
            f"is {target!r}, not a float element type",
            f"use one of {', '.join(FLOAT_DTYPES)}",
        )
    if target == vt.dtype:
        call.fail("dtype", f"equals the input's element type {target}", "drop the no-op cast")
    return (ValueType("tensor", target, shape=vt.shape),)


@_rule("call")
def _call(call: _Call) -> tuple[ValueType, ...]:
    callee = call.attrs["callee"]
    primitive = SCHEMA.primitives.get(callee)
    if primitive is None:
        call.fail(
            "callee",
            f"names {callee!r}, which is not a registered primitive",
            "use one of: " + ", ".join(sorted(SCHEMA.primitives)),
        )
    inputs = call.variadic[call.op.operands[0].name]
    expected = ", ".join(
        f"{d} rank {r}" for d, r in zip(primitive.inputs, primitive.input_ranks, strict=True)
    )
    if len(inputs) != len(primitive.inputs):
        call.fail(
            "inputs",
            f"has {len(inputs)} values but {callee} takes {len(primitive.inputs)}",
            f"pass exactly ({expected})",
        )
    for index, (value, dtype, rank) in enumerate(
        zip(inputs, primitive.inputs, primitive.input_ranks, strict=True)
    ):
        if value.type.dtype != dtype or value.type.rank != rank:
            call.fail(
                "inputs",
                f"item {index} is {value.type_text} but {callee} expects {dtype} of rank {rank}",
                f"pass ({expected}); insert a lattice.cast if only the element type differs",
            )
    return (ValueType("tensor", primitive.output, shape=(None,) * primitive.output_rank),)


BUILDER_SCALE_DTYPES: tuple[str, ...] = ("f16", "f32")
"""Scale dtypes the builder writes (every reader, upstream's too, accepts them)."""

_PACKABLE_FAMILIES = (WeightFamily.conv3d, WeightFamily.linear)
"""Families whose weights may be affine-packed (the big matrices; never bias or norm)."""


def _prepare_weight(kwargs: dict[str, Any]) -> set[str]:
    """The symbol defaults to the storage key (quoted when it is not a bare identifier)."""
    if kwargs.get("sym_name") is None and "storage_key" in kwargs:
        kwargs["sym_name"] = kwargs["storage_key"]
        return {"sym_name"}
    return set()


@_rule(
    "weight",
    extras={"dtype": None, "shape": _MISSING, "family": None},
    prepare=_prepare_weight,
)
def _weight(call: _Call) -> tuple[ValueType, ...]:
    layout: WeightLayout = call.attrs["layout"]
    packing: Mapping[str, object] | None = call.attrs.get("packing")
    derived = _layout_family(layout)
    family = call.extras["family"]
    if family is None:
        family = derived
    elif not isinstance(family, WeightFamily):
        try:
            family = WeightFamily(family)
        except ValueError:
            call.fail(
                "family",
                f"is {family!r}",
                "use one of " + ", ".join(f.value for f in WeightFamily),
            )
    if family is not derived:
        call.fail(
            "family",
            f"is {family.value} but layout {layout.value} belongs to family {derived.value}",
            f"omit family (the layout implies {derived.value}) or change the layout",
        )
    dtype = call.extras["dtype"]
    if packing is not None:
        if family not in _PACKABLE_FAMILIES:
            call.fail(
                "packing",
                f"is given for a {family.value} weight",
                "only "
                + " and ".join(f.value for f in _PACKABLE_FAMILIES)
                + " weights can be packed; store this one densely",
            )
        if packing["scale_dtype"] not in BUILDER_SCALE_DTYPES:
            call.fail(
                "packing",
                f"has scale_dtype {packing['scale_dtype']}",
                "write scales as " + " or ".join(BUILDER_SCALE_DTYPES) + " (Lattice reads bf16 "
                "scales, but upstream's verifier rejects them, so the builder never writes them)",
            )
        packed = PACKED_DTYPE_OF_BITS[str(packing["bits"])]
        if dtype is None:
            dtype = packed
        elif dtype != packed and dtype not in FLOAT_DTYPES:
            call.fail(
                "dtype",
                f"is {dtype!r} but packing bits {packing['bits']} store {packed}",
                f"omit dtype (the builder writes {packed!r}) or pass the float type the "
                "weight dequantizes to",
            )
    elif dtype is None:
        call.fail("dtype", "is missing", f"pass dtype= one of {', '.join(FLOAT_DTYPES)}")
    elif dtype not in WEIGHT_DTYPES:
        call.fail("dtype", f"is {dtype!r}", f"use one of {', '.join(FLOAT_DTYPES)}")
    elif dtype not in FLOAT_DTYPES:
        call.fail(
            "dtype",
            f"is {dtype!r}, a packed type, but no packing is given",
            "pass packing={'bits': ..., 'group_size': ..., 'scale_dtype': ...} or a float dtype",
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
            "shape",
            f"is {raw_shape!r}",
            f"pass the logical shape of layout {layout.value}: {len(axes)} positive ints "
            f"({', '.join(axes)})",
        )
    shape = tuple(int(d) for d in raw_shape)
    return (ValueType("weight", dtype, shape=shape, family=family, layout=layout, packing=packing),)


# Keyword defaults for attributes users expect to omit.  Each must name an
# attribute of some schema op and be a valid value for it (checked below).
ATTRIBUTE_DEFAULTS: Mapping[str, object] = MappingProxyType(
    {
        "stride": 1,
        "padding": 0,
        "dilation": 1,
        "approximate": "none",
        "alpha": 0.01,
        "beta": 1.0,
        "threshold": 20.0,
        # Optional in the dialect but always written, as upstream writes them.
        "coord_order": "batch_x_y_z",
        "fill": 0.0,
        "lhs_fill": 0.0,
        "rhs_fill": 0.0,
        "axis": -1,
        "origin": 0.0,
    }
)


def _attr_default(spec: AttrSpec, name: str) -> Any:
    """The default a user may omit, or _MISSING.

    Required string attributes whose schema allows exactly one value
    (``accumulation`` on convolutions) default to it; optional ones are left
    out (upstream spells pools and ``linear`` without ``accumulation``).
    """
    if name in ATTRIBUTE_DEFAULTS:
        return ATTRIBUTE_DEFAULTS[name]
    if not spec.required:
        return None
    if spec.kind is AttrKind.string and len(spec.allowed) == 1:
        return spec.allowed[0]
    return _MISSING


# ---------------------------------------------------------------------------
# Generic argument validation driven by the schema.


def _owner_error(op: OpDef, name: str) -> BuilderError:
    return BuilderError(
        f"{op.mlir_name}: argument {name!r} is a Value of another MLIRModuleBuilder; "
        "values can only be used in the builder that created them"
    )


def _check_constraint(op: OpDef, name: str, value: Value, constraint: TypeConstraint) -> None:
    vt = value.type
    kind = constraint.kind
    ok: bool
    if kind is TypeKind.sparse:
        ok = vt.kind == "sparse"
    elif kind is TypeKind.weight:
        ok = vt.kind == "weight" and vt.family in constraint.families
    elif vt.kind != "tensor" or vt.shape is None:
        ok = False
    elif kind is TypeKind.coords:
        ok = vt.dtype == "i32" and len(vt.shape) == 2 and vt.shape[1] == 4
    elif kind is TypeKind.active:
        ok = vt.dtype == "i32" and vt.shape == (1,)
    elif kind is TypeKind.features:
        ok = vt.dtype in FLOAT_DTYPES and len(vt.shape) == 2 and vt.shape[1] is not None
    elif kind is TypeKind.points:
        ok = vt.dtype == "f32" and len(vt.shape) == 2 and vt.shape[1] == 3
    elif kind is TypeKind.batch_index:
        ok = vt.dtype == "i32" and len(vt.shape) == 1
    else:
        ok = vt.dtype in _TENSOR_DTYPES
    if ok:
        return
    if kind is TypeKind.weight:
        families = "|".join(f.value for f in constraint.families)
        fix = (
            f"bind a weight of family {families} (layout "
            + " or ".join(
                lay.value for lay in WeightLayout if _layout_family(lay) in constraint.families
            )
            + ")"
        )
    elif kind is TypeKind.features:
        fix = "pass a rank-2 float tensor with a static channel count, e.g. from sparse_decompose"
    elif kind is TypeKind.sparse:
        fix = "pass a sparse value (from add_sparse_input, sparse_make or a sparse op)"
    else:
        fix = f"pass a value of type {constraint.describe()}"
    raise BuilderError(
        f"{op.mlir_name}: argument {name!r} must be {constraint.describe()}, "
        f"got {vt.describe()}; {fix}"
    )


def _normalize_attr(op: OpDef, name: str, spec: AttrSpec, raw: object) -> Any:
    def fail(problem: str, fix: str) -> NoReturn:
        raise BuilderError(f"{op.mlir_name}: argument {name!r} {problem}; {fix}")

    kind = spec.kind
    if kind is AttrKind.triple:
        try:
            value = as_triple(raw, name)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            fail(f"is {raw!r}", "pass an int or a sequence of three ints")
        if spec.minimum is not None and min(value) < spec.minimum:
            fail(f"is {raw!r}", f"every component must be >= {spec.minimum}")
        return value
    if kind is AttrKind.f64_triple:
        items = (raw, raw, raw) if isinstance(raw, int | float) else raw
        if (
            isinstance(items, str | bytes)
            or not isinstance(items, Sequence)
            or len(items) != 3
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in items)
            or not all(math.isfinite(float(v)) for v in items)
        ):
            fail(f"is {raw!r}", "pass a finite number or a sequence of three finite numbers")
        floats = (float(items[0]), float(items[1]), float(items[2]))
        if spec.minimum is not None and any(
            v < spec.minimum or (spec.exclusive_minimum and v == spec.minimum) for v in floats
        ):
            bound = ">" if spec.exclusive_minimum else ">="
            fail(f"is {raw!r}", f"every component must be {bound} {spec.minimum}")
        return floats
    if kind is AttrKind.i64:
        if not isinstance(raw, int) or isinstance(raw, bool):
            fail(f"is {raw!r}", "pass an int")
        if spec.minimum is not None and raw < spec.minimum:
            fail(f"is {raw}", f"it must be >= {spec.minimum}")
        if spec.allowed and str(raw) not in spec.allowed:
            fail(f"is {raw}", "it must be one of " + ", ".join(spec.allowed))
        if not -(2**63) <= raw < 2**63:
            fail(f"is {raw}", "it must fit in a signed 64-bit integer")
        return raw
    if kind is AttrKind.f32:
        if not isinstance(raw, int | float) or isinstance(raw, bool):
            fail(f"is {raw!r}", "pass a float")
        try:
            mlir_f32(float(raw))
        except (ValueError, OverflowError) as exc:
            fail(f"is {raw!r}: {exc}", "pass a finite value within the f32 range")
        value32 = _f32_round(float(raw))
        if spec.minimum is not None and (
            value32 < spec.minimum or (spec.exclusive_minimum and value32 == spec.minimum)
        ):
            bound = ">" if spec.exclusive_minimum else ">="
            fail(f"is {raw!r} (as f32: {value32!r})", f"it must be {bound} {spec.minimum}")
        return value32
    if kind in (AttrKind.string, AttrKind.symbol):
        if not isinstance(raw, str) or not raw:
            fail(f"is {raw!r}", "pass a non-empty string")
        if spec.allowed and raw not in spec.allowed:
            fail(f"is {raw!r}", "it must be one of " + ", ".join(repr(a) for a in spec.allowed))
        return raw
    if kind is AttrKind.enum:
        assert spec.enum is not None
        return _enum_member(spec.enum, raw, fail)
    if kind is AttrKind.packing:
        return _normalize_packing(raw, fail)
    raise AssertionError(kind)  # pragma: no cover


def _enum_member(
    enum_type: type[SchemaEnum], raw: object, fail: Callable[[str, str], NoReturn]
) -> SchemaEnum:
    values = ", ".join(repr(m.value) for m in enum_type)
    if isinstance(raw, enum_type):
        return raw
    if isinstance(raw, SchemaEnum):
        fail(
            f"is {type(raw).__name__}.{raw.name}, a member of the wrong enum",
            f"pass a {enum_type.__name__} member or one of {values}",
        )
    if isinstance(raw, str):
        try:
            return enum_type(raw)
        except ValueError:
            pass
    fail(f"is {raw!r}, not a {enum_type.__mnemonic__} value", f"use one of {values}")


def _normalize_packing(
    raw: object, fail: Callable[[str, str], NoReturn]
) -> Mapping[str, object] | None:
    """A packed weight's packing map; None for dense (``{"bits": "dense"}``)."""
    names = [n for n, _ in PACKING_FIELDS]
    if not isinstance(raw, Mapping):
        fail(f"is {raw!r}", "pass a mapping with keys " + ", ".join(names))
    if raw.get(names[0]) in (PackingBits.dense, PackingBits.dense.value):
        if len(raw) != 1:
            fail(f"is {dict(raw)!r}", "dense packing has no other field; pass {'bits': 'dense'}")
        return None
    unknown = sorted(set(raw) - set(names))
    if unknown:
        fail(f"has unknown keys {unknown}", "use only " + ", ".join(names))
    out: dict[str, object] = {}
    for name, enum_type in PACKING_FIELDS:
        item = raw.get(name, _MISSING)
        if enum_type is not None:
            if item is _MISSING and len(enum_type) == 1:
                item = next(iter(enum_type))
            if item is _MISSING:
                fail(f"lacks {name!r}", f"pass {name}= one of {[m.value for m in enum_type]}")

            def field_fail(problem: str, fix: str, key: str = name) -> NoReturn:
                fail(f"field {key!r} {problem}", fix)

            out[name] = _enum_member(enum_type, item, field_fail).value
        else:
            if (
                not isinstance(item, int)
                or isinstance(item, bool)
                or item not in PACKING_GROUP_SIZES
            ):
                fail(
                    f"field {name!r} is {item!r}",
                    "pass one of " + ", ".join(map(str, PACKING_GROUP_SIZES)),
                )
            out[name] = item
    return MappingProxyType(out)


def _attr_text(spec: AttrSpec, value: Any) -> str:
    kind = spec.kind
    if kind is AttrKind.triple:
        return _triple_text(value)
    if kind is AttrKind.f64_triple:
        return _f64_triple_text(value)
    if kind is AttrKind.i64:
        return f"{value} : i64"
    if kind is AttrKind.f32:
        return f"{mlir_f32(value)} : f32"
    if kind is AttrKind.string:
        return mlir_string(value)
    if kind is AttrKind.enum:
        return _enum_text(value)
    if kind is AttrKind.packing:
        return _packing_text(value)
    raise AssertionError(kind)  # pragma: no cover


# ---------------------------------------------------------------------------
# The builder.


@dataclass(frozen=True)
class BuiltOp:
    """One op as the builder recorded it: what the native plan of the module must show.

    ``attrs`` holds every attribute the op carries (defaults included) as
    normalized Python values: triples as tuples, f32 values already rounded to
    f32, enums as schema enum members, packing as a mapping of field values.
    """

    op: OpDef
    operands: tuple[Value, ...]
    results: tuple[Value, ...]
    attrs: Mapping[str, Any]


@dataclass(frozen=True)
class _Arg:
    value: Value
    abi_name: str
    role: str


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class MLIRModuleBuilder:
    """Builds one lattice artifact module, one op per method call.

    Besides the ABI methods below, the builder has one method per schema op,
    named after :attr:`OpDef.python_name` (``conv3d``, ``sparse_make``,
    ``sparse_decompose``...), taking keyword arguments named after the op's
    operands and attributes.  Single-result ops return a :class:`Value`;
    ``sparse_decompose`` returns a tuple.  :meth:`emit` is the same entry point
    by op name, for code that is itself generic over the schema.

    ``schema_digest``, ``ir_version`` and ``weight_file`` override the module
    attributes; they exist to produce deliberately invalid modules in tests.
    """

    def __init__(
        self,
        *,
        schema_digest: str = SCHEMA_DIGEST,
        ir_version: int = CURRENT_IR_VERSION,
        weight_file: str = WEIGHT_FILE,
    ) -> None:
        self._schema_digest = schema_digest
        self._ir_version = ir_version
        self._weight_file = weight_file
        self._token = object()
        self._args: list[_Arg] = []
        self._lines: list[str] = []
        self._ops: list[BuiltOp] = []
        self._outputs: list[tuple[str, Value]] = []
        self._next_result = 0
        self._used_names: set[str] = set()
        self._next_conflict = 0
        self._symbols: dict[str, str] = {}
        self._storage_keys: set[str] = set()

    # -- module ABI ---------------------------------------------------------

    def _check_abi_name(self, call: str, name: object, taken: set[str]) -> str:
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise BuilderError(
                f"{call}: name {name!r} is not a valid ABI name; use an ASCII identifier "
                "(letters, digits, underscores, not starting with a digit)"
            )
        if name in taken:
            raise BuilderError(f"{call}: name {name!r} is already used; pick a unique name")
        return name

    def _add_arg(self, abi_name: str, vtype: ValueType, role: str) -> Value:
        value = Value(f"%arg{len(self._args)}", vtype, self._token)
        self._args.append(_Arg(value, abi_name, role))
        return value

    def add_input(self, name: str, type: str | ValueType) -> Value:
        """Add a dense tensor entry argument (role ``tensor``) and return it.

        ``type`` is a builtin tensor type, as text (``"tensor<?x3xf32>"``) or
        from :func:`tensor_type`.
        """
        taken = {a.abi_name for a in self._args}
        self._check_abi_name("add_input", name, taken)
        if isinstance(type, str):
            vtype = _parse_tensor_type(type, "add_input")
        elif isinstance(type, ValueType) and type.kind == "tensor":
            vtype = type
        else:
            raise BuilderError(
                f"add_input: type {type!r} is not a tensor type; pass text like "
                "'tensor<?x3xf32>' or tensor_type(shape, dtype) (sparse inputs use "
                "add_sparse_input)"
            )
        return self._add_arg(name, vtype, "tensor")

    def add_sparse_input(
        self,
        name: str,
        *,
        channels: int,
        dtype: str,
        stride: int | Sequence[int] = 1,
    ) -> Value:
        """Add one logical sparse input and return its sparse value.

        Adds the three consecutive entry arguments ``<name>_coords``,
        ``<name>_features`` and ``<name>_active`` (roles sparse_coords,
        sparse_features, sparse_active) and emits the ``lattice.sparse.make``
        that records ``stride``.
        """
        taken = {a.abi_name for a in self._args}
        self._check_abi_name("add_sparse_input", name, taken)
        for suffix in SPARSE_ABI_SUFFIXES:
            self._check_abi_name("add_sparse_input", name + suffix, taken)
        if not isinstance(channels, int) or isinstance(channels, bool) or channels <= 0:
            raise BuilderError(
                f"add_sparse_input: channels {channels!r} is invalid; pass a positive int"
            )
        if dtype not in FLOAT_DTYPES:
            raise BuilderError(
                f"add_sparse_input: dtype {dtype!r} is invalid; "
                f"use one of {', '.join(FLOAT_DTYPES)}"
            )
        types = (_COORDS_TYPE, _features_type(None, channels, dtype), _ACTIVE_TYPE)
        make = SCHEMA.op("sparse.make")
        before = len(self._args)
        args = [
            self._add_arg(name + suffix, vt, role)
            for suffix, vt, role in zip(SPARSE_ABI_SUFFIXES, types, SPARSE_INPUT_ROLES, strict=True)
        ]
        kwargs: dict[str, Any] = {o.name: v for o, v in zip(make.operands, args, strict=True)}
        try:
            result = self.emit(make.name, **kwargs, stride=stride)
        except BuilderError as exc:
            del self._args[before:]  # leave the builder as it was
            raise BuilderError(f"add_sparse_input({name!r}): {exc}") from None
        assert isinstance(result, Value)
        return result

    def add_output(self, name: str, value: Value) -> None:
        """Return ``value`` from ``@forward`` under the ABI name ``name``."""
        self._check_abi_name("add_output", name, {n for n, _ in self._outputs})
        if not isinstance(value, Value):
            raise BuilderError(f"add_output: {name!r} must be a Value, got {type(value).__name__}")
        if value._owner is not self._token:
            raise BuilderError(
                f"add_output: {name!r} is a Value of another MLIRModuleBuilder; "
                "return values of this builder"
            )
        if value.kind == "weight":
            raise BuilderError(
                f"add_output: {name!r} is a weight ({value.type_text}); outputs are sparse "
                "values or tensors"
            )
        self._outputs.append((name, value))

    # -- ops ------------------------------------------------------------------

    def emit(self, op_name: str, /, **kwargs: Any) -> Value | tuple[Value, ...]:
        """Append one op given by schema name: ``conv3d``, ``lattice.conv3d`` or ``sparse_make``."""
        try:
            op = SCHEMA.op(op_name)
        except KeyError as exc:
            raise BuilderError(str(exc.args[0])) from None
        rule = _RULES.get(op.name)
        if rule is None:  # pragma: no cover - guarded by a test over the schema
            raise BuilderError(f"{op.mlir_name}: the builder has no result-type rule for this op")
        kwargs = dict(kwargs)
        derived = rule.prepare(kwargs) if rule.prepare is not None else set()
        call = self._bind(op, rule, kwargs, derived)
        results = rule.infer(call)
        self._check_symbols(call)
        values = self._print_op(call, results)
        return values[0] if len(values) == 1 else values

    def _bind(self, op: OpDef, rule: _Rule, kwargs: dict[str, Any], derived: set[str]) -> _Call:
        known = [o.name for o in op.operands] + [a.name for a in op.attributes] + list(rule.extras)
        unknown = [k for k in kwargs if k not in known]
        if unknown:
            hint = difflib.get_close_matches(unknown[0], known, n=1)
            raise BuilderError(
                f"{op.mlir_name}: unexpected keyword {unknown[0]!r}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f"; its keywords are: {', '.join(known)}"
            )
        operands: dict[str, Value | None] = {}
        variadic: dict[str, tuple[Value, ...]] = {}
        for operand in op.operands:
            raw = kwargs.get(operand.name)
            if operand.variadic:
                items = () if raw is None else raw
                if isinstance(items, Value) or not isinstance(items, Sequence):
                    raise BuilderError(
                        f"{op.mlir_name}: argument {operand.name!r} takes a sequence of "
                        f"Values, got {type(raw).__name__}; pass a list or tuple"
                    )
                for item in items:
                    self._check_value(op, operand.name, item, operand.type)
                variadic[operand.name] = tuple(items)
                continue
            if raw is None:
                if not operand.optional:
                    raise BuilderError(
                        f"{op.mlir_name}: missing operand {operand.name!r}; pass "
                        f"{operand.name}= a Value of type {operand.type.describe()}"
                    )
                operands[operand.name] = None
                continue
            self._check_value(op, operand.name, raw, operand.type)
            operands[operand.name] = raw
        attrs: dict[str, Any] = {}
        # attributes derived from others are checked last, so errors name the source
        for attr in sorted(op.attributes, key=lambda a: a.name in derived):
            raw = kwargs.get(attr.name, _MISSING)
            if raw is _MISSING or raw is None:
                raw = _attr_default(attr.spec, attr.name)
            if raw is None:
                continue  # optional attribute left out
            if raw is _MISSING:
                raise BuilderError(
                    f"{op.mlir_name}: missing attribute {attr.name!r}; pass {attr.name}= "
                    + _attr_hint(attr.spec)
                )
            value = _normalize_attr(op, attr.name, attr.spec, raw)
            if value is not None:  # dense packing normalizes to "absent"
                attrs[attr.name] = value
        extras: dict[str, Any] = {}
        for name, default in rule.extras.items():
            raw = kwargs.get(name, default)
            if raw is _MISSING:
                raise BuilderError(
                    f"{op.mlir_name}: missing keyword {name!r}; the builder needs it to "
                    "infer the result type"
                )
            extras[name] = raw
        return _Call(op, operands, variadic, attrs, extras)

    def _check_value(self, op: OpDef, name: str, raw: object, constraint: TypeConstraint) -> None:
        if not isinstance(raw, Value):
            raise BuilderError(
                f"{op.mlir_name}: argument {name!r} must be a Value from this builder, got "
                f"{type(raw).__name__}; pass the result of an earlier builder call"
            )
        if raw._owner is not self._token:
            raise _owner_error(op, name)
        _check_constraint(op, name, raw, constraint)

    def _print_op(self, call: _Call, results: tuple[ValueType, ...]) -> tuple[Value, ...]:
        op = call.op
        assert len(results) == len(op.results)
        if len(results) == 1:
            number = self._next_result
            self._next_result += 1
            values: tuple[Value, ...] = (Value(f"%{number}", results[0], self._token),)
        else:
            # ODS gives multi-result ops OpAsmOpInterface names from the result
            # names, so MLIR prints ``%coords, %features, %active = ...``.
            values = tuple(
                Value("%" + self._unique_name(r.name), vt, self._token)
                for r, vt in zip(op.results, results, strict=True)
            )
        lhs = ", ".join(v.name for v in values)
        used: list[Value] = []
        for operand in op.operands:
            if operand.variadic:
                used.extend(call.variadic[operand.name])
            elif call.operands[operand.name] is not None:
                used.append(call.value(operand.name))
        text = f"{lhs} = {op.mlir_name}"
        dict_items = []
        for attr in sorted(op.attributes, key=lambda a: a.name):
            if attr.name not in call.attrs:
                if attr.name in SPELLED_WHEN_ABSENT:
                    dict_items.append(f"{attr.name} = {SPELLED_WHEN_ABSENT[attr.name]}")
                continue
            if attr.spec.kind is AttrKind.symbol:
                continue
            dict_items.append(f"{attr.name} = {_attr_text(attr.spec, call.attrs[attr.name])}")
        for attr in op.attributes:
            if attr.spec.kind is AttrKind.symbol:
                text += " " + mlir_symbol(call.attrs[attr.name])
        if used:
            text += " " + ", ".join(v.name for v in used)
        if dict_items:
            text += " {" + ", ".join(dict_items) + "}"
        result_texts = [vt.text for vt in results]
        operand_texts = [v.type_text for v in used]
        if not op.operands:
            text += " : " + ", ".join(result_texts)
        elif len(results) > 1 and len(used) == 1:
            text += f" : {operand_texts[0]} -> (" + ", ".join(result_texts) + ")"
        else:
            outs = result_texts[0] if len(results) == 1 else "(" + ", ".join(result_texts) + ")"
            text += " : (" + ", ".join(operand_texts) + ") -> " + outs
        self._lines.append(text)
        self._ops.append(BuiltOp(op, tuple(used), values, MappingProxyType(dict(call.attrs))))
        return values

    def _unique_name(self, name: str) -> str:
        """MLIR's SSA name uniquing: a taken name gets ``_<n>`` from one shared counter."""
        if name in self._used_names:
            while f"{name}_{self._next_conflict}" in self._used_names:
                self._next_conflict += 1
            name = f"{name}_{self._next_conflict}"
            self._next_conflict += 1
        self._used_names.add(name)
        return name

    def _check_symbols(self, call: _Call) -> None:
        """Reject a second binding of one symbol or storage key, then record the binding.

        Runs after every other check, so a rejected call leaves the builder unchanged.
        """
        symbols = [a.name for a in call.op.attributes if a.spec.kind is AttrKind.symbol]
        if not symbols:
            return
        symbol = call.attrs[symbols[0]]
        key = call.attrs.get("storage_key", symbol)
        if symbol in self._symbols:
            call.fail(
                symbols[0],
                f"{symbol!r} is already bound (to storage key {self._symbols[symbol]!r})",
                "reuse the Value of the first weight() call or pick another sym_name",
            )
        if key in self._storage_keys:
            call.fail(
                "storage_key",
                f"{key!r} is already bound",
                "reuse the Value of the first weight() call to share a weight",
            )
        self._symbols[symbol] = key
        self._storage_keys.add(key)

    # -- output ---------------------------------------------------------------

    @property
    def arguments(self) -> tuple[tuple[str, str, Value], ...]:
        """Entry arguments so far as ``(abi_name, role, value)``, in order."""
        return tuple((a.abi_name, a.role, a.value) for a in self._args)

    @property
    def operations(self) -> tuple[BuiltOp, ...]:
        """The ops emitted so far, in program order."""
        return tuple(self._ops)

    @property
    def outputs(self) -> tuple[tuple[str, Value], ...]:
        """Outputs so far as ``(abi_name, value)``, in return order."""
        return tuple(self._outputs)

    def build(self) -> str:
        """The whole module as MLIR text (ending in a newline)."""
        if not self._outputs:
            raise BuilderError(
                "build: the module has no outputs; call add_output(name, value) at least once"
            )

        def strings(items: Sequence[str]) -> str:
            return "[" + ", ".join(mlir_string(s) for s in items) + "]"

        module_attrs = {
            f"{DIALECT}.input_names": strings([a.abi_name for a in self._args]),
            f"{DIALECT}.input_roles": strings([a.role for a in self._args]),
            f"{DIALECT}.ir_version": f"{self._ir_version} : i64",
            f"{DIALECT}.output_names": strings([n for n, _ in self._outputs]),
            f"{DIALECT}.output_roles": strings(
                ["sparse_tensor" if v.kind == "sparse" else "tensor" for _, v in self._outputs]
            ),
            f"{DIALECT}.schema_digest": mlir_string(self._schema_digest),
            f"{DIALECT}.weight_file": mlir_string(self._weight_file),
        }
        header = ", ".join(f"{k} = {v}" for k, v in sorted(module_attrs.items()))
        params = ", ".join(f"{a.value.name}: {a.value.type_text}" for a in self._args)
        out_types = [v.type_text for _, v in self._outputs]
        signature = out_types[0] if len(out_types) == 1 else "(" + ", ".join(out_types) + ")"
        lines = [
            f"module attributes {{{header}}} {{",
            f"  func.func @forward({params}) -> {signature} {{",
            *("    " + line for line in self._lines),
            "    return "
            + ", ".join(v.name for _, v in self._outputs)
            + " : "
            + ", ".join(out_types),
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    # -- generated surface ------------------------------------------------------

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Unknown attribute: suggest the nearest schema op (methods exist for every op)."""
        if name.startswith("__"):
            raise AttributeError(name)
        hint = difflib.get_close_matches(name, [o.python_name for o in SCHEMA.ops.values()], n=1)
        raise AttributeError(
            f"MLIRModuleBuilder has no method {name!r}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
            + "; there is one method per lattice op, named after OpDef.python_name"
        )


def _attr_hint(spec: AttrSpec) -> str:
    if spec.kind is AttrKind.triple:
        return "an int or three ints" + (
            f" (each >= {spec.minimum})" if spec.minimum is not None else ""
        )
    if spec.kind is AttrKind.enum:
        assert spec.enum is not None
        return "one of " + ", ".join(repr(m.value) for m in spec.enum)
    if spec.kind is AttrKind.packing:
        return "a packing mapping (" + ", ".join(n for n, _ in PACKING_FIELDS) + ")"
    return {
        AttrKind.i64: "an int",
        AttrKind.f32: "a float",
        AttrKind.string: "a string",
        AttrKind.symbol: "a symbol name",
    }[spec.kind]


def _make_method(op: OpDef) -> Callable[..., Any]:
    rule = _RULES[op.name]

    def method(self: MLIRModuleBuilder, **kwargs: Any) -> Value | tuple[Value, ...]:
        return self.emit(op.name, **kwargs)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for operand in op.operands:
        default: Any = inspect.Parameter.empty
        if operand.optional:
            default = None
        elif operand.variadic:
            default = ()
        params.append(
            inspect.Parameter(operand.name, inspect.Parameter.KEYWORD_ONLY, default=default)
        )
    for attr in op.attributes:
        value = _attr_default(attr.spec, attr.name)
        if rule.prepare is not None and attr.spec.kind is AttrKind.symbol:
            value = None  # derived from other arguments when omitted
        params.append(
            inspect.Parameter(
                attr.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if value is _MISSING else value,
            )
        )
    for name, value in rule.extras.items():
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if value is _MISSING else value,
            )
        )
    method.__name__ = method.__qualname__ = op.python_name
    method.__qualname__ = f"MLIRModuleBuilder.{op.python_name}"
    method.__doc__ = (
        f"{op.summary}\n\nAppends ``{op.mlir_name}``; keywords: "
        + ", ".join(p.name for p in params[1:])
        + "."
    )
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return method


def _install_methods() -> None:
    missing = sorted(set(SCHEMA.ops) - set(_RULES))
    if missing:  # pragma: no cover - a schema op without a result-type rule
        raise TypeError("builder has no result-type rule for: " + ", ".join(missing))
    for name in ATTRIBUTE_DEFAULTS:
        if not any(a.name == name for o in SCHEMA.ops.values() for a in o.attributes):
            raise TypeError(f"builder default for {name!r} names no schema attribute")
    for op in SCHEMA.ops.values():
        if op.python_name in vars(MLIRModuleBuilder):
            raise TypeError(f"schema op {op.name} collides with builder method {op.python_name}")
        setattr(MLIRModuleBuilder, op.python_name, _make_method(op))


# The normalised, upsampling and lookup ops' rules register from their own module.
import lattice_contract.builder_extra  # noqa: E402, F401

_install_methods()
