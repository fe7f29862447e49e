"""Generate the C++ lattice dialect's TableGen and schema tables from the schema.

The native package (``packages/lattice-mlir``) never spells an op, attribute,
enum value or registered primitive by hand: its CMake build runs this module
(``python -m lattice_contract.tablegen --out-dir DIR`` with only this
package's ``src/`` on ``PYTHONPATH``) and feeds the output to ``mlir-tblgen``
and the C++ compiler.  Three files come out:

``LatticeDialect.td``
    ODS for the dialect: one ``EnumAttr`` per schema enum (spelled
    ``#lattice.<mnemonic><value>``), the ``#lattice.packing<...>`` attribute,
    the ``!lattice.sparse_tensor`` and ``!lattice.weight`` types and every op
    with its operands, results, attributes, summary and assembly format.
``LatticeSchema.h``
    The schema digest, IR version, artifact constants and plain tables of the
    schema (operand kinds, attribute specs, primitive signatures) that the
    hand-written verifiers walk generically.
``LatticeSchema.cpp.inc``
    Generated C++ bodies: enum-attribute parsers with diagnostics that list
    the allowed values, type verifiers from the schema's allowed values, the
    per-op ``verify()`` hooks (each forwarding to the hand-written rule
    template) and the table definitions.

Only the standard library is used, so the native build needs no install of
this package.  Output files are rewritten only when their content changes,
which keeps incremental native rebuilds incremental.
"""

from __future__ import annotations

import argparse
import keyword
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from lattice_contract.constants import (
    CURRENT_IR_VERSION,
    INPUT_ROLES,
    OUTPUT_ROLES,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
    WEIGHT_FILE,
)
from lattice_contract.digest import SCHEMA_DIGEST
from lattice_contract.schema import (
    DIALECT,
    PACKED_DTYPE_OF_BITS,
    PACKING_GROUP_SIZES,
    SCHEMA,
    AttrKind,
    AttrSpec,
    DialectSchema,
    OpDef,
    SchemaEnum,
    StrideRule,
    TypeDef,
    TypeKind,
    TypeParamDef,
    WeightFamily,
    enum_synonyms,
)

CPP_NAMESPACE = "::mlir::lattice"

REJECTED_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    (
        "weight_layout",
        "conv3d_o_zyx_i",
        "the z-fastest legacy layout is not part of IR v2: permute the kernel axes to "
        "(C_out, Kx, Ky, Kz, C_in) and declare #lattice.weight_layout<conv3d_o_xyz_i>",
    ),
)
"""Enum values older producers wrote, with the fix a diagnostic should name.

These are not dialect names (the dialect rejects them); they exist only so
that the rejection says how to repair the artifact.
"""

REJECTED_OP_PREFIXES: tuple[tuple[str, str], ...] = (
    (
        "quantized_",
        "quantized op variants are not part of the dialect: quantization is weight packing. "
        "Declare the weight as !lattice.weight<conv3d|linear, i4|i8> with "
        "packing = #lattice.packing<int4|int8, group_size = N, scale_dtype = T, mode = affine> "
        "and consume it with the ordinary op (e.g. lattice.conv3d)",
    ),
)
"""Legacy op-name prefixes and the fix the unknown-op diagnostic names."""


# ---------------------------------------------------------------------------
# Naming helpers.

_CPP_KEYWORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid typename
    union unsigned using virtual void volatile wchar_t while xor xor_eq
    """.split()  # noqa: SIM905 - a word list reads better than 90 quoted items
)


def _cpp_ident(name: str) -> str:
    """A C++ enumerator for an enum value (keywords get a trailing underscore)."""
    return name + "_" if name in _CPP_KEYWORDS or keyword.iskeyword(name) else name


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.replace(".", "_").split("_"))


def _td_string(text: str) -> str:
    """A TableGen double-quoted string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cpp_string(text: str) -> str:
    """A C++ narrow string literal (ASCII; anything else escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def enum_cpp_name(enum_type: type[SchemaEnum]) -> str:
    """C++ enum class of a schema enum (its Python class name)."""
    return enum_type.__name__


def enum_attr_name(enum_type: type[SchemaEnum]) -> str:
    """C++ attribute class of a schema enum, e.g. ``WeightLayoutAttr``."""
    return enum_cpp_name(enum_type) + "Attr"


def op_cpp_name(op: OpDef) -> str:
    """C++ op class, e.g. ``Conv3dOp``."""
    return op.class_name + "Op"


def _ods_enum_def(enum_type: type[SchemaEnum]) -> str:
    return f"Lattice_{enum_cpp_name(enum_type)}"


def _ods_enum_attr_def(enum_type: type[SchemaEnum]) -> str:
    return f"Lattice_{enum_attr_name(enum_type)}"


def _ods_type_def(t: TypeDef) -> str:
    return f"Lattice_{t.class_name}"


def _type_of_kind(schema: DialectSchema, kind: TypeKind) -> TypeDef | None:
    mnemonic = {TypeKind.sparse: "sparse_tensor", TypeKind.weight: "weight"}.get(kind)
    return next((t for t in schema.types if t.mnemonic == mnemonic), None)


# ---------------------------------------------------------------------------
# TableGen.


def _td_header() -> str:
    return f"""//===- LatticeDialect.td - generated, do not edit -------------------------===//
