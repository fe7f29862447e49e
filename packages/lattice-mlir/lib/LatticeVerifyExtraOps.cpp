//===- LatticeVerifyExtraOps.cpp - rules of the lookup, elementwise, grid ops -===//
//
// The hand-written rules of embedding_lookup, elementwise and the grid ops
// (sparse.crop's box, sparse.to_dense's result type).  Everything
// else the weight-normalised convolutions, pool_transpose3d and
// trilinear_upsample3d need (no stride or padding on the submanifold form,
// no padding or dilation on the generative form, stride divisibility, target
// strides, dense weights, the int32 geometry bound) is declared on the ops in
// the schema and evaluated from the generated rule tables
// (LatticeVerifySchema.cpp).
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeVerifyExtraOps.h"
#include "lattice/LatticeVerifyRules.h"

#include <limits>

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

LogicalResult verifyRules(SparseCropOp op) {
  Operation *raw = op.getOperation();
  constexpr int64_t kAny = std::numeric_limits<int64_t>::min();
  std::optional<Triple> lower = verify::tripleAttr(raw, "lower", kAny);
  std::optional<Triple> upper = verify::tripleAttr(raw, "upper", kAny);
  if (!lower || !upper)
    return success(); // attr.triple reports a malformed box.
  for (int axis = 0; axis < 3; ++axis)
    if ((*lower)[axis] >= (*upper)[axis])
      return RuleDiagnostic(op, RuleId::crop_box)
             << "box lower = " << verify::tripleText(*lower)
             << ", upper = " << verify::tripleText(*upper) << " is empty on axis " << "xyz"[axis]
             << "; every axis needs lower < upper";
  std::optional<Triple> stride = staticStrideOf(op.getInput());
  if (!stride)
    return success();
  for (const auto &[name, box] : {std::pair{"lower", *lower}, std::pair{"upper", *upper}})
    for (int axis = 0; axis < 3; ++axis)
      if (box[axis] % (*stride)[axis] != 0)
        return RuleDiagnostic(op, RuleId::crop_stride)
               << name << " = " << verify::tripleText(box)
               << " is not a multiple of the input's stride " << verify::tripleText(*stride)
               << " on axis " << "xyz"[axis];
  return success();
}

LogicalResult verifyRules(SparseToDenseOp op) {
  Operation *raw = op.getOperation();
  auto input = llvm::dyn_cast<SparseTensorType>(op.getInput().getType());
  auto result = llvm::dyn_cast<RankedTensorType>(op.getResult().getType());
  auto layoutAttr =
      llvm::dyn_cast_or_null<StringAttr>(raw->getInherentAttr("layout").value_or(Attribute()));
  auto batchAttr =
      llvm::dyn_cast_or_null<IntegerAttr>(raw->getInherentAttr("batch_size").value_or(Attribute()));
  std::optional<Triple> spatial = verify::tripleAttr(raw, "spatial_shape");
  if (!input || !result || !layoutAttr || !batchAttr || !spatial)
    return success(); // the generic rules report these.
  if (result.getElementType() != input.getDtype())
    return RuleDiagnostic(op, RuleId::dense_dtype)
           << "result " << describeDtype(result) << " must have the input's element type "
           << describeDtype(input.getDtype());
  llvm::StringRef layout = layoutAttr.getValue();
  int64_t b = batchAttr.getInt(), x = (*spatial)[0], y = (*spatial)[1], z = (*spatial)[2];
  constexpr int64_t C = ShapedType::kDynamic; // channels: checked only when depth folds in
  llvm::SmallVector<int64_t, 5> want;
  if (layout == "b_c_z_y_x")
    want = {b, C, z, y, x};
  else if (layout == "b_z_y_x_c")
    want = {b, z, y, x, C};
  else if (layout == "b_c_x_y_z")
    want = {b, C, x, y, z};
  else if (layout == "b_x_y_z_c")
    want = {b, x, y, z, C};
  else if (layout == "b_cz_y_x")
    want = {b, C, y, x};
  else
    return success(); // attr.allowed reports an unknown layout.
  auto expected = [&]() {
    std::string text = "(";
    for (size_t i = 0; i < want.size(); ++i) {
      std::string dim = want[i] != C           ? std::to_string(want[i])
                        : layout == "b_cz_y_x" ? "C*" + std::to_string(z)
                                               : std::string("C");
      text += (i ? ", " : "") + dim;
    }
    return text + ")";
  };
  if (result.getRank() != static_cast<int64_t>(want.size()))
    return RuleDiagnostic(op, RuleId::dense_shape)
           << "result " << describeDtype(result) << " has rank " << result.getRank()
           << " but layout " << layout << " gives shape " << expected();
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t got = result.getDimSize(i);
    bool channelDim = want[i] == C;
    if (channelDim) {
      if (layout == "b_cz_y_x" && !ShapedType::isDynamic(got) && got % z != 0)
        return RuleDiagnostic(op, RuleId::dense_shape)
               << "result " << describeDtype(result) << " folds depth " << z
               << " into channels, so dimension 1 must be a multiple of " << z;
      continue;
    }
    if (got != want[i])
      return RuleDiagnostic(op, RuleId::dense_shape)
             << "result " << describeDtype(result) << " must have shape " << expected()
             << " (layout " << layout << ", batch_size " << b
             << ", spatial_shape x, y, z = " << verify::tripleText(*spatial) << ")";
  }
  return success();
}
