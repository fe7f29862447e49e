//===- LatticeVerifySchema.cpp - generic and generated op rules ----------===//
//
// The generic layer of the lattice op verifier (see LatticeVerifyRules.h):
// the rules every op obeys, read from the generated schema tables (value
// kinds, weight families, undeclared attributes, attribute values,
// element-type agreement, required attributes); the raw, invariant-free
// accessors the rule layers share; and the forward stride analysis the
// stride rules read.  The generated per-op rules are in
// LatticeVerifyGenerated.cpp.
//
// Verifiers may see IR whose other ops are not verified yet (they run in
// program order and forward references can even form cycles), so anything
// that looks beyond the op itself uses the raw Operation API with explicit
// bounds and null checks and never an ODS accessor of another op.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeVerifyRules.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>
#include <limits>

using namespace mlir;
using namespace mlir::lattice;
using schema::RuleId;

std::string verify::tripleText(llvm::ArrayRef<int64_t> t) {
  std::string out = "(";
  for (size_t i = 0; i < t.size(); ++i)
    out += (i ? ", " : "") + std::to_string(t[i]);
  return out + ")";
}

bool verify::isFloatDtype(Type t) { return t && (t.isF16() || t.isBF16() || t.isF32()); }

namespace {

//===----------------------------------------------------------------------===//
// Small helpers.
//===----------------------------------------------------------------------===//

std::string typeText(Type type) { return describeDtype(type); }
using verify::isFloatDtype;
using verify::tripleText;

std::string numberText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

/// The element type a value of this type stores, for homogeneity checks:
/// sparse dtype, dense weight dtype, or tensor element type.  Null for packed
/// weights (their storage type is the packed integer).
Type storageElementType(Type type) {
  if (auto sparse = llvm::dyn_cast<SparseTensorType>(type))
    return sparse.getDtype();
  if (auto weight = llvm::dyn_cast<WeightType>(type))
    return isFloatDtype(weight.getDtype()) ? weight.getDtype() : Type();
  if (auto tensor = llvm::dyn_cast<RankedTensorType>(type))
    return tensor.getElementType();
  return {};
}

/// Checks that `type` is a value of `kind` (and, for weights, of one of the
/// families in the bit set).  Returns the reason when it is not; `rule` is
/// set to the rule it breaks (value.kind or weight.family).
std::optional<std::string> kindMismatch(Type type, schema::TypeKind kind, uint32_t families,
                                        RuleId &rule) {
  rule = RuleId::value_kind;
  using schema::TypeKind;
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  auto isI32 = [](Type t) { return t && t.isSignlessInteger(32); };
  switch (kind) {
  case TypeKind::sparse:
    if (llvm::isa<SparseTensorType>(type))
      return std::nullopt;
    break;
  case TypeKind::weight:
    if (auto weight = llvm::dyn_cast<WeightType>(type)) {
      uint32_t bit = 1u << static_cast<uint32_t>(weight.getFamily());
      if (families == 0 || (families & bit))
        return std::nullopt;
      std::string allowed;
      for (uint32_t i = 0; i < 32; ++i) {
        if (!(families & (1u << i)))
          continue;
        llvm::StringRef name = stringifyEnum(static_cast<WeightFamily>(i));
        allowed += (allowed.empty() ? "" : " or ") + name.str();
      }
      rule = RuleId::weight_family;
      return "a weight of family " + allowed + ", got family " +
             stringifyEnum(weight.getFamily()).str();
    }
    break;
  case TypeKind::coords:
    if (tensor && tensor.getRank() == 2 && tensor.getDimSize(1) == 4 &&
        isI32(tensor.getElementType()))
      return std::nullopt;
    break;
  case TypeKind::active:
    if (tensor && tensor.getRank() == 1 && tensor.getDimSize(0) == 1 &&
        isI32(tensor.getElementType()))
      return std::nullopt;
    break;
  case TypeKind::features:
    if (tensor && tensor.getRank() == 2 && !tensor.isDynamicDim(1) &&
        isFloatDtype(tensor.getElementType()))
      return std::nullopt;
    break;
  case TypeKind::points:
    if (tensor && tensor.getRank() == 2 && tensor.getDimSize(1) == 3 &&
        tensor.getElementType().isF32())
      return std::nullopt;
    break;
  case TypeKind::batch_index:
    if (tensor && tensor.getRank() == 1 && isI32(tensor.getElementType()))
      return std::nullopt;
    break;
  case TypeKind::tensor:
    if (tensor && (isFloatDtype(tensor.getElementType()) || isI32(tensor.getElementType())))
      return std::nullopt;
    break;
  }
  return std::string(schema::describeKind(kind)) + ", got " + typeText(type);
}

bool homogeneityKind(schema::TypeKind kind) {
  return kind == schema::TypeKind::sparse || kind == schema::TypeKind::features ||
         kind == schema::TypeKind::weight;
}

std::string joinNames(const schema::AttrInfo *attrs, unsigned n) {
  std::string out;
  for (unsigned i = 0; i < n; ++i)
    out += (i ? ", " : "") + std::string(attrs[i].name);
  return out.empty() ? "none" : out;
}

//===----------------------------------------------------------------------===//
// Schema-driven verification.
//===----------------------------------------------------------------------===//

/// Pairs each operand with its schema entry (only ops that passed ODS's own
/// operand-count checks get here, so the walk is in bounds).
template <typename Fn> void forEachOperand(Operation *op, const schema::OpInfo &info, Fn &&fn) {
  unsigned required = 0;
  for (unsigned i = 0; i < info.numOperands; ++i)
    if (!info.operands[i].variadic && !info.operands[i].optional)
      ++required;
  unsigned count = op->getNumOperands();
  unsigned index = 0;
  for (unsigned i = 0; i < info.numOperands && index < count; ++i) {
    const schema::ValueInfo &entry = info.operands[i];
    bool fixed = !entry.variadic && !entry.optional;
    if (fixed)
      --required;
    unsigned remaining = count - index;
    unsigned take = 1;
    if (entry.variadic)
      take = remaining > required ? remaining - required : 0;
    else if (entry.optional)
      take = remaining > required ? 1 : 0;
    for (unsigned k = 0; k < take && index < count; ++k)
      fn(op->getOperand(index++), entry);
  }
}

LogicalResult verifyAttributeValue(Operation *op, const schema::AttrInfo &spec, Attribute attr) {
  using schema::AttrKind;
  switch (spec.kind) {
  case AttrKind::triple: {
    auto array = llvm::dyn_cast<DenseI64ArrayAttr>(attr);
    if (!array)
      return success(); // ODS reports the wrong attribute type.
    if (array.size() != 3)
      return RuleDiagnostic(op, RuleId::attr_triple)
             << "attribute '" << spec.name
             << "' must be a triple array<i64: x, y, z> (one value per axis), got " << array.size()
             << " values";
    if (spec.hasMinimum)
      for (int64_t v : array.asArrayRef())
        if (static_cast<double>(v) < spec.minimum)
          return RuleDiagnostic(op, RuleId::attr_minimum)
                 << "attribute '" << spec.name << "' = " << tripleText(array.asArrayRef())
                 << " must have every component >= " << static_cast<int64_t>(spec.minimum);
    for (int64_t v : array.asArrayRef())
      if (v > std::numeric_limits<int32_t>::max())
        return RuleDiagnostic(op, RuleId::geometry_int32)
               << "attribute '" << spec.name << "' = " << tripleText(array.asArrayRef())
               << " has a component above 2147483647";
    return success();
  }
  case AttrKind::i64: {
    auto integer = llvm::dyn_cast<IntegerAttr>(attr);
    if (!integer)
      return success();
    if (spec.hasMinimum && static_cast<double>(integer.getInt()) < spec.minimum)
      return RuleDiagnostic(op, RuleId::attr_minimum)
             << "attribute '" << spec.name << "' = " << integer.getInt()
             << " must be >= " << static_cast<int64_t>(spec.minimum);
    if (spec.numAllowed == 0)
      return success();
    std::string text = std::to_string(integer.getInt());
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      if (text == spec.allowed[i])
        return success();
    RuleDiagnostic diag(op, RuleId::attr_allowed);
    diag << "attribute '" << spec.name << "' = " << text << " is not allowed; it must be ";
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      diag << (i ? " or " : "") << spec.allowed[i];
    return diag;
  }
  case AttrKind::f64_triple: {
    auto array = llvm::dyn_cast<DenseF64ArrayAttr>(attr);
    if (!array)
      return success(); // ODS reports the wrong attribute type.
    if (array.size() != 3)
      return RuleDiagnostic(op, RuleId::attr_triple)
             << "attribute '" << spec.name
             << "' must be a triple array<f64: x, y, z> (one value per axis), got " << array.size()
             << " values";
    for (double v : array.asArrayRef()) {
      if (!std::isfinite(v))
        return RuleDiagnostic(op, RuleId::attr_finite)
               << "attribute '" << spec.name << "' must hold finite values, got a NaN or infinity";
      if (spec.hasMinimum && (spec.exclusiveMinimum ? !(v > spec.minimum) : !(v >= spec.minimum)))
        return RuleDiagnostic(op, RuleId::attr_minimum)
               << "attribute '" << spec.name << "' has component " << numberText(v)
               << "; every component must be " << (spec.exclusiveMinimum ? "> " : ">= ")
               << numberText(spec.minimum);
    }
    return success();
  }
  case AttrKind::f32: {
    auto real = llvm::dyn_cast<FloatAttr>(attr);
    if (!real)
      return success();
    double v = real.getValueAsDouble();
    if (!std::isfinite(v))
      return RuleDiagnostic(op, RuleId::attr_finite)
             << "attribute '" << spec.name << "' must be a finite f32, got a NaN or infinity";
    if (spec.hasMinimum && (spec.exclusiveMinimum ? !(v > spec.minimum) : !(v >= spec.minimum)))
      return RuleDiagnostic(op, RuleId::attr_minimum)
             << "attribute '" << spec.name << "' = " << numberText(v) << " must be "
             << (spec.exclusiveMinimum ? "> " : ">= ") << numberText(spec.minimum);
    return success();
  }
  case AttrKind::string: {
    auto text = llvm::dyn_cast<StringAttr>(attr);
    if (!text || spec.numAllowed == 0)
      return success();
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      if (text.getValue() == spec.allowed[i])
        return success();
    RuleDiagnostic diag(op, RuleId::attr_allowed);
    diag << "attribute '" << spec.name << "' = \"" << text.getValue()
         << "\" is not allowed; it must be ";
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      diag << (i ? " or " : "") << "\"" << spec.allowed[i] << "\"";
    if (llvm::StringRef(spec.name) == "accumulation")
      diag << " (products are summed in f32 whatever the storage dtype)";
    return diag;
  }
  case AttrKind::symbol:
  case AttrKind::enum_:
  case AttrKind::packing:
    return success(); // ODS checks the attribute class; the parsers check values.
  }
  return success();
}

} // namespace