//
// Generated by `python -m lattice_contract.tablegen` from lattice_contract.schema
// (schema digest {SCHEMA_DIGEST}).  Edit the schema, never this file.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_DIALECT_TD
#define LATTICE_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
"""


def _td_dialect(schema: DialectSchema) -> str:
    return f"""
def Lattice_Dialect : Dialect {{
  let name = "{schema.name}";
  let cppNamespace = "{CPP_NAMESPACE}";
  let summary = "Portable sparse 3D convolutional network graphs.";
  let description = [{{
    Generated from lattice_contract.schema; digest {SCHEMA_DIGEST}.
  }}];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let usePropertiesForAttributes = 1;
  let extraClassDeclaration = [{{
    std::optional<::mlir::Dialect::ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
  }}];
}}

class Lattice_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lattice_Dialect, mnemonic, traits>;
"""


def _td_enums(schema: DialectSchema) -> str:
    out: list[str] = [
        "\n// Enums: one EnumAttr per schema enum, spelled #lattice.<mnemonic><value>.\n"
    ]
    for e in schema.enums:
        cases = ",\n    ".join(
            f'I32EnumAttrCase<"{_cpp_ident(m.value)}", {i}, "{m.value}">' for i, m in enumerate(e)
        )
        doc = (e.__doc__ or e.__name__).strip().splitlines()[0]
        out.append(
            f"""
def {_ods_enum_def(e)} : I32EnumAttr<"{enum_cpp_name(e)}", {_td_string(doc)}, [
    {cases}]> {{
  let cppNamespace = "{CPP_NAMESPACE}";
  let genSpecializedAttr = 0;
}}

def {_ods_enum_attr_def(e)} : EnumAttr<Lattice_Dialect, {_ods_enum_def(e)}, "{e.__mnemonic__}"> {{
  // Parsed by generated C++ so that an unknown value lists the allowed ones.
  let assemblyFormat = ?;
  let hasCustomAssemblyFormat = 1;
}}
"""
        )
    return "".join(out)


def _td_enum_param(e: type[SchemaEnum]) -> str:
    """Name of the enum's AttrDef/TypeDef parameter record (see :func:`_td_enum_params`)."""
    return f"Lattice_{enum_cpp_name(e)}Param"


def _td_enum_params(schema: DialectSchema) -> str:
    """One parameter record per enum: parsed with the lattice diagnostics."""
    out: list[str] = [
        "\n// Enum parameters of attributes and types (same diagnostics as the attrs).\n"
    ]
    for e in schema.enums:
        cpp = f"{CPP_NAMESPACE}::{enum_cpp_name(e)}"
        out.append(
            f"""
def {_td_enum_param(e)} : EnumParameter<{_ods_enum_def(e)}> {{
  let parser = "{CPP_NAMESPACE}::parseLatticeEnum<{cpp}>($_parser, \\"{e.__mnemonic__}\\")";
  let printer = "$_printer << {CPP_NAMESPACE}::stringifyEnum($_self)";
}}
"""
        )
    return "".join(out)


def _td_packing(schema: DialectSchema) -> str:
    params: list[str] = []
    for name, e in schema.packing_fields:
        if e is None:
            params.append(f'"int64_t":${name}')
        else:
            params.append(f"{_td_enum_param(e)}:${name}")
    params_text = ",\n    ".join(params)
    return f"""
// #lattice.packing<dense> or #lattice.packing<bits, group_size = N, scale_dtype = T, mode = M>
// (parsed and printed by hand-written C++: dense has no other parameter).
def Lattice_PackingAttr : AttrDef<Lattice_Dialect, "Packing"> {{
  let mnemonic = "packing";
  let summary = "Weight storage: dense, or affine packed quantization (w = scale * q + bias).";
  let parameters = (ins
    {params_text});
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}}
"""


