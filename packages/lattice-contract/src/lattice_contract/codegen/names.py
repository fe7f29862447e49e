"""C++ and TableGen spellings of schema names, shared by the generator's modules."""

from __future__ import annotations

import keyword

from lattice_contract.dialect import (
    DialectSchema,
    OpDef,
    SchemaEnum,
    TypeDef,
    TypeKind,
)

CPP_NAMESPACE = "::mlir::lattice"

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