LogicalResult verify::verifyAgainstSchema(Operation *op, const schema::OpInfo &info) {
  // Attributes the op does not declare would be silently ignored downstream.
  for (NamedAttribute named : op->getDiscardableAttrs())
    return RuleDiagnostic(op, RuleId::attr_declared)
           << "has no attribute '" << named.getName().getValue()
           << "'; it accepts: " << joinNames(info.attributes, info.numAttributes);

  // Operand and result kinds.
  LogicalResult result = success();
  unsigned position = 0;
  forEachOperand(op, info, [&](Value value, const schema::ValueInfo &entry) {
    ++position;
    if (failed(result))
      return;
    RuleId rule;
    if (std::optional<std::string> why =
            kindMismatch(value.getType(), entry.kind, entry.families, rule))
      result = RuleDiagnostic(op, rule)
               << "operand '" << entry.name << "' (#" << position - 1 << ") must be " << *why;
  });
  if (failed(result))
    return failure();
  for (unsigned i = 0; i < op->getNumResults() && i < info.numResults; ++i) {
    const schema::ValueInfo &entry = info.results[i];
    RuleId rule;
    if (std::optional<std::string> why =
            kindMismatch(op->getResult(i).getType(), entry.kind, entry.families, rule))
      return RuleDiagnostic(op, rule) << "result '" << entry.name << "' must be " << *why;
  }

  // Attribute values.
  for (unsigned i = 0; i < info.numAttributes; ++i) {
    const schema::AttrInfo &spec = info.attributes[i];
    if (Attribute attr = op->getInherentAttr(spec.name).value_or(Attribute()))
      if (failed(verifyAttributeValue(op, spec, attr)))
        return failure();
  }

  // Element-type agreement: every sparse, feature and dense weight value an
  // op touches stores the same element type (only lattice.cast and
  // lattice.call, whose values are plain tensors, change element types).
  Type common;
  std::string commonName;
  auto check = [&](Type type, const char *name) -> LogicalResult {
    Type element = storageElementType(type);
    if (!element)
      return success();
    if (!common) {
      common = element;
      commonName = name;
      return success();
    }
    if (element == common)
      return success();
    return RuleDiagnostic(op, RuleId::dtype_same)
           << "mixes element types: '" << commonName << "' stores " << typeText(common) << " but '"
           << name << "' stores " << typeText(element)
           << "; sparse values, features and dense weights of one op share one element type";
  };
  forEachOperand(op, info, [&](Value value, const schema::ValueInfo &entry) {
    if (succeeded(result) && homogeneityKind(entry.kind))
      result = check(value.getType(), entry.name);
  });
  if (failed(result))
    return failure();
  for (unsigned i = 0; i < op->getNumResults() && i < info.numResults; ++i)
    if (homogeneityKind(info.results[i].kind) &&
        failed(check(op->getResult(i).getType(), info.results[i].name)))
      return failure();
  return success();
}