def _td_type_param(p: TypeParamDef) -> str:
    if p.kind == "unsigned":
        return f'"unsigned":${p.name}'
    if p.kind == "enum":
        assert p.enum is not None
        return f"{_td_enum_param(p.enum)}:${p.name}"
    if p.kind == "dtype":
        return f'"::mlir::Type":${p.name}'
    raise ValueError(f"type parameter {p.name}: unknown kind {p.kind!r}")  # pragma: no cover


def _td_types(schema: DialectSchema) -> str:
    out: list[str] = []
    for t in schema.types:
        fmt_items: list[str] = []
        for i, p in enumerate(t.params):
            sep = "" if i == 0 else "`,` "
            fmt_items.append(f"{sep}`{p.name}` `=` ${p.name}" if p.keyword else f"{sep}${p.name}")
        params = ",\n    ".join(_td_type_param(p) for p in t.params)
        out.append(
            f"""
def {_ods_type_def(t)} : TypeDef<Lattice_Dialect, "{t.class_name[: -len("Type")]}"> {{
  let mnemonic = "{t.mnemonic}";
  let summary = {_td_string(t.summary)};
  let parameters = (ins
    {params});
  let assemblyFormat = "`<` {" ".join(fmt_items)} `>`";
  let genVerifyDecl = 1;
}}
"""
        )
    return "".join(out)


def _td_value_type(schema: DialectSchema, kind: TypeKind) -> str:
    t = _type_of_kind(schema, kind)
    return _ods_type_def(t) if t is not None else "AnyRankedTensor"


def _td_attr_type(spec: AttrSpec) -> str:
    base = {
        AttrKind.triple: "DenseI64ArrayAttr",
        AttrKind.i64: "I64Attr",
        AttrKind.f32: "F32Attr",
        AttrKind.string: "StrAttr",
        AttrKind.symbol: "SymbolNameAttr",
        AttrKind.packing: "Lattice_PackingAttr",
        AttrKind.f64_triple: "DenseF64ArrayAttr",
    }.get(spec.kind)
    if spec.kind is AttrKind.enum:
        assert spec.enum is not None
        base = _ods_enum_attr_def(spec.enum)
    assert base is not None
    return base if spec.required else f"OptionalAttr<{base}>"


def assembly_format(op: OpDef) -> str:
    """The op's assembly format, chosen from its structure (never from its name).

    * no operands and a symbol attribute (``lattice.weight``):
      ``@sym attr-dict : <weight type>``;
    * one operand and several results (``lattice.sparse.decompose``):
      ``%x attr-dict : <input type> -> (t0, t1, t2)``;
    * everything else: ``operands attr-dict : functional-type(operands, results)``.
    """
    symbol = next((a for a in op.attributes if a.spec.kind is AttrKind.symbol), None)
    if not op.operands and symbol is not None and len(op.results) == 1:
        return f"${symbol.name} attr-dict `:` qualified(type(${op.results[0].name}))"
    if len(op.operands) == 1 and not op.operands[0].variadic and len(op.results) > 1:
        results = " `,` ".join(f"type(${r.name})" for r in op.results)
        name = op.operands[0].name
        return f"${name} attr-dict `:` qualified(type(${name})) `->` `(` {results} `)`"
    return "operands attr-dict `:` functional-type(operands, results)"


def _td_op(schema: DialectSchema, op: OpDef) -> str:
    args: list[str] = []
    for o in op.operands:
        ty = _td_value_type(schema, o.type.kind)
        if o.variadic:
            ty = f"Variadic<{ty}>"
        elif o.optional:
            ty = f"Optional<{ty}>"
        args.append(f"{ty}:${o.name}")
    args.extend(f"{_td_attr_type(a.spec)}:${a.name}" for a in op.attributes)
    results = [f"{_td_value_type(schema, r.type.kind)}:${r.name}" for r in op.results]
    names = ", ".join(_cpp_string(o.name) for o in op.operands)
    operand_names = (
        f"static const ::llvm::StringRef names[] = {{{names}}}; return names;"
        if op.operands
        else "return {};"
    )
    description = "\n    ".join(
        (
            f"Operands: {', '.join(o.name for o in op.operands) or 'none'}.",
            f"Results: {', '.join(r.name for r in op.results)}.",
            f"Attributes: {', '.join(a.name for a in op.attributes) or 'none'}.",
        )
    )
    traits = ", ".join(["Pure", *op.traits])
    args_text = ",\n    ".join(args)
    results_text = ",\n    ".join(results)
    return f"""
def Lattice_{op_cpp_name(op)} : Lattice_Op<"{op.name}", [{traits}]> {{
  let summary = {_td_string(op.summary)};
  let description = [{{
    {description}
  }}];
  let arguments = (ins
    {args_text});
  let results = (outs
    {results_text});
  let assemblyFormat = "{assembly_format(op)}";
  let hasVerifier = 1;
  let extraClassDeclaration = [{{
    /// Operand names in schema order (optional and variadic ones included).
    static ::llvm::ArrayRef<::llvm::StringRef> getSchemaOperandNames() {{
      {operand_names}
    }}
  }}];
}}
"""


