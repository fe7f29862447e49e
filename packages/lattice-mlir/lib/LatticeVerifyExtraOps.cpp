//===- LatticeVerifyExtraOps.cpp - rules of the lookup and elementwise ops -===//
//
// The hand-written rules of embedding_lookup and elementwise.  Everything
// else the weight-normalised convolutions, pool_transpose3d and
// trilinear_upsample3d need (no stride or padding on the submanifold form,
// no padding or dilation on the generative form, stride divisibility, target
// strides, dense weights, the int32 geometry bound) is declared on the ops in
// the schema and evaluated from the generated rule tables
// (LatticeVerifySchema.cpp).
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeVerifyExtraOps.h"

using namespace mlir;
using namespace mlir::lattice;
using schema::RuleId;

LogicalResult verifyRules(EmbeddingLookupOp op) {
  auto indices = llvm::dyn_cast<RankedTensorType>(op.getIndices().getType());
  auto result = llvm::dyn_cast<RankedTensorType>(op.getResult().getType());
  if (!indices || !result)
    return success();
  if (!result.isDynamicDim(0) && !indices.isDynamicDim(0) &&
      result.getDimSize(0) != indices.getDimSize(0))
    return RuleDiagnostic(op, RuleId::embedding_rows)
           << "returns " << result.getDimSize(0) << " rows for " << indices.getDimSize(0)
           << " indices; the result has one row per index";
  return success();
}

LogicalResult verifyRules(ElementwiseOp op) {
  auto in = llvm::dyn_cast<RankedTensorType>(op.getInput().getType());
  if (in && !in.getElementType().isF32())
    return RuleDiagnostic(op, RuleId::elementwise_f32)
           << "takes f32 features only, got " << describeDtype(in.getElementType());
  return success();
}