namespace {

//===----------------------------------------------------------------------===//
// Raw access that never trusts the other op's invariants.
//===----------------------------------------------------------------------===//

/// The schema entry of an op, by name, through a map built once (the walk
/// below looks ops up at every step).
const schema::OpInfo *schemaInfo(Operation *op) {
  static const llvm::StringMap<const schema::OpInfo *> byName = [] {
    llvm::StringMap<const schema::OpInfo *> map;
    for (unsigned i = 0; i < schema::kNumOps; ++i)
      map[schema::kOps[i].name] = &schema::kOps[i];
    return map;
  }();
  return byName.lookup(op->getName().getStringRef());
}

Value operandNamed(Operation *op, llvm::StringRef name) {
  const schema::OpInfo *info = schemaInfo(op);
  if (!info)
    return {};
  for (unsigned i = 0; i < info->numOperands; ++i) {
    if (name != info->operands[i].name)
      continue;
    if (info->operands[i].variadic || i >= op->getNumOperands())
      return {};
    return op->getOperand(i);
  }
  return {};
}

/// A triple attribute whose components are all >= `minimum` (1 unless said),
/// or nullopt (absent, malformed or out of range: its own rule reports it).
std::optional<Triple> tripleAttr(Operation *op, llvm::StringRef name, int64_t minimum = 1) {
  std::optional<Attribute> attr = op->getInherentAttr(name);
  auto array = llvm::dyn_cast_or_null<DenseI64ArrayAttr>(attr.value_or(Attribute()));
  if (!array || array.size() != 3)
    return std::nullopt;
  Triple out;
  for (int i = 0; i < 3; ++i) {
    out[i] = array[i];
    if (out[i] < minimum)
      return std::nullopt;
  }
  return out;
}

constexpr int64_t kMaxStride = std::numeric_limits<int32_t>::max();

std::optional<Triple> multiply(const Triple &a, const Triple &b) {
  Triple out;
  for (int i = 0; i < 3; ++i) {
    int64_t product = 0;
    if (llvm::MulOverflow(a[i], b[i], product) || product > kMaxStride)
      return std::nullopt;
    out[i] = product;
  }
  return out;
}

std::optional<Triple> divide(const Triple &a, const Triple &b) {
  Triple out;
  for (int i = 0; i < 3; ++i) {
    if (b[i] <= 0 || a[i] % b[i] != 0)
      return std::nullopt;
    out[i] = a[i] / b[i];
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Static stride propagation.
//===----------------------------------------------------------------------===//

namespace {

/// The static stride of every sparse value defined in one block, from one
/// forward pass over the block in program order: each op's result stride
/// follows from its operands' (looked up by value) by the op's schema stride
/// rule.  No walk, no cap: a use before its definition (possible before the
/// dominance check has run) simply finds no entry and stays unknown, so
/// cycles cannot loop, and a chain of any length is followed.
struct BlockStrides {
  Block *block = nullptr;
  llvm::DenseMap<Value, Triple> strides;
  llvm::DenseSet<Operation *> ops; // the ops the pass saw, to detect a changed block

  void build(Block *b) {
    block = b;
    strides.clear();
    ops.clear();
    for (Operation &op : *b) {
      ops.insert(&op);
      if (std::optional<Triple> stride = resultStride(&op))
        strides[op.getResult(0)] = *stride;
    }
  }

  std::optional<Triple> lookup(Value value) const {
    auto it = strides.find(value);
    if (it == strides.end())
      return std::nullopt;
    return it->second;
  }

  /// The stride of the op's sparse result, from operands already in the table.
  std::optional<Triple> resultStride(Operation *op) const {
    const schema::OpInfo *info = schemaInfo(op);
    if (!info || info->stride == schema::StrideRule::none || op->getNumResults() == 0 ||
        !llvm::isa<SparseTensorType>(op->getResult(0).getType()))
      return std::nullopt;
    if (Value target = operandNamed(op, "target"))
      return lookup(target);
    switch (info->stride) {
    case schema::StrideRule::none:
      return std::nullopt;
    case schema::StrideRule::attribute:
      return tripleAttr(op, "stride");
    case schema::StrideRule::input:
      return lookup(operandNamed(op, "input"));
    case schema::StrideRule::lhs:
      return lookup(operandNamed(op, "lhs"));
    case schema::StrideRule::target: // handled above; the target is not an operand here
      return std::nullopt;
    case schema::StrideRule::multiply:
    case schema::StrideRule::divide: {
      std::optional<Triple> in = lookup(operandNamed(op, "input"));
      std::optional<Triple> s = tripleAttr(op, "stride");
      if (!in || !s)
        return std::nullopt;
      return info->stride == schema::StrideRule::multiply ? multiply(*in, *s) : divide(*in, *s);
    }
    }
    return std::nullopt;
  }
};

/// One table per thread (MLIR verifies the ops of a block in order on one
/// thread; isolated regions may run on others).
BlockStrides &threadStrides() {
  thread_local BlockStrides table;
  return table;
}

} // namespace

void mlir::lattice::detail::beginStrideVerification(Operation *op) {
  // Verification visits a block's ops in order, so its first lattice op marks
  // a new verification of that block: drop whatever an earlier run (or an
  // earlier module whose block reused this address) left in the table.
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    if (prev->getDialect() == op->getDialect())
      return;
  BlockStrides &table = threadStrides();
  if (table.block == op->getBlock())
    table.block = nullptr;
}

void mlir::lattice::detail::endStrideVerification() {
  BlockStrides &table = threadStrides();
  table.block = nullptr;
  table.strides.clear();
  table.ops.clear();
}

std::optional<Triple> mlir::lattice::staticStrideOf(Value value) {
  Operation *def = value ? value.getDefiningOp() : nullptr;
  Block *block = def ? def->getBlock() : nullptr;
  if (!block)
    return std::nullopt;
  BlockStrides &table = threadStrides();
  if (table.block != block || !table.ops.contains(def))
    table.build(block);
  return table.lookup(value);
}

Value verify::operandNamed(Operation *op, llvm::StringRef name) { return ::operandNamed(op, name); }

std::optional<Triple> verify::tripleAttr(Operation *op, llvm::StringRef name, int64_t minimum) {
  return ::tripleAttr(op, name, minimum);
}

std::optional<Triple> verify::multiplyTriple(const Triple &a, const Triple &b) {
  return multiply(a, b);
}

std::optional<Triple> verify::divideTriple(const Triple &a, const Triple &b) {
  return divide(a, b);
}

LogicalResult verify::verifyRequiredLast(Operation *op, const schema::OpInfo &info) {
  for (unsigned i = 0; i < info.numAttributes; ++i) {
    const schema::AttrInfo &spec = info.attributes[i];
    if (!spec.required || op->getInherentAttr(spec.name).value_or(Attribute()))
      continue;
    RuleDiagnostic diag(op, RuleId::attr_required);
    diag << "requires attribute '" << spec.name << "'";
    if (spec.numAllowed == 1)
      diag << " (" << spec.name << " = \"" << spec.allowed[0] << "\")";
    return diag;
  }
  return success();
}