def render_td(schema: DialectSchema = SCHEMA) -> str:
    """The complete ``LatticeDialect.td``."""
    parts = [_td_header(), _td_dialect(schema), _td_enums(schema), _td_enum_params(schema)]
    parts.append(_td_packing(schema))
    parts.append(_td_types(schema))
    parts.append("\n// Operations.\n")
    parts.extend(_td_op(schema, op) for op in schema.ops.values())
    parts.append("\n#endif // LATTICE_DIALECT_TD\n")
    return "".join(parts)


# ---------------------------------------------------------------------------
# C++ header: digest, constants and schema tables.


def _family_mask(families: Iterable[WeightFamily]) -> str:
    bits = [
        f"(1u << unsigned({CPP_NAMESPACE}::WeightFamily::{_cpp_ident(f.value)}))" for f in families
    ]
    return " | ".join(bits) if bits else "0u"


def _string_array(name: str, items: Sequence[str]) -> str:
    body = ", ".join(_cpp_string(s) for s in items) if items else ""
    size = max(len(items), 1)
    fill = body if items else "nullptr"
    return f"inline constexpr const char *{name}[{size}] = {{{fill}}};"


def render_header(schema: DialectSchema = SCHEMA) -> str:
    """``LatticeSchema.h``: constants and schema table declarations."""
    kinds = ", ".join(_cpp_ident(k.value) for k in TypeKind)
    stride_rules = ", ".join(_cpp_ident(r.value) for r in StrideRule)
    attr_kinds = ", ".join(_cpp_ident(k.value) for k in AttrKind)
    return f"""//===- LatticeSchema.h - generated, do not edit ---------------------------===//
//
// Generated by `python -m lattice_contract.tablegen` from lattice_contract.schema.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_SCHEMA_H
#define LATTICE_SCHEMA_H

#include <cstdint>

#include "llvm/ADT/StringRef.h"

namespace mlir::lattice::schema {{

/// SHA-256 of the canonical serialisation of lattice_contract.schema.
inline constexpr const char kSchemaDigest[] = "{SCHEMA_DIGEST}";
/// The only lattice.ir_version this build reads.
inline constexpr int64_t kIrVersion = {CURRENT_IR_VERSION};
/// The only weight payload file name lattice.weight_file may declare.
inline constexpr const char kWeightFile[] = {_cpp_string(WEIGHT_FILE)};
inline constexpr const char kDialectName[] = {_cpp_string(schema.name)};

{_string_array("kInputRoles", INPUT_ROLES)}
inline constexpr unsigned kNumInputRoles = {len(INPUT_ROLES)};
{_string_array("kOutputRoles", OUTPUT_ROLES)}
inline constexpr unsigned kNumOutputRoles = {len(OUTPUT_ROLES)};
/// Roles of the three consecutive arguments of one logical sparse input.
{_string_array("kSparseInputRoles", SPARSE_INPUT_ROLES)}
/// ABI-name suffixes of those three arguments.
{_string_array("kSparseAbiSuffixes", SPARSE_ABI_SUFFIXES)}

/// What an operand or result carries (lattice_contract.schema.TypeKind).
enum class TypeKind : uint8_t {{ {kinds} }};
/// How an attribute is spelled (lattice_contract.schema.AttrKind).
enum class AttrKind : uint8_t {{ {attr_kinds} }};
/// How a sparse result's static stride follows (lattice_contract.schema.StrideRule);
/// a present `target` operand overrides the rule.
enum class StrideRule : uint8_t {{ {stride_rules} }};

struct ValueInfo {{
  const char *name;
  TypeKind kind;
  uint32_t families; // bit set of WeightFamily values; 0 unless kind == weight
  bool optional;
  bool variadic;
}};

struct AttrInfo {{
  const char *name;
  AttrKind kind;
  const char *enumMnemonic; // nullptr unless kind == enum
  bool hasMinimum;
  double minimum;
  bool exclusiveMinimum;
  const char *const *allowed; // closed string value set (may be empty)
  unsigned numAllowed;
  bool required;
}};

struct OpInfo {{
  const char *name;     // full name, e.g. "lattice.conv3d"
  const char *summary;
  const ValueInfo *operands;
  unsigned numOperands;
  const ValueInfo *results;
  unsigned numResults;
  const AttrInfo *attributes;
  unsigned numAttributes;
  StrideRule stride;
}};

struct PrimitiveInfo {{
  const char *name;
  const char *summary;
  const char *const *inputs; // element types, e.g. "f32", "i32"
  const int *inputRanks;
  unsigned numInputs;
  const char *output;
  int outputRank;
}};

struct RejectedSpelling {{
  const char *mnemonic;
  const char *value;
  const char *fix;
}};

struct RejectedOpPrefix {{
  const char *prefix;
  const char *fix;
}};

struct EnumSynonym {{
  const char *mnemonic;
  const char *synonym;
  const char *canonical;
}};

extern const OpInfo kOps[];
extern const unsigned kNumOps;
extern const PrimitiveInfo kPrimitives[];
extern const unsigned kNumPrimitives;
extern const RejectedSpelling kRejectedSpellings[];
extern const unsigned kNumRejectedSpellings;
extern const RejectedOpPrefix kRejectedOpPrefixes[];
extern const unsigned kNumRejectedOpPrefixes;
extern const EnumSynonym kEnumSynonyms[];
extern const unsigned kNumEnumSynonyms;
/// Group sizes a packed weight may use.
inline constexpr int64_t kPackingGroupSizes[] = {{{", ".join(map(str, PACKING_GROUP_SIZES))}}};

/// The schema entry of a full op name, or nullptr.
const OpInfo *lookupOp(::llvm::StringRef fullName);
/// The registered primitive called `name`, or nullptr.
const PrimitiveInfo *lookupPrimitive(::llvm::StringRef name);
/// Fix text for a rejected legacy enum spelling, or nullptr.
const char *rejectedSpellingFix(::llvm::StringRef mnemonic, ::llvm::StringRef value);
/// Fix text for a rejected legacy op name (without the dialect prefix), or nullptr.
const char *rejectedOpFix(::llvm::StringRef opName);
/// The canonical keyword a synonym of enum `mnemonic` stands for, or nullptr.
const char *enumSynonym(::llvm::StringRef mnemonic, ::llvm::StringRef keyword);
/// Readable text of a type kind, for diagnostics.
const char *describeKind(TypeKind kind);
/// Element type a packed weight of `bits` must declare, e.g. int4 -> "i4".
const char *packedDtypeOfBits(::llvm::StringRef bits);

}} // namespace mlir::lattice::schema

#endif // LATTICE_SCHEMA_H
"""


