//===- LatticeDialect.h - the lattice MLIR dialect --------------*- C++ -*-===//
//
// Declarations of the lattice dialect.  Every op, attribute, enum and type is
// generated: lattice_contract.codegen.tablegen turns the Python schema into
// LatticeDialect.td, mlir-tblgen turns that into the *.inc files included
// here.  Hand-written code adds only verification rules and the importer.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEDIALECT_H
#define LATTICE_LATTICEDIALECT_H

#include <array>
#include <optional>
#include <string>

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "LatticeSchema.h"

#include "LatticeEnums.h.inc"

namespace mlir::lattice {

/// The trailing part every rule diagnostic ends with: "; <fix> [rule <id>]"
/// (the fix and ID from the generated rule table, lattice_contract.dialect.rules).
std::string ruleSuffix(schema::RuleId id);

/// Every keyword of a generated enum, in declaration order ("a, b, c").
template <typename EnumT> std::string allowedEnumKeywords() {
  std::string out;
  for (uint32_t i = 0; i < 256; ++i) {
    llvm::StringRef name = stringifyEnum(static_cast<EnumT>(i));
    if (name.empty())
      break;
    if (!out.empty())
      out += ", ";
    out += name.str();
  }
  return out;
}

/// Parses one enum keyword of a lattice enum.  Unknown values get a
/// diagnostic that lists the allowed keywords and, for known legacy
/// spellings (e.g. the conv3d_o_zyx_i layout), the fix.
template <typename EnumT>
FailureOr<EnumT> parseLatticeEnum(AsmParser &parser, llvm::StringRef mnemonic) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  std::string keyword;
  if (failed(parser.parseOptionalKeywordOrString(&keyword)))
    return parser.emitError(loc) << "expected a " << mnemonic
                                 << " keyword, one of: " << allowedEnumKeywords<EnumT>();
  if (std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword))
    return *value;
  // Synonyms (e.g. binary_op max for maximum) parse as their canonical value.
  if (const char *canonical = schema::enumSynonym(mnemonic, keyword))
    if (std::optional<EnumT> value = symbolizeEnum<EnumT>(canonical))
      return *value;
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown " << mnemonic << " '" << keyword
                            << "'; expected one of: " << allowedEnumKeywords<EnumT>();
  if (const char *fix = schema::rejectedSpellingFix(mnemonic, keyword))
    diag << "; " << fix;
  return diag << ruleSuffix(schema::RuleId::attr_allowed);
}

/// Whether `type` is one of the comma-separated element type names
/// ("f16,bf16,f32").
bool isDtypeOneOf(Type type, llvm::StringRef names);
/// The element type's name as the schema spells it ("f16", "i4", ...).
std::string describeDtype(Type type);
/// The keyword of any lattice enum attribute, or nullopt.
std::optional<llvm::StringRef> enumAttrValue(Attribute attr);

/// An op diagnostic for one rule: stream the problem into it; when it goes
/// out of scope it appends the rule's fix and ID tag and is reported.
/// Converts to failure(), so `return RuleDiagnostic(op, id) << ...;` works.
class RuleDiagnostic {
public:
  RuleDiagnostic(Operation *op, schema::RuleId id) : diag(op->emitOpError()), id(id) {}
  RuleDiagnostic(InFlightDiagnostic &&diag, schema::RuleId id) : diag(std::move(diag)), id(id) {}
  RuleDiagnostic(RuleDiagnostic &&) = default;
  RuleDiagnostic(const RuleDiagnostic &) = delete;
  RuleDiagnostic &operator=(const RuleDiagnostic &) = delete;
  RuleDiagnostic &operator=(RuleDiagnostic &&) = delete;
  ~RuleDiagnostic() {
    if (diag.getUnderlyingDiagnostic()) // not moved from
      diag << ruleSuffix(id);
  }
  template <typename T> RuleDiagnostic &operator<<(T &&value) {
    diag << std::forward<T>(value);
    return *this;
  }
  operator LogicalResult() const { return failure(); }
  operator ParseResult() const { return failure(); }

private:
  InFlightDiagnostic diag;
  schema::RuleId id;
};

} // namespace mlir::lattice

#include "LatticeDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "LatticeAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "LatticeTypes.h.inc"

namespace mlir::lattice {
/// The one layout weights of `family` declare (schema WEIGHT_FAMILY_INFO; generated).
WeightLayout familyLayout(WeightFamily family);
/// Whether weights of `family` may be affine-packed (generated).
bool familyPackable(WeightFamily family);
} // namespace mlir::lattice

namespace mlir::lattice::detail {
/// Schema-driven checks plus the op's hand-written rules; defined in
/// LatticeVerify.cpp, called from each generated Op::verify().
template <typename OpT> LogicalResult verifyLatticeOp(OpT op, const schema::OpInfo &info);
/// Called by every lattice op verifier before it reads static strides; the
/// first lattice op of a block starts a fresh stride table for that block.
void beginStrideVerification(Operation *op);
/// Drops this thread's stride table (its keys point into the module just
/// verified); a long-lived parser thread calls it after every call.
void endStrideVerification();
} // namespace mlir::lattice::detail

#define GET_OP_CLASSES
#include "LatticeOps.h.inc"

namespace mlir::lattice {

using Triple = std::array<int64_t, 3>;

/// The static stride of a sparse value, propagated from lattice.sparse.make
/// or lattice.voxelize by one forward pass over its block (each op's schema
/// stride rule); nullopt when it is not known (a block argument, a use before
/// its definition, or an op whose own check fails).
std::optional<Triple> staticStrideOf(Value value);

/// Registers --lattice-verify-artifact.
void registerLatticePasses();

/// The artifact checks (docs/artifact.md) on a parsed and verified module.
LogicalResult verifyArtifact(ModuleOp module);

/// Emits the diagnostic for every lattice op the dialect does not define
/// (generic-form `"lattice.quantized_conv3d"(...)` included).
LogicalResult checkNoUnknownLatticeOps(Operation *root);

/// Emits a diagnostic for the first string attribute that is not UTF-8
/// text, or name (ABI name, storage key, symbol) with a control character
/// (LatticeApi.cpp).
LogicalResult checkStringAttributes(ModuleOp module);

/// Diagnostic text for an unknown lattice op name (full name).
std::string describeUnknownOp(MLIRContext *context, llvm::StringRef fullName);

} // namespace mlir::lattice

#endif // LATTICE_LATTICEDIALECT_H
