"""MLIR spellings, value types and values of the textual builder.

The lowest layer of :mod:`lattice_contract.builder.module`: how attributes, types
and symbols are spelled (mirroring MLIR's own printer, so builder output is a
fixed point of native parsing and printing), the builder's values (typed
with the plan's one :class:`~lattice_contract.plan.records.ValueType`, whose
:class:`~lattice_contract.plan.records.ValueFacts` carry what the builder
knows beyond the MLIR type) and the :class:`BuilderError` every layer raises.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from lattice_contract.dialect import (
    DIALECT,
    FLOAT_DTYPES,
    INT_DTYPES,
    PACKING_FIELDS,
    AttrKind,
    AttrSpec,
    OpDef,
    SchemaEnum,
    Triple,
    rule_message,
)
from lattice_contract.plan import ValueType


class BuilderError(ValueError):
    """A builder call that would produce an invalid lattice module.

    The message names the op (or ABI call), the offending argument, what is
    wrong with it and how to fix it.
    """


def rule_error(op: OpDef | str, rule_id: str, argument: str | None, problem: str) -> BuilderError:
    """The BuilderError of a broken rule: ``<op>: argument 'x' <problem>; <fix> [rule <id>]``.

    The fix and the ID tag are the rule's own (:mod:`lattice_contract.dialect.rules`),
    the same the native verifier writes; ``problem`` names the values involved.
    """
    where = op.mlir_name if isinstance(op, OpDef) else op
    subject = f"argument {argument!r} " if argument else ""
    return BuilderError(f"{where}: {subject}{rule_message(rule_id, problem)}")


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
_TENSOR_DTYPES: tuple[str, ...] = FLOAT_DTYPES + INT_DTYPES
_TENSOR_TEXT = re.compile(r"tensor<((?:(?:\?|[0-9]+)x)*)([a-z0-9]+)>\Z")


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
    return ValueType("tensor", dtype, shape=tuple(-1 if d is None else d for d in dims))


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
        kind: ValueKind = self.type.kind  # type: ignore[assignment]  # one of the three
        return kind

    @property
    def dtype(self) -> str:
        """Element type (for weights, the storage type, e.g. ``i4``)."""
        return self.type.dtype


MISSING: Any = object()
"""Marks a keyword with no default (the caller must pass it)."""


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