# ---------------------------------------------------------------------------
# C++ bodies.


def _value_info(v: object, optional: bool = False, variadic: bool = False) -> str:
    name = getattr(v, "name")  # noqa: B009 - OperandDef and ResultDef share the fields
    constraint = getattr(v, "type")  # noqa: B009
    return (
        f"{{{_cpp_string(name)}, TypeKind::{_cpp_ident(constraint.kind.value)}, "
        f"{_family_mask(constraint.families)}, {str(optional).lower()}, "
        f"{str(variadic).lower()}}}"
    )


def _attr_info(op: OpDef, index: int) -> tuple[str, str]:
    a = op.attributes[index]
    spec = a.spec
    allowed_name = f"kAllowed_{op.python_name}_{a.name}"
    allowed_def = ""
    if spec.allowed:
        allowed_def = (
            f"static const char *const {allowed_name}[] = "
            f"{{{', '.join(_cpp_string(s) for s in spec.allowed)}}};\n"
        )
    mnemonic = _cpp_string(spec.enum.__mnemonic__) if spec.enum is not None else "nullptr"
    minimum = float(spec.minimum) if spec.minimum is not None else 0.0
    entry = (
        f"{{{_cpp_string(a.name)}, AttrKind::{_cpp_ident(spec.kind.value)}, {mnemonic}, "
        f"{str(spec.minimum is not None).lower()}, {minimum!r}, "
        f"{str(spec.exclusive_minimum).lower()}, "
        f"{allowed_name if spec.allowed else 'nullptr'}, {len(spec.allowed)}, "
        f"{str(spec.required).lower()}}}"
    )
    return allowed_def, entry


