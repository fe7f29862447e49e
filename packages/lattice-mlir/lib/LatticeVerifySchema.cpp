//===- LatticeVerifySchema.cpp - generic and generated op rules ----------===//
//
// The two table-driven layers of the lattice op verifier (see
// LatticeVerifyRules.h): the generic rules every op obeys, read from the
// generated schema tables (value kinds, weight families, undeclared
// attributes, attribute values, element-type agreement, required
// attributes), and the generated rules each op declares in the schema
// (RuleUse tables: stride divisibility and targets, same stride, same shape,
// absent attributes, dense weights, weight layout and packing, the int32
// geometry bound).  Also the forward stride analysis the stride rules read.
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

std::optional<Triple> verify::multiplyTriple(const Triple &a, const Triple &b) {
  return multiply(a, b);
}

std::optional<Triple> verify::divideTriple(const Triple &a, const Triple &b) {
  return divide(a, b);
}

//===----------------------------------------------------------------------===//
// Generated rules: the standard checks each op declares in the schema.
//===----------------------------------------------------------------------===//

namespace {

const char *const kAxes[] = {"x", "y", "z"};

bool weightIsPacked(Value weight) {
  auto type = llvm::dyn_cast<WeightType>(weight.getType());
  bool packed = type && !isFloatDtype(type.getDtype());
  if (Operation *def = weight.getDefiningOp())
    if (def->getName().getStringRef() == "lattice.weight")
      if (auto packing = llvm::dyn_cast_or_null<PackingAttr>(
              def->getInherentAttr("packing").value_or(Attribute())))
        packed = packed || packing.getBits() != PackingBits::dense;
  return packed;
}

/// The derived output stride of a stride-changing op (x stride or / stride),
/// nullopt when unknown or not derivable.
std::optional<Triple> derivedStride(Operation *op, const schema::OpInfo &info, const Triple &in) {
  std::optional<Triple> s = tripleAttr(op, "stride");
  if (info.stride == schema::StrideRule::input)
    return in;
  if (!s)
    return std::nullopt;
  if (info.stride == schema::StrideRule::multiply)
    return multiply(in, *s);
  if (info.stride == schema::StrideRule::divide)
    return divide(in, *s);
  return std::nullopt;
}

/// geometry.int32: every coordinate quantity the attributes imply fits int32.
LogicalResult checkGeometry(Operation *op, const schema::OpInfo &info) {
  std::optional<Triple> k = tripleAttr(op, "kernel_size");
  std::optional<Triple> s = tripleAttr(op, "stride");
  Triple p = tripleAttr(op, "padding", 0).value_or(Triple{0, 0, 0});
  Triple d = tripleAttr(op, "dilation").value_or(Triple{1, 1, 1});
  std::optional<Triple> in;
  if (Value input = operandNamed(op, "input"))
    in = staticStrideOf(input);
  // The finer of the op's two strides: a tap's offset is counted in it.
  std::optional<Triple> fine = in;
  if (in && info.stride == schema::StrideRule::divide && s)
    fine = divide(*in, *s);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (int axis = 0; axis < 3; ++axis) {
    auto fail = [&](const char *what, int64_t value, bool overflowed) -> LogicalResult {
      RuleDiagnostic diag(op, RuleId::geometry_int32);
      diag << what << " = ";
      if (overflowed)
        diag << "more than 2^63";
      else
        diag << value;
      return diag << " on axis " << kAxes[axis] << " exceeds 2147483647";
    };
    int64_t reach = 0;
    if (k) {
      int64_t span = 0;
      bool overflow = llvm::MulOverflow((*k)[axis] - 1, d[axis], span);
      overflow = overflow || llvm::AddOverflow(span, p[axis], reach);
      if (overflow || reach > kMax)
        return fail("(kernel_size - 1) x dilation + padding", reach, overflow);
      if (s) {
        int64_t cell = 0;
        bool over = llvm::MulOverflow((*s)[axis], (*k)[axis], cell);
        if (over || cell > kMax)
          return fail("stride x kernel_size", cell, over);
      }
    }
    if (in && s && info.stride == schema::StrideRule::multiply) {
      int64_t out = 0;
      bool over = llvm::MulOverflow((*in)[axis], (*s)[axis], out);
      if (over || out > kMax)
        return fail("output stride (input stride x stride)", out, over);
    }
    if (fine && k) {
      int64_t physical = 0;
      bool over = llvm::MulOverflow((*fine)[axis], reach, physical);
      if (over || physical > kMax)
        return fail("physical tap reach (stride of the finer side x ((kernel_size - 1) x "
                    "dilation + padding))",
                    physical, over);
    }
  }
  return success();
}

LogicalResult checkWeightOp(Operation *op, schema::RuleCheck check) {
  auto weight = llvm::dyn_cast<WeightOp>(op);
  if (!weight)
    return success();
  auto type = weight.getResult().getType();
  WeightFamily family = type.getFamily();
  std::string dtype = describeDtype(type.getDtype());
  std::optional<PackingAttr> packing = weight.getPacking();
  bool packed = packing && packing->getBits() != PackingBits::dense;
  bool packedDtype = !isFloatDtype(type.getDtype());
  switch (check) {
  case schema::RuleCheck::weight_layout:
    if (weight.getLayout() != familyLayout(family))
      return RuleDiagnostic(op, RuleId::weight_layout)
             << "declares layout " << stringifyEnum(weight.getLayout())
             << " for a weight of family " << stringifyEnum(family) << "; weights of family "
             << stringifyEnum(family) << " use layout " << stringifyEnum(familyLayout(family));
    return success();
  case schema::RuleCheck::weight_packed_dtype:
    if (packedDtype && !packed)
      return RuleDiagnostic(op, RuleId::weight_packed_dtype)
             << "has packed element type " << dtype << " but no packed packing attribute";
    return success();
  case schema::RuleCheck::weight_packable:
    if (packed && !familyPackable(family))
      return RuleDiagnostic(op, RuleId::weight_packable)
             << "packs a weight of family " << stringifyEnum(family)
             << ", which is never quantized";
    return success();
  case schema::RuleCheck::weight_packing_bits: {
    // A packed weight declares its packed integer type, or (as upstream's
    // producer writes) the float type its values dequantize to.
    if (!packed || !packedDtype)
      return success();
    const char *want = schema::packedDtypeOfBits(stringifyEnum(packing->getBits()));
    if (!want || dtype != want)
      return RuleDiagnostic(op, RuleId::weight_packing_bits)
             << "packing bits " << stringifyEnum(packing->getBits())
             << " do not match element type " << dtype;
    return success();
  }
  default:
    return success();
  }
}

LogicalResult checkRuleUse(Operation *op, const schema::OpInfo &info, const schema::RuleUse &use) {
  using schema::RuleCheck;
  switch (use.check) {
  case RuleCheck::absent_attrs: {
    bool found =
        (use.a && op->getDiscardableAttr(use.a)) || (use.b && op->getDiscardableAttr(use.b));
    if (!found)
      return success();
    RuleDiagnostic diag(op, use.rule);
    diag << "takes no " << use.a;
    if (use.b)
      diag << " or " << use.b;
    return diag;
  }
  case RuleCheck::stride_divides: {
    std::optional<Triple> in = staticStrideOf(operandNamed(op, use.a));
    std::optional<Triple> s = tripleAttr(op, "stride");
    if (in && s && !divide(*in, *s))
      return RuleDiagnostic(op, use.rule)
             << "input stride " << tripleText(*in) << " is not divisible by the op stride "
             << tripleText(*s) << " (the output stride is input stride / stride)";
    return success();
  }
  case RuleCheck::stride_target: {
    Value target = operandNamed(op, use.b);
    std::optional<Triple> in = staticStrideOf(operandNamed(op, use.a));
    std::optional<Triple> have = target ? staticStrideOf(target) : std::nullopt;
    if (!in || !have)
      return success();
    std::optional<Triple> want = derivedStride(op, info, *in);
    std::optional<Triple> s = tripleAttr(op, "stride");
    if (info.stride == schema::StrideRule::divide && !want)
      return success(); // stride.divides reports it
    if (want && *want == *have)
      return success();
    RuleDiagnostic diag(op, use.rule);
    diag << "target stride " << tripleText(*have) << " must equal input stride " << tripleText(*in);
    if (s)
      diag << (info.stride == schema::StrideRule::divide ? " / stride " : " x stride ")
           << tripleText(*s);
    if (want)
      diag << " = " << tripleText(*want);
    return diag;
  }
  case RuleCheck::stride_same: {
    std::optional<Triple> a = staticStrideOf(operandNamed(op, use.a));
    std::optional<Triple> b = staticStrideOf(operandNamed(op, use.b));
    if (a && b && *a != *b)
      return RuleDiagnostic(op, use.rule)
             << "operands must share a stride: '" << use.a << "' is at " << tripleText(*a)
             << " but '" << use.b << "' is at " << tripleText(*b)
             << "; coordinate-aligned ops match rows at one stride";
    return success();
  }
  case RuleCheck::shape_same: {
    Value in = operandNamed(op, use.a);
    if (!in || op->getNumResults() == 0)
      return success();
    Type result = op->getResult(0).getType();
    if (in.getType() != result)
      return RuleDiagnostic(op, use.rule)
             << "result type " << typeText(result) << " must equal the input type "
             << typeText(in.getType()) << " (the op maps each feature row to a row of the same "
             << "width)";
    return success();
  }
  case RuleCheck::dense_weight: {
    Value weight = operandNamed(op, use.a);
    if (weight && weightIsPacked(weight))
      return RuleDiagnostic(op, use.rule)
             << "takes a packed (quantized) weight; a weight-normalised convolution divides by "
                "the weight's own squared mass";
    return success();
  }
  case RuleCheck::geometry_int32:
    return checkGeometry(op, info);
  case RuleCheck::weight_layout:
  case RuleCheck::weight_packable:
  case RuleCheck::weight_packed_dtype:
  case RuleCheck::weight_packing_bits:
    return checkWeightOp(op, use.check);
  }
  return success();
}

} // namespace

LogicalResult verify::verifyGeneratedRules(Operation *op, const schema::OpInfo &info, bool early) {
  for (unsigned i = 0; i < info.numRules; ++i) {
    const schema::RuleUse &use = info.rules[i];
    if ((use.check == schema::RuleCheck::absent_attrs) != early)
      continue;
    if (failed(checkRuleUse(op, info, use)))
      return failure();
  }
  return success();
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
