//===- LatticeVerifyGenerated.cpp - the generated per-op rules ------------===//
//
// The standard rule kinds each op declares in the schema (RuleUse tables the
// generator emits, lattice_contract.dialect.rules.RuleCheck): absent
// attributes, stride divisibility, target strides, same stride, same shape,
// dense weights, the weight op's layout and packing, and the int32 geometry
// bound.  Every diagnostic is a RuleDiagnostic of the use's rule.  Like the
// generic layer, anything beyond the op itself is read through the raw
// accessors of LatticeVerifyRules.h (other ops may not be verified yet).
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeVerifyRules.h"

#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::lattice;
using schema::RuleId;
using verify::isFloatDtype;
using verify::operandNamed;
using verify::tripleAttr;
using verify::tripleText;

namespace {
std::string typeText(Type type) { return describeDtype(type); }
} // namespace

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
    return verify::multiplyTriple(in, *s);
  if (info.stride == schema::StrideRule::divide)
    return verify::divideTriple(in, *s);
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
    fine = verify::divideTriple(*in, *s);
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
    if (in && s && !verify::divideTriple(*in, *s))
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