def _cpp_tables(schema: DialectSchema) -> str:
    out: list[str] = ["namespace mlir::lattice::schema {\n"]
    op_entries: list[str] = []
    for op in schema.ops.values():
        ident = op.python_name
        if op.operands:
            items = ",\n    ".join(_value_info(o, o.optional, o.variadic) for o in op.operands)
            out.append(f"static const ValueInfo kOperands_{ident}[] = {{\n    {items}}};\n")
        items = ",\n    ".join(_value_info(r) for r in op.results)
        out.append(f"static const ValueInfo kResults_{ident}[] = {{\n    {items}}};\n")
        if op.attributes:
            entries = []
            for i in range(len(op.attributes)):
                allowed_def, entry = _attr_info(op, i)
                out.append(allowed_def)
                entries.append(entry)
            out.append(
                f"static const AttrInfo kAttributes_{ident}[] = {{\n    "
                + ",\n    ".join(entries)
                + "};\n"
            )
        op_entries.append(
            f"{{{_cpp_string(op.mlir_name)}, {_cpp_string(op.summary)}, "
            f"{f'kOperands_{ident}' if op.operands else 'nullptr'}, {len(op.operands)}, "
            f"kResults_{ident}, {len(op.results)}, "
            f"{f'kAttributes_{ident}' if op.attributes else 'nullptr'}, {len(op.attributes)}, "
            f"StrideRule::{_cpp_ident(op.stride.value)}}}"
        )
    out.append("const OpInfo kOps[] = {\n    " + ",\n    ".join(op_entries) + "};\n")
    out.append(f"const unsigned kNumOps = {len(op_entries)};\n\n")

    prim_entries: list[str] = []
    for i, p in enumerate(schema.primitives.values()):
        inputs = ", ".join(_cpp_string(s) for s in p.inputs) or "nullptr"
        ranks = ", ".join(str(r) for r in p.input_ranks) or "0"
        out.append(f"static const char *const kPrimInputs_{i}[] = {{{inputs}}};\n")
        out.append(f"static const int kPrimRanks_{i}[] = {{{ranks}}};\n")
        prim_entries.append(
            f"{{{_cpp_string(p.name)}, {_cpp_string(p.summary)}, kPrimInputs_{i}, "
            f"kPrimRanks_{i}, {len(p.inputs)}, {_cpp_string(p.output)}, {p.output_rank}}}"
        )
    if not prim_entries:  # pragma: no cover - the schema registers primitives
        prim_entries.append('{"", "", nullptr, nullptr, 0, "", 0}')
    out.append(
        "const PrimitiveInfo kPrimitives[] = {\n    " + ",\n    ".join(prim_entries) + "};\n"
    )
    out.append(f"const unsigned kNumPrimitives = {len(schema.primitives)};\n\n")

    rejected = ",\n    ".join(
        f"{{{_cpp_string(m)}, {_cpp_string(v)}, {_cpp_string(fix)}}}"
        for m, v, fix in REJECTED_SPELLINGS
    )
    out.append(f"const RejectedSpelling kRejectedSpellings[] = {{\n    {rejected}}};\n")
    out.append(f"const unsigned kNumRejectedSpellings = {len(REJECTED_SPELLINGS)};\n")
    prefixes = ",\n    ".join(
        f"{{{_cpp_string(p)}, {_cpp_string(fix)}}}" for p, fix in REJECTED_OP_PREFIXES
    )
    out.append(f"const RejectedOpPrefix kRejectedOpPrefixes[] = {{\n    {prefixes}}};\n")
    out.append(f"const unsigned kNumRejectedOpPrefixes = {len(REJECTED_OP_PREFIXES)};\n\n")
    synonyms = [
        (e.__mnemonic__, alias, canonical)
        for e in schema.enums
        for alias, canonical in enum_synonyms(e).items()
    ]
    synonym_rows = ",\n    ".join(
        f"{{{_cpp_string(m)}, {_cpp_string(a)}, {_cpp_string(c)}}}" for m, a, c in synonyms
    )
    out.append(
        "const EnumSynonym kEnumSynonyms[] = {\n    "
        + (synonym_rows or "{nullptr, nullptr, nullptr}")
        + "};\n"
    )
    out.append(f"const unsigned kNumEnumSynonyms = {len(synonyms)};\n\n")

    describe = "\n".join(
        f"  case TypeKind::{_cpp_ident(k.value)}:\n    return {_cpp_string(_describe_kind(k))};"
        for k in TypeKind
    )
    out.append(
        f"""const OpInfo *lookupOp(::llvm::StringRef fullName) {{
  for (unsigned i = 0; i < kNumOps; ++i)
    if (fullName == kOps[i].name)
      return &kOps[i];
  return nullptr;
}}

const PrimitiveInfo *lookupPrimitive(::llvm::StringRef name) {{
  for (unsigned i = 0; i < kNumPrimitives; ++i)
    if (name == kPrimitives[i].name)
      return &kPrimitives[i];
  return nullptr;
}}

const char *rejectedSpellingFix(::llvm::StringRef mnemonic, ::llvm::StringRef value) {{
  for (unsigned i = 0; i < kNumRejectedSpellings; ++i)
    if (mnemonic == kRejectedSpellings[i].mnemonic && value == kRejectedSpellings[i].value)
      return kRejectedSpellings[i].fix;
  return nullptr;
}}

const char *rejectedOpFix(::llvm::StringRef opName) {{
  for (unsigned i = 0; i < kNumRejectedOpPrefixes; ++i)
    if (opName.starts_with(kRejectedOpPrefixes[i].prefix))
      return kRejectedOpPrefixes[i].fix;
  return nullptr;
}}

const char *enumSynonym(::llvm::StringRef mnemonic, ::llvm::StringRef keyword) {{
  for (unsigned i = 0; i < kNumEnumSynonyms; ++i)
    if (mnemonic == kEnumSynonyms[i].mnemonic && keyword == kEnumSynonyms[i].synonym)
      return kEnumSynonyms[i].canonical;
  return nullptr;
}}

const char *describeKind(TypeKind kind) {{
  switch (kind) {{
{describe}
  }}
  return "value";
}}

}} // namespace mlir::lattice::schema
"""
    )
    return "".join(out)


