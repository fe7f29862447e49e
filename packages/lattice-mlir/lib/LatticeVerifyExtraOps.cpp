//===- LatticeVerifyExtraOps.cpp - rules of the normalised/resampling ops -===//
//
// What the schema cannot say about the weight-normalised convolutions,
// pool_transpose3d, trilinear_upsample3d, embedding_lookup and elementwise
// (the schema already checks operand kinds, weight families, attribute
// minimums such as eps > 0 and positive strides, closed string values and
// element-type agreement):
//
//  * the normalised submanifold conv takes no stride or padding, the
//    normalised generative transpose no padding or dilation;
//  * transposed and upsampling ops divide the input stride by `stride`, and
//    a target must sit at exactly that stride;
//  * the normalised convolutions refuse packed weights (their normaliser
//    needs the dense values);
//  * embedding_lookup maps an i32 index vector to one row per index;
//    elementwise maps a rank-2 f32 tensor to one of the same shape.
//
// Like LatticeVerify.cpp, anything beyond the op itself is read through the
// raw Operation API with null checks (other ops may not be verified yet).
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeVerifyExtraOps.h"

#include <string>

using namespace mlir;
using namespace mlir::lattice;

namespace {

std::string tripleText(const Triple &t) {
  return "[" + std::to_string(t[0]) + ", " + std::to_string(t[1]) + ", " + std::to_string(t[2]) +
         "]";
}

Triple tripleOf(llvm::ArrayRef<int64_t> values) {
  Triple out{1, 1, 1};
  for (size_t i = 0; i < 3 && i < values.size(); ++i)
    out[i] = values[i];
  return out;
}

std::optional<Triple> divided(const Triple &a, const Triple &b) {
  Triple out;
  for (int i = 0; i < 3; ++i) {
    if (b[i] <= 0 || a[i] % b[i] != 0)
      return std::nullopt;
    out[i] = a[i] / b[i];
  }
  return out;
}

/// Output stride input / stride of a transposed or upsampling op, and the
/// target's stride (when there is a target) equal to it.
LogicalResult verifyFinerStride(Operation *op, Value input, Value target,
                                llvm::ArrayRef<int64_t> strideAttr) {
  std::optional<Triple> in = staticStrideOf(input);
  if (!in)
    return success();
  Triple s = tripleOf(strideAttr);
  std::optional<Triple> want = divided(*in, s);
  if (!want)
    return op->emitOpError() << "input stride " << tripleText(*in)
                             << " is not divisible by the op stride " << tripleText(s)
                             << "; the output stride is input stride / stride, so lower the "
                                "stride or upsample a coarser input";
  if (!target)
    return success();
  std::optional<Triple> have = staticStrideOf(target);
  if (have && *have != *want)
    return op->emitOpError() << "target stride " << tripleText(*have) << " must equal input stride "
                             << tripleText(*in) << " / stride " << tripleText(s) << " = "
                             << tripleText(*want)
                             << "; pass a target at the finer stride or fix stride";
  return success();
}

/// Packed weights are refused on the normalised convolutions.
LogicalResult verifyDenseWeight(Operation *op, Value weight) {
  auto type = llvm::dyn_cast<WeightType>(weight.getType());
  bool packed = type && !isDtypeOneOf(type.getDtype(), "f16,bf16,f32");
  if (Operation *def = weight.getDefiningOp())
    if (def->getName().getStringRef() == "lattice.weight")
      if (auto packing = llvm::dyn_cast_or_null<PackingAttr>(
              def->getInherentAttr("packing").value_or(Attribute())))
        packed = packed || packing.getBits() != PackingBits::dense;
  if (packed)
    return op->emitOpError()
           << "takes a packed (quantized) weight; a weight-normalised convolution divides by the "
              "weight's own squared mass, so store this weight dense "
              "(packing = #lattice.packing<dense>)";
  return success();
}

} // namespace

LogicalResult preRules(NormalizedSubmConv3dOp op) {
  if (op->getDiscardableAttr("stride") || op->getDiscardableAttr("padding"))
    return op.emitOpError()
           << "takes no stride or padding: a submanifold convolution keeps exactly its input's "
              "rows and stride; drop the attribute";
  return success();
}

LogicalResult preRules(NormalizedGenerativeConvTranspose3dOp op) {
  if (op->getDiscardableAttr("padding") || op->getDiscardableAttr("dilation"))
    return op.emitOpError()
           << "takes no padding or dilation: the generative transpose emits o = c*s + k for "
              "every tap (padding 0, dilation 1 implied); drop the attribute, or use "
              "lattice.normalized_conv_transpose3d for a padded or dilated transpose";
  return success();
}

LogicalResult verifyRules(NormalizedSubmConv3dOp op) {
  return verifyDenseWeight(op, op.getWeight());
}

LogicalResult verifyRules(NormalizedConvTranspose3dOp op) {
  if (failed(verifyDenseWeight(op, op.getWeight())))
    return failure();
  return verifyFinerStride(op, op.getInput(), Value(), op.getStride());
}

LogicalResult verifyRules(TargetNormalizedConvTranspose3dOp op) {
  if (failed(verifyDenseWeight(op, op.getWeight())))
    return failure();
  return verifyFinerStride(op, op.getInput(), op.getTarget(), op.getStride());
}

LogicalResult verifyRules(NormalizedGenerativeConvTranspose3dOp op) {
  if (failed(verifyDenseWeight(op, op.getWeight())))
    return failure();
  return verifyFinerStride(op, op.getInput(), Value(), op.getStride());
}

LogicalResult verifyRules(PoolTranspose3dOp op) {
  return verifyFinerStride(op, op.getInput(), op.getTarget(), op.getStride());
}

LogicalResult verifyRules(TrilinearUpsample3dOp op) {
  return verifyFinerStride(op, op.getInput(), op.getTarget(), op.getStride());
}

LogicalResult verifyRules(EmbeddingLookupOp op) {
  auto indices = llvm::dyn_cast<RankedTensorType>(op.getIndices().getType());
  auto result = llvm::dyn_cast<RankedTensorType>(op.getResult().getType());
  if (!indices || !result)
    return success();
  if (!result.isDynamicDim(0) && !indices.isDynamicDim(0) &&
      result.getDimSize(0) != indices.getDimSize(0))
    return op.emitOpError() << "returns " << result.getDimSize(0) << " rows for "
                            << indices.getDimSize(0)
                            << " indices; the result has one row per index";
  return success();
}

LogicalResult verifyRules(ElementwiseOp op) {
  auto in = llvm::dyn_cast<RankedTensorType>(op.getInput().getType());
  auto out = llvm::dyn_cast<RankedTensorType>(op.getResult().getType());
  if (!in || !out)
    return success();
  if (!in.getElementType().isF32())
    return op.emitOpError() << "takes f32 features only, got " << describeDtype(in.getElementType())
                            << "; convert with lattice.cast first";
  if (in.getShape() != out.getShape())
    return op.emitOpError() << "must return the shape of its input (a unary elementwise map)";
  return success();
}
