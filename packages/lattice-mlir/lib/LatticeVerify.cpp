//===- LatticeVerify.cpp - op verifiers -----------------------------------===//
//
// Verification of lattice ops in two layers:
//
//  * verifyAgainstSchema: driven entirely by the generated schema tables
//    (LatticeSchema.h): value kinds of operands and results, weight families,
//    attribute minimums and closed value sets, unknown attributes, and the
//    element-type agreement of sparse, feature and dense weight values.
//  * verifyRules overloads: what the schema cannot say, written against the
//    generated op classes (stride propagation, weight layout agreement,
//    packing, the generative op's geometry, primitive signatures, ...).
//
// Verifiers may see IR whose other ops are not verified yet (they run in
// program order and forward references can even form cycles), so anything
// that looks beyond the op itself uses the raw Operation API with explicit
// bounds and null checks and never an ODS accessor of another op.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"
#include "lattice/LatticeVerifyExtraOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::lattice;

namespace {

//===----------------------------------------------------------------------===//
// Small helpers.
//===----------------------------------------------------------------------===//

std::string typeText(Type type) { return describeDtype(type); }

std::string tripleText(llvm::ArrayRef<int64_t> t) {
  std::string out = "(";
  for (size_t i = 0; i < t.size(); ++i)
    out += (i ? ", " : "") + std::to_string(t[i]);
  return out + ")";
}

std::string numberText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

bool isFloatDtype(Type t) { return t && (t.isF16() || t.isBF16() || t.isF32()); }

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
/// families in the bit set).  Returns the reason when it is not.
std::optional<std::string> kindMismatch(Type type, schema::TypeKind kind, uint32_t families) {
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
      return op->emitOpError() << "attribute '" << spec.name
                               << "' must be a triple array<i64: x, y, z> (one value per axis), "
                                  "got "
                               << array.size() << " values; write all three axes";
    if (spec.hasMinimum)
      for (int64_t v : array.asArrayRef())
        if (static_cast<double>(v) < spec.minimum)
          return op->emitOpError()
                 << "attribute '" << spec.name << "' = " << tripleText(array.asArrayRef())
                 << " must have every component >= " << static_cast<int64_t>(spec.minimum)
                 << "; fix the " << spec.name << " of the exported layer";
    for (int64_t v : array.asArrayRef())
      if (v > std::numeric_limits<int32_t>::max())
        return op->emitOpError()
               << "attribute '" << spec.name << "' = " << tripleText(array.asArrayRef())
               << " has a component above 2147483647; coordinates are int32, so no "
                  "stride, kernel size, padding or dilation can be larger";
    return success();
  }
  case AttrKind::i64: {
    auto integer = llvm::dyn_cast<IntegerAttr>(attr);
    if (!integer)
      return success();
    if (spec.hasMinimum && static_cast<double>(integer.getInt()) < spec.minimum)
      return op->emitOpError() << "attribute '" << spec.name << "' = " << integer.getInt()
                               << " must be >= " << static_cast<int64_t>(spec.minimum);
    if (spec.numAllowed == 0)
      return success();
    std::string text = std::to_string(integer.getInt());
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      if (text == spec.allowed[i])
        return success();
    InFlightDiagnostic diag = op->emitOpError() << "attribute '" << spec.name << "' = " << text
                                                << " is not allowed; it must be ";
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      diag << (i ? " or " : "") << spec.allowed[i];
    return diag;
  }
  case AttrKind::f64_triple: {
    auto array = llvm::dyn_cast<DenseF64ArrayAttr>(attr);
    if (!array)
      return success(); // ODS reports the wrong attribute type.
    if (array.size() != 3)
      return op->emitOpError() << "attribute '" << spec.name
                               << "' must be a triple array<f64: x, y, z> (one value per axis), "
                                  "got "
                               << array.size() << " values; write all three axes";
    for (double v : array.asArrayRef()) {
      if (!std::isfinite(v))
        return op->emitOpError() << "attribute '" << spec.name
                                 << "' must hold finite values, got a NaN or infinity";
      if (spec.hasMinimum && (spec.exclusiveMinimum ? !(v > spec.minimum) : !(v >= spec.minimum)))
        return op->emitOpError() << "attribute '" << spec.name << "' has component "
                                 << numberText(v) << "; every component must be "
                                 << (spec.exclusiveMinimum ? "> " : ">= ")
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
      return op->emitOpError() << "attribute '" << spec.name
                               << "' must be a finite f32, got a NaN or infinity";
    if (spec.hasMinimum && (spec.exclusiveMinimum ? !(v > spec.minimum) : !(v >= spec.minimum)))
      return op->emitOpError() << "attribute '" << spec.name << "' = " << numberText(v)
                               << " must be " << (spec.exclusiveMinimum ? "> " : ">= ")
                               << numberText(spec.minimum);
    return success();
  }
  case AttrKind::string: {
    auto text = llvm::dyn_cast<StringAttr>(attr);
    if (!text || spec.numAllowed == 0)
      return success();
    for (unsigned i = 0; i < spec.numAllowed; ++i)
      if (text.getValue() == spec.allowed[i])
        return success();
    InFlightDiagnostic diag = op->emitOpError()
                              << "attribute '" << spec.name << "' = \"" << text.getValue()
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

LogicalResult verifyAgainstSchema(Operation *op, const schema::OpInfo &info) {
  // Attributes the op does not declare would be silently ignored downstream.
  for (NamedAttribute named : op->getDiscardableAttrs())
    return op->emitOpError() << "has no attribute '" << named.getName().getValue()
                             << "'; it accepts: " << joinNames(info.attributes, info.numAttributes)
                             << " (remove the attribute)";

  // Operand and result kinds.
  LogicalResult result = success();
  unsigned position = 0;
  forEachOperand(op, info, [&](Value value, const schema::ValueInfo &entry) {
    ++position;
    if (failed(result))
      return;
    if (std::optional<std::string> why = kindMismatch(value.getType(), entry.kind, entry.families))
      result = op->emitOpError() << "operand '" << entry.name << "' (#" << position - 1
                                 << ") must be " << *why;
  });
  if (failed(result))
    return failure();
  for (unsigned i = 0; i < op->getNumResults() && i < info.numResults; ++i) {
    const schema::ValueInfo &entry = info.results[i];
    if (std::optional<std::string> why =
            kindMismatch(op->getResult(i).getType(), entry.kind, entry.families))
      return op->emitOpError() << "result '" << entry.name << "' must be " << *why;
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
    return op->emitOpError() << "mixes element types: '" << commonName << "' stores "
                             << typeText(common) << " but '" << name << "' stores "
                             << typeText(element)
                             << "; sparse values, features and dense weights of one op must share "
                                "an element type (convert with lattice.cast or store the weight in "
                             << typeText(common) << ")";
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

std::optional<Triple> tripleAttr(Operation *op, llvm::StringRef name) {
  std::optional<Attribute> attr = op->getInherentAttr(name);
  auto array = llvm::dyn_cast_or_null<DenseI64ArrayAttr>(attr.value_or(Attribute()));
  if (!array || array.size() != 3)
    return std::nullopt;
  Triple out;
  for (int i = 0; i < 3; ++i) {
    out[i] = array[i];
    if (out[i] <= 0)
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

//===----------------------------------------------------------------------===//
// Per-op rules.
//===----------------------------------------------------------------------===//

namespace {

/// Ops without extra rules.
LogicalResult verifyRules(Operation *) { return success(); }
/// Ops without rules that must run before the schema checks.
LogicalResult preRules(Operation *) { return success(); }

LogicalResult preRules(GenerativeConvTranspose3dOp op) {
  if (op->getDiscardableAttr("padding") || op->getDiscardableAttr("dilation"))
    return op.emitOpError()
           << "takes no padding or dilation: the generative transpose emits o = c*s + k for "
              "every tap (padding 0, dilation 1 implied); drop the attribute, or use "
              "lattice.conv_transpose3d for a padded or dilated transpose";
  return success();
}

LogicalResult preRules(SubmConv3dOp op) {
  if (op->getDiscardableAttr("stride") || op->getDiscardableAttr("padding"))
    return op.emitOpError()
           << "takes no stride or padding: a submanifold convolution keeps exactly its input's "
              "rows and stride; drop the attribute, or use lattice.conv3d for a strided or "
              "support-generating convolution";
  return success();
}

WeightLayout expectedLayout(WeightFamily family) {
  switch (family) {
  case WeightFamily::conv3d:
    return WeightLayout::conv3d_o_xyz_i;
  case WeightFamily::linear:
    return WeightLayout::linear_o_i;
  case WeightFamily::bias:
    return WeightLayout::bias_c;
  case WeightFamily::channel:
    return WeightLayout::channel_c;
  case WeightFamily::embedding:
    return WeightLayout::embedding_n_c;
  }
  return WeightLayout::conv3d_o_xyz_i;
}

LogicalResult verifyRules(WeightOp op) {
  auto type = op.getResult().getType();
  WeightFamily family = type.getFamily();
  if (op.getLayout() != expectedLayout(family))
    return op.emitOpError() << "declares layout " << stringifyEnum(op.getLayout())
                            << " for a weight of family " << stringifyEnum(family)
                            << "; weights of family " << stringifyEnum(family) << " use layout "
                            << stringifyEnum(expectedLayout(family));
  if (op.getStorageKey().empty())
    return op.emitOpError() << "has an empty storage_key; name the safetensors entry it reads";
  if (op.getSymName().empty())
    return op.emitOpError() << "has an empty symbol name";
  std::string dtype = describeDtype(type.getDtype());
  std::optional<PackingAttr> packing = op.getPacking();
  bool packed = packing && packing->getBits() != PackingBits::dense;
  bool packedDtype = !isFloatDtype(type.getDtype());
  if (packedDtype && !packed)
    return op.emitOpError() << "has packed element type " << dtype
                            << " but no packed packing attribute; add packing = "
                               "#lattice.packing<"
                            << (dtype == "i4" ? "int4" : "int8")
                            << ", group_size = N, scale_dtype = T, mode = affine>";
  if (!packed)
    return success();
  if (family != WeightFamily::conv3d && family != WeightFamily::linear)
    return op.emitOpError() << "packs a weight of family " << stringifyEnum(family)
                            << "; only conv3d and linear weights are quantized (groups run "
                               "along C_in), store "
                            << stringifyEnum(family)
                            << " weights dense (packing = #lattice.packing<dense>)";
  // A packed weight declares its packed integer type, or (as upstream's
  // producer writes) the float type its values dequantize to.
  const char *want = schema::packedDtypeOfBits(stringifyEnum(packing->getBits()));
  if (packedDtype && (!want || dtype != want))
    return op.emitOpError() << "packing bits " << stringifyEnum(packing->getBits())
                            << " do not match element type " << dtype << "; use "
                            << (want ? want : "?") << " for " << stringifyEnum(packing->getBits())
                            << " packing, or the float type the weight dequantizes to";
  return success();
}

/// Convolution-family ops: the result stores the input's element type (the
/// schema homogeneity check) and the stride must chain.
template <typename OpT> LogicalResult verifyTransposeStride(OpT op) {
  std::optional<Triple> in = staticStrideOf(op.getInput());
  if (!in)
    return success();
  Triple s{op.getStride()[0], op.getStride()[1], op.getStride()[2]};
  if (!divide(*in, s))
    return op.emitOpError() << "input stride " << tripleText(*in)
                            << " is not divisible by the op stride " << tripleText(s)
                            << "; a transposed convolution's output stride is input stride / "
                               "stride, so lower the stride or transpose a coarser input";
  return success();
}

/// Support-generating ops: the output stride input x stride must stay a
/// valid int32 coordinate scale.
template <typename OpT> LogicalResult verifyScaledStride(OpT op) {
  std::optional<Triple> in = staticStrideOf(op.getInput());
  Triple s{op.getStride()[0], op.getStride()[1], op.getStride()[2]};
  if (in && !multiply(*in, s))
    return op.emitOpError() << "output stride input " << tripleText(*in) << " x stride "
                            << tripleText(s) << " leaves the int32 coordinate range";
  return success();
}

LogicalResult verifyRules(Conv3dOp op) { return verifyScaledStride(op); }
LogicalResult verifyRules(FullConv3dOp op) { return verifyScaledStride(op); }
LogicalResult verifyRules(Pool3dOp op) { return verifyScaledStride(op); }
LogicalResult verifyRules(FullPool3dOp op) { return verifyScaledStride(op); }

LogicalResult verifyRules(TargetConv3dOp op) {
  std::optional<Triple> in = staticStrideOf(op.getInput());
  std::optional<Triple> target = staticStrideOf(op.getTarget());
  if (!in || !target)
    return success();
  Triple s{op.getStride()[0], op.getStride()[1], op.getStride()[2]};
  std::optional<Triple> want = multiply(*in, s);
  if (!want || *want != *target)
    return op.emitOpError() << "target stride " << tripleText(*target)
                            << " must equal input stride " << tripleText(*in) << " x stride "
                            << tripleText(s) << (want ? " = " + tripleText(*want) : "")
                            << "; pass a target at the convolution's output stride or fix stride";
  return success();
}

LogicalResult verifyRules(ConvTranspose3dOp op) { return verifyTransposeStride(op); }

LogicalResult verifyRules(TargetConvTranspose3dOp op) {
  if (failed(verifyTransposeStride(op)))
    return failure();
  std::optional<Triple> in = staticStrideOf(op.getInput());
  std::optional<Triple> target = staticStrideOf(op.getTarget());
  if (!in || !target)
    return success();
  Triple s{op.getStride()[0], op.getStride()[1], op.getStride()[2]};
  std::optional<Triple> want = divide(*in, s);
  if (want && *want != *target)
    return op.emitOpError() << "target stride " << tripleText(*target)
                            << " must equal input stride " << tripleText(*in) << " / stride "
                            << tripleText(s) << " = " << tripleText(*want)
                            << "; pass the input of the paired strided convolution as target";
  return success();
}

LogicalResult verifyRules(GenerativeConvTranspose3dOp op) { return verifyTransposeStride(op); }

template <typename OpT>
LogicalResult verifySameStride(OpT op, Value lhs, Value rhs, llvm::StringRef lhsName,
                               llvm::StringRef rhsName) {
  std::optional<Triple> a = staticStrideOf(lhs);
  std::optional<Triple> b = staticStrideOf(rhs);
  if (a && b && *a != *b)
    return op.emitOpError() << "operands must share a stride: '" << lhsName << "' is at "
                            << tripleText(*a) << " but '" << rhsName << "' is at " << tripleText(*b)
                            << "; coordinate-aligned ops match rows at one stride (bring both to "
                               "one stride with a convolution or pooling first)";
  return success();
}

LogicalResult verifyRules(SparseBinaryOp op) {
  return verifySameStride(op, op.getLhs(), op.getRhs(), "lhs", "rhs");
}
LogicalResult verifyRules(SparseCatOp op) {
  return verifySameStride(op, op.getLhs(), op.getRhs(), "lhs", "rhs");
}
LogicalResult verifyRules(SparseReindexOp op) {
  return verifySameStride(op, op.getInput(), op.getTarget(), "input", "target");
}

bool sameDim(RankedTensorType a, RankedTensorType b, unsigned dim) {
  return a.getDimSize(dim) == b.getDimSize(dim);
}

/// Rows of two tensors must agree where both are static.
bool rowsCompatible(RankedTensorType a, RankedTensorType b) {
  return a.isDynamicDim(0) || b.isDynamicDim(0) || sameDim(a, b, 0);
}

LogicalResult verifyRules(SparseMakeOp op) {
  auto coords = llvm::cast<RankedTensorType>(op.getCoords().getType());
  auto features = llvm::cast<RankedTensorType>(op.getFeatures().getType());
  if (!rowsCompatible(coords, features))
    return op.emitOpError() << "coords has " << coords.getDimSize(0) << " rows but features has "
                            << features.getDimSize(0)
                            << "; row i of features belongs to row i "
                               "of coords";
  return success();
}

/// Feature-only ops that keep the shape: result type == input type.
template <typename OpT> LogicalResult verifySameShape(OpT op) {
  if (op.getInput().getType() != op.getResult().getType())
    return op.emitOpError() << "result type " << typeText(op.getResult().getType())
                            << " must equal the input type " << typeText(op.getInput().getType())
                            << " (the op maps each feature row to a row of the same width)";
  return success();
}

LogicalResult verifyRules(ActivationOp op) {
  if (failed(verifySameShape(op)))
    return failure();
  if (op.getKind() != ActivationKind::gelu && op.getApproximate() != GeluApprox::none)
    return op.emitOpError() << "approximate = " << stringifyEnum(op.getApproximate())
                            << " applies only to gelu, but kind is " << stringifyEnum(op.getKind())
                            << "; use approximate = #lattice.gelu_approx<none>";
  return success();
}
LogicalResult verifyRules(BatchNormOp op) { return verifySameShape(op); }
LogicalResult verifyRules(LayerNormOp op) { return verifySameShape(op); }
LogicalResult verifyRules(RmsNormOp op) { return verifySameShape(op); }
LogicalResult verifyRules(SoftmaxOp op) { return verifySameShape(op); }

LogicalResult verifyRules(LinearOp op) {
  auto in = llvm::cast<RankedTensorType>(op.getInput().getType());
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (!sameDim(in, out, 0))
    return op.emitOpError() << "result rows (" << typeText(out) << ") must equal input rows ("
                            << typeText(in) << "); linear maps each row to one row";
  return success();
}

LogicalResult verifyRules(GlobalPoolOp op) {
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  int64_t batch = static_cast<int64_t>(op.getBatchSize());
  if (batch == -1 && !out.isDynamicDim(0))
    return op.emitOpError() << "result " << typeText(out)
                            << " has static rows but batch_size = -1 infers the batch count at "
                               "run time; write tensor<?xCxT>";
  if (batch >= 0 && !out.isDynamicDim(0) && out.getDimSize(0) != batch)
    return op.emitOpError() << "result " << typeText(out) << " must have batch_size = " << batch
                            << " rows (one per batch item); write tensor<" << batch
                            << "xCxT> or tensor<?xCxT>";
  return success();
}

/// Point ops: every point-indexed tensor has one row per point.
LogicalResult verifyRowsPerPoint(Operation *op, llvm::ArrayRef<Value> values) {
  auto first = llvm::cast<RankedTensorType>(values.front().getType());
  for (Value value : values.drop_front())
    if (!rowsCompatible(first, llvm::cast<RankedTensorType>(value.getType())))
      return op->emitOpError() << "has " << typeText(first) << " and " << typeText(value.getType())
                               << ", but every point-indexed tensor needs one row per point";
  return success();
}

LogicalResult verifyRules(VoxelizeOp op) {
  return verifyRowsPerPoint(op, {op.getPoints(), op.getFeatures(), op.getBatchIndices()});
}

LogicalResult verifyRules(DevoxelizeOp op) {
  return verifyRowsPerPoint(op, {op.getPoints(), op.getBatchIndices(), op.getResult()});
}

LogicalResult verifyRules(CastOp op) {
  auto in = llvm::cast<RankedTensorType>(op.getInput().getType());
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (!isFloatDtype(in.getElementType()) || !isFloatDtype(out.getElementType()))
    return op.emitOpError() << "converts between float types only (f16, bf16, f32), got "
                            << typeText(in) << " -> " << typeText(out)
                            << "; integer conversions are registered primitives (lattice.call)";
  if (in.getShape() != out.getShape())
    return op.emitOpError() << "changes only the element type: shape of " << typeText(out)
                            << " must equal that of " << typeText(in);
  return success();
}

LogicalResult verifyRules(CallOp op) {
  llvm::StringRef callee = op.getCallee();
  const schema::PrimitiveInfo *prim = schema::lookupPrimitive(callee);
  if (!prim) {
    InFlightDiagnostic diag = op.emitOpError() << "calls unregistered primitive '" << callee
                                               << "'; registered primitives: ";
    for (unsigned i = 0; i < schema::kNumPrimitives; ++i)
      diag << (i ? ", " : "") << schema::kPrimitives[i].name;
    return diag;
  }
  auto signature = [&]() {
    std::string text = "(";
    for (unsigned i = 0; i < prim->numInputs; ++i)
      text += (i ? ", " : "") + std::string("rank-") + std::to_string(prim->inputRanks[i]) + " " +
              prim->inputs[i];
    return text + ") -> rank-" + std::to_string(prim->outputRank) + " " + prim->output;
  };
  if (op.getInputs().size() != prim->numInputs)
    return op.emitOpError() << "primitive '" << callee << "' takes " << prim->numInputs
                            << " operands, got " << op.getInputs().size() << "; its signature is "
                            << signature();
  for (unsigned i = 0; i < prim->numInputs; ++i) {
    auto type = llvm::cast<RankedTensorType>(op.getInputs()[i].getType());
    if (describeDtype(type.getElementType()) != prim->inputs[i] ||
        type.getRank() != prim->inputRanks[i])
      return op.emitOpError() << "operand #" << i << " of primitive '" << callee << "' is "
                              << typeText(type) << "; its signature is " << signature();
  }
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (describeDtype(out.getElementType()) != prim->output || out.getRank() != prim->outputRank)
    return op.emitOpError() << "result of primitive '" << callee << "' is " << typeText(out)
                            << "; its signature is " << signature();
  return success();
}

/// Required attributes ODS leaves to us (tablegen's CHECKED_LATE): their
/// absence is reported only after every other rule of the op.
LogicalResult verifyRequiredLast(Operation *op, const schema::OpInfo &info) {
  for (unsigned i = 0; i < info.numAttributes; ++i) {
    const schema::AttrInfo &spec = info.attributes[i];
    if (!spec.required || op->getInherentAttr(spec.name).value_or(Attribute()))
      continue;
    InFlightDiagnostic diag = op->emitOpError() << "requires attribute '" << spec.name << "'";
    if (spec.numAllowed == 1)
      diag << "; add " << spec.name << " = \"" << spec.allowed[0] << "\"";
    return diag;
  }
  return success();
}

LogicalResult verifyAgainstSchemaChecked(Operation *op, const schema::OpInfo &info) {
  return verifyAgainstSchema(op, info);
}

} // namespace

namespace mlir::lattice::detail {
template <typename OpT> LogicalResult verifyLatticeOp(OpT op, const schema::OpInfo &info) {
  beginStrideVerification(op.getOperation());
  if (failed(preRules(op)) || failed(verifyAgainstSchemaChecked(op.getOperation(), info)) ||
      failed(verifyRules(op)))
    return failure();
  return verifyRequiredLast(op.getOperation(), info);
}
} // namespace mlir::lattice::detail

#define LATTICE_SCHEMA_OP_VERIFIERS
#include "LatticeSchema.cpp.inc"