def _describe_kind(kind: TypeKind) -> str:
    return {
        TypeKind.sparse: "a !lattice.sparse_tensor value",
        TypeKind.weight: "a !lattice.weight value",
        TypeKind.coords: "coordinates tensor<?x4xi32> (rows batch, x, y, z)",
        TypeKind.active: "an active-row count tensor<1xi32>",
        TypeKind.features: "a rank-2 float feature tensor tensor<?xCxT> (C static)",
        TypeKind.points: "points tensor<?x3xf32>",
        TypeKind.batch_index: "a batch index tensor<?xi32>",
        TypeKind.tensor: "a ranked tensor of f16, bf16, f32 or i32",
    }[kind]


def _cpp_enum_attrs(schema: DialectSchema) -> str:
    out: list[str] = ["namespace mlir::lattice {\n"]
    for e in schema.enums:
        attr = enum_attr_name(e)
        out.append(
            f"""
::mlir::Attribute {attr}::parse(::mlir::AsmParser &parser, ::mlir::Type) {{
  if (parser.parseLess())
    return {{}};
  ::mlir::FailureOr<{enum_cpp_name(e)}> value =
      parseLatticeEnum<{enum_cpp_name(e)}>(parser, "{e.__mnemonic__}");
  if (::mlir::failed(value) || parser.parseGreater())
    return {{}};
  return {attr}::get(parser.getContext(), *value);
}}

void {attr}::print(::mlir::AsmPrinter &printer) const {{
  printer << '<' << stringifyEnum(getValue()) << '>';
}}
"""
        )
    # A generic reader of any enum attribute's value, for the plan importer.
    cases = "\n".join(
        f"  if (auto a = ::llvm::dyn_cast<{enum_attr_name(e)}>(attr))\n"
        f"    return stringifyEnum(a.getValue());"
        for e in schema.enums
    )
    out.append(
        f"""
std::optional<::llvm::StringRef> enumAttrValue(::mlir::Attribute attr) {{
{cases}
  return std::nullopt;
}}
"""
    )
    out.append("} // namespace mlir::lattice\n")
    return "".join(out)


