//===- LatticeDialect.cpp - dialect registration and generated bodies -----===//
//
// Registers the generated ops, attributes and types, and holds the few
// dialect-level hooks: the parse hook that turns an unknown lattice op into a
// diagnostic naming the fix, and the type/attribute verifiers.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::lattice;

#include "LatticeDialect.cpp.inc"
#include "LatticeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "LatticeAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "LatticeTypes.cpp.inc"

#define GET_OP_CLASSES
#include "LatticeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Element type helpers.
//===----------------------------------------------------------------------===//

/// The builtin element types every lattice graph uses, spelled as MLIR
/// prints them, without printing: the verifiers and the plan import ask for
/// a dtype's name several times per op, and `Type::print` builds an
/// AsmState (every dialect's asm interface) on each call.
static std::optional<std::string> builtinDtypeName(Type type) {
  if (auto integer = llvm::dyn_cast<IntegerType>(type)) {
    const char *sign = integer.isSignless() ? "i" : integer.isSigned() ? "si" : "ui";
    return sign + std::to_string(integer.getWidth());
  }
  if (type.isF16())
    return std::string("f16");
  if (type.isBF16())
    return std::string("bf16");
  if (type.isF32())
    return std::string("f32");
  if (type.isF64())
    return std::string("f64");
  if (type.isIndex())
    return std::string("index");
  return std::nullopt;
}

std::string mlir::lattice::describeDtype(Type type) {
  if (!type)
    return "<null>";
  if (std::optional<std::string> name = builtinDtypeName(type))
    return std::move(*name);
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

bool mlir::lattice::isDtypeOneOf(Type type, llvm::StringRef names) {
  if (!type)
    return false;
  std::string text = describeDtype(type);
  while (!names.empty()) {
    auto [item, rest] = names.split(',');
    if (item == text)
      return true;
    names = rest;
  }
  return false;
}

std::string mlir::lattice::ruleSuffix(schema::RuleId id) {
  const schema::RuleInfo &rule = schema::ruleInfo(id);
  return std::string("; ") + rule.fix + " [rule " + rule.id + "]";
}

//===----------------------------------------------------------------------===//
// Generated bodies: enum attribute parsers, type verifiers, schema tables.
//===----------------------------------------------------------------------===//

#define LATTICE_SCHEMA_TABLES
#define LATTICE_SCHEMA_ATTRS_AND_TYPES
#include "LatticeSchema.cpp.inc"

//===----------------------------------------------------------------------===//
// #lattice.packing<dense> | #lattice.packing<bits, group_size = N, scale_dtype = T, mode = M>
//===----------------------------------------------------------------------===//

Attribute PackingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  FailureOr<PackingBits> bits = parseLatticeEnum<PackingBits>(parser, "packing_bits");
  if (failed(bits))
    return {};
  // Dense storage carries no quantization parameters; the placeholders below
  // are never printed or read.
  if (*bits == PackingBits::dense) {
    if (parser.parseGreater())
      return {};
    return PackingAttr::get(parser.getContext(), *bits, 0, ScaleDtype::f16, PackingMode::affine);
  }
  int64_t groupSize = 0;
  if (parser.parseComma() || parser.parseKeyword("group_size") || parser.parseEqual() ||
      parser.parseInteger(groupSize) || parser.parseComma() || parser.parseKeyword("scale_dtype") ||
      parser.parseEqual())
    return {};
  FailureOr<ScaleDtype> scale = parseLatticeEnum<ScaleDtype>(parser, "scale_dtype");
  if (failed(scale) || parser.parseComma() || parser.parseKeyword("mode") || parser.parseEqual())
    return {};
  FailureOr<PackingMode> mode = parseLatticeEnum<PackingMode>(parser, "packing_mode");
  if (failed(mode) || parser.parseGreater())
    return {};
  return PackingAttr::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                 parser.getContext(), *bits, groupSize, *scale, *mode);
}

void PackingAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyEnum(getBits());
  if (getBits() != PackingBits::dense)
    printer << ", group_size = " << getGroupSize()
            << ", scale_dtype = " << stringifyEnum(getScaleDtype())
            << ", mode = " << stringifyEnum(getMode());
  printer << '>';
}

LogicalResult PackingAttr::verify(function_ref<InFlightDiagnostic()> emitError, PackingBits bits,
                                  int64_t groupSize, ScaleDtype scaleDtype, PackingMode mode) {
  (void)scaleDtype;
  (void)mode;
  if (bits == PackingBits::dense || llvm::is_contained(schema::kGroupSizes, groupSize))
    return success();
  InFlightDiagnostic diag = emitError() << "#lattice.packing group_size must be one of ";
  llvm::interleaveComma(schema::kGroupSizes, diag);
  return diag << " (the group sizes MLX's affine quantization supports), got " << groupSize
              << ruleSuffix(schema::RuleId::weight_group_size);
}

//===----------------------------------------------------------------------===//
// Unknown operations.
//===----------------------------------------------------------------------===//

std::string mlir::lattice::describeUnknownOp(MLIRContext *context, llvm::StringRef fullName) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::StringRef shortName = fullName;
  shortName.consume_front(std::string(schema::kDialectName) + ".");
  os << "is not defined by the lattice dialect";
  if (const char *fix = schema::rejectedOpFix(shortName)) {
    os << "; " << fix;
    return text;
  }
  llvm::SmallVector<llvm::StringRef> names;
  for (RegisteredOperationName name : context->getRegisteredOperations())
    if (name.getDialectNamespace() == schema::kDialectName)
      names.push_back(name.getStringRef());
  llvm::sort(names);
  os << "; use one of: " << llvm::join(names, ", ");
  return text;
}

/// Parse hook of every unknown `lattice.*` op in custom form.  MLIR keeps
/// only a function_ref to the hook, so it must not capture anything; the
/// parser prefixes the message with "custom op '<name>'".
static ParseResult parseUnknownLatticeOp(OpAsmParser &parser, OperationState &state) {
  return parser.emitError(parser.getNameLoc(),
                          describeUnknownOp(parser.getContext(), state.name.getStringRef()));
}

std::optional<Dialect::ParseOpHook> LatticeDialect::getParseOperationHook(llvm::StringRef) const {
  return ParseOpHook(parseUnknownLatticeOp);
}

LogicalResult mlir::lattice::checkNoUnknownLatticeOps(Operation *root) {
  LogicalResult result = success();
  root->walk([&](Operation *op) {
    OperationName name = op->getName();
    if (name.isRegistered() || name.getDialectNamespace() != schema::kDialectName)
      return;
    op->emitError() << "operation '" << name.getStringRef() << "' "
                    << describeUnknownOp(op->getContext(), name.getStringRef());
    result = failure();
  });
  return result;
}

//===----------------------------------------------------------------------===//
// Dialect.
//===----------------------------------------------------------------------===//

void LatticeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "LatticeOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "LatticeAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "LatticeTypes.cpp.inc"
      >();
}
