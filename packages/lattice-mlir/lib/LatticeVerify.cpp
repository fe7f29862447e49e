//===- LatticeVerify.cpp - op verifiers -----------------------------------===//
//
// The entry of every lattice op's verifier (detail::verifyLatticeOp, called
// from the generated Op::verify()) and the exotic rules the schema cannot
// state as a standard kind: row agreement of sparse.make, linear and the
// point ops, global_pool's batch rows, activation's approximation, cast's
// conversions, call's primitive signatures and the weight's storage names.
// Each diagnostic is a RuleDiagnostic tagged with its rule ID from the
// generated rule table.  The table-driven layers (generic and generated
// rules, the stride analysis) are in LatticeVerifySchema.cpp; the order is:
// generated early rules (absent attributes), generic rules, generated rules,
// these hand-written rules, then required attributes.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"
#include "lattice/LatticeVerifyExtraOps.h"
#include "lattice/LatticeVerifyRules.h"

using namespace mlir;
using namespace mlir::lattice;
using schema::RuleId;
using verify::isFloatDtype;

namespace {

std::string typeText(Type type) { return describeDtype(type); }

/// Ops without hand-written rules.
LogicalResult verifyRules(Operation *) { return success(); }

LogicalResult verifyRules(WeightOp op) {
  if (op.getStorageKey().empty())
    return RuleDiagnostic(op, RuleId::weight_storage_key) << "has an empty storage_key";
  if (op.getSymName().empty())
    return RuleDiagnostic(op, RuleId::weight_storage_key) << "has an empty symbol name";
  return success();
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
    return RuleDiagnostic(op, RuleId::make_rows)
           << "coords has " << coords.getDimSize(0) << " rows but features has "
           << features.getDimSize(0);
  return success();
}

LogicalResult verifyRules(ActivationOp op) {
  if (op.getKind() != ActivationKind::gelu && op.getApproximate() != GeluApprox::none)
    return RuleDiagnostic(op, RuleId::activation_approximate)
           << "approximate = " << stringifyEnum(op.getApproximate())
           << " applies only to gelu, but kind is " << stringifyEnum(op.getKind());
  return success();
}

LogicalResult verifyRules(LinearOp op) {
  auto in = llvm::cast<RankedTensorType>(op.getInput().getType());
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (!sameDim(in, out, 0))
    return RuleDiagnostic(op, RuleId::linear_rows)
           << "result rows (" << typeText(out) << ") must equal input rows (" << typeText(in)
           << "); linear maps each row to one row";
  return success();
}

LogicalResult verifyRules(GlobalPoolOp op) {
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  int64_t batch = static_cast<int64_t>(op.getBatchSize());
  if (batch == -1 && !out.isDynamicDim(0))
    return RuleDiagnostic(op, RuleId::global_pool_rows)
           << "result " << typeText(out)
           << " has static rows but batch_size = -1 infers the batch count at run time";
  if (batch >= 0 && !out.isDynamicDim(0) && out.getDimSize(0) != batch)
    return RuleDiagnostic(op, RuleId::global_pool_rows)
           << "result " << typeText(out) << " must have batch_size = " << batch
           << " rows (one per batch item)";
  return success();
}

/// Point ops: every point-indexed tensor has one row per point.
LogicalResult verifyRowsPerPoint(Operation *op, llvm::ArrayRef<Value> values) {
  auto first = llvm::cast<RankedTensorType>(values.front().getType());
  for (Value value : values.drop_front())
    if (!rowsCompatible(first, llvm::cast<RankedTensorType>(value.getType())))
      return RuleDiagnostic(op, RuleId::rows_per_point)
             << "has " << typeText(first) << " and " << typeText(value.getType())
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
    return RuleDiagnostic(op, RuleId::cast_float)
           << "converts between float types only (f16, bf16, f32), got " << typeText(in) << " -> "
           << typeText(out);
  if (in.getShape() != out.getShape())
    return RuleDiagnostic(op, RuleId::cast_shape)
           << "changes only the element type: shape of " << typeText(out) << " must equal that of "
           << typeText(in);
  return success();
}

LogicalResult verifyRules(CallOp op) {
  llvm::StringRef callee = op.getCallee();
  const schema::PrimitiveInfo *prim = schema::lookupPrimitive(callee);
  if (!prim) {
    RuleDiagnostic diag(op, RuleId::call_registered);
    diag << "calls unregistered primitive '" << callee << "'; registered primitives: ";
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
    return RuleDiagnostic(op, RuleId::call_signature)
           << "primitive '" << callee << "' takes " << prim->numInputs << " operands, got "
           << op.getInputs().size() << "; its signature is " << signature();
  for (unsigned i = 0; i < prim->numInputs; ++i) {
    auto type = llvm::cast<RankedTensorType>(op.getInputs()[i].getType());
    if (describeDtype(type.getElementType()) != prim->inputs[i] ||
        type.getRank() != prim->inputRanks[i])
      return RuleDiagnostic(op, RuleId::call_signature)
             << "operand #" << i << " of primitive '" << callee << "' is " << typeText(type)
             << "; its signature is " << signature();
  }
  auto out = llvm::cast<RankedTensorType>(op.getResult().getType());
  if (describeDtype(out.getElementType()) != prim->output || out.getRank() != prim->outputRank)
    return RuleDiagnostic(op, RuleId::call_signature)
           << "result of primitive '" << callee << "' is " << typeText(out) << "; its signature is "
           << signature();
  return success();
}

} // namespace

namespace mlir::lattice::detail {
template <typename OpT> LogicalResult verifyLatticeOp(OpT op, const schema::OpInfo &info) {
  Operation *raw = op.getOperation();
  beginStrideVerification(raw);
  if (failed(verify::verifyGeneratedRules(raw, info, /*early=*/true)) ||
      failed(verify::verifyAgainstSchema(raw, info)) ||
      failed(verify::verifyGeneratedRules(raw, info, /*early=*/false)) || failed(verifyRules(op)))
    return failure();
  return verify::verifyRequiredLast(raw, info);
}
} // namespace mlir::lattice::detail

#define LATTICE_SCHEMA_OP_VERIFIERS
#include "LatticeSchema.cpp.inc"