def _cpp_type_verifiers(schema: DialectSchema) -> str:
    out: list[str] = ["namespace mlir::lattice {\n"]
    for t in schema.types:
        cls = t.class_name
        sig = ", ".join(_cpp_param_decl(p) for p in t.params)
        checks: list[str] = []
        for p in t.params:
            if not p.allowed:
                continue
            allowed = ", ".join(p.allowed)
            if p.kind == "unsigned":
                cond = " && ".join(f"{p.name} != {int(a)}u" for a in p.allowed)
                checks.append(
                    f"  if ({cond})\n"
                    f'    return emitError() << "!{DIALECT}.{t.mnemonic} {p.name} must be '
                    f'{allowed}, got " << {p.name};'
                )
            elif p.kind == "dtype":
                checks.append(
                    f'  if (!isDtypeOneOf({p.name}, "{",".join(p.allowed)}"))\n'
                    f'    return emitError() << "!{DIALECT}.{t.mnemonic} {p.name} must be one of '
                    f'{allowed}, got " << describeDtype({p.name});'
                )
        body = "\n".join(checks)
        out.append(
            f"""
::llvm::LogicalResult
{cls}::verify(::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError, {sig}) {{
{body}
  return ::mlir::success();
}}
"""
        )
    out.append("} // namespace mlir::lattice\n")
    return "".join(out)


def _cpp_param_decl(p: TypeParamDef) -> str:
    if p.kind == "unsigned":
        return f"unsigned {p.name}"
    if p.kind == "enum":
        assert p.enum is not None
        return f"{enum_cpp_name(p.enum)} {p.name}"
    return f"::mlir::Type {p.name}"


def _cpp_op_verifiers(schema: DialectSchema) -> str:
    out: list[str] = ["namespace mlir::lattice {\n"]
    for i, op in enumerate(schema.ops.values()):
        out.append(
            f"::llvm::LogicalResult {op_cpp_name(op)}::verify() {{\n"
            f"  return detail::verifyLatticeOp(*this, schema::kOps[{i}]);\n}}\n"
        )
    out.append("} // namespace mlir::lattice\n")
    return "".join(out)


def _cpp_packed_dtypes() -> str:
    cases = "\n".join(
        f'  if (bits == "{bits}")\n    return "{dtype}";'
        for bits, dtype in PACKED_DTYPE_OF_BITS.items()
    )
    return f"""namespace mlir::lattice::schema {{
/// Element type a packed weight of `bits` must declare, e.g. int4 -> "i4".
const char *packedDtypeOfBits(::llvm::StringRef bits) {{
{cases}
  return nullptr;
}}
}} // namespace mlir::lattice::schema
"""


def render_cpp(schema: DialectSchema = SCHEMA) -> str:
    """``LatticeSchema.cpp.inc``: generated C++ bodies.

    Included by the hand-written ``Dialect.cpp`` after the ODS declarations
    and the rule templates it forwards to; sections are guarded so that each
    translation unit includes only what it defines.
    """
    return "\n".join(
        [
            "// Generated by `python -m lattice_contract.tablegen`; do not edit.",
            "#ifdef LATTICE_SCHEMA_TABLES",
            _cpp_tables(schema),
            _cpp_packed_dtypes(),
            "#endif // LATTICE_SCHEMA_TABLES",
            "#ifdef LATTICE_SCHEMA_ATTRS_AND_TYPES",
            _cpp_enum_attrs(schema),
            _cpp_type_verifiers(schema),
            "#endif // LATTICE_SCHEMA_ATTRS_AND_TYPES",
            "#ifdef LATTICE_SCHEMA_OP_VERIFIERS",
            _cpp_op_verifiers(schema),
            "#endif // LATTICE_SCHEMA_OP_VERIFIERS",
            "",
        ]
    )


# ---------------------------------------------------------------------------
# Entry point.


def render_all(schema: DialectSchema = SCHEMA) -> dict[str, str]:
    """Every generated file by name."""
    return {
        "LatticeDialect.td": render_td(schema),
        "LatticeSchema.h": render_header(schema),
        "LatticeSchema.cpp.inc": render_cpp(schema),
    }


def write_all(out_dir: Path, schema: DialectSchema = SCHEMA) -> list[Path]:
    """Write the generated files into ``out_dir``; untouched when unchanged.

    Returns the paths actually rewritten.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in render_all(schema).items():
        path = out_dir / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lattice_contract.tablegen --out-dir DIR``."""
    parser = argparse.ArgumentParser(
        prog="lattice-tablegen",
        description="Emit the lattice dialect's TableGen and C++ schema tables from the schema.",
    )
    parser.add_argument("--out-dir", type=Path, help="directory to write into")
    parser.add_argument(
        "--print-digest", action="store_true", help="print the schema digest and exit"
    )
    args = parser.parse_args(argv)
    if args.print_digest:
        print(SCHEMA_DIGEST)
        return 0
    if args.out_dir is None:
        parser.error("--out-dir is required (or pass --print-digest)")
    write_all(args.out_dir)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
