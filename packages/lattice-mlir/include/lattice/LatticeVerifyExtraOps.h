//===- LatticeVerifyExtraOps.h - rules of the normalised/resampling ops -*- C++ -*-===//
//
// Hand-written verifier rules of the ops the reference system has beyond the
// first contract: the weight-normalised convolutions, pool_transpose3d,
// trilinear_upsample3d, embedding_lookup and elementwise.  Defined in
// LatticeVerifyExtraOps.cpp.
//
// They are declared at global scope on purpose: detail::verifyLatticeOp (in
// LatticeVerify.cpp) calls `preRules(op)` and `verifyRules(op)` unqualified,
// and ordinary lookup must find these overloads in the same scope as the
// generic ones there, so overload resolution picks the exact op type.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEVERIFYEXTRAOPS_H
#define LATTICE_LATTICEVERIFYEXTRAOPS_H

#include "lattice/LatticeDialect.h"

mlir::LogicalResult preRules(mlir::lattice::NormalizedSubmConv3dOp op);
mlir::LogicalResult preRules(mlir::lattice::NormalizedGenerativeConvTranspose3dOp op);

mlir::LogicalResult verifyRules(mlir::lattice::NormalizedSubmConv3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::NormalizedConvTranspose3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::TargetNormalizedConvTranspose3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::NormalizedGenerativeConvTranspose3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::PoolTranspose3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::TrilinearUpsample3dOp op);
mlir::LogicalResult verifyRules(mlir::lattice::EmbeddingLookupOp op);
mlir::LogicalResult verifyRules(mlir::lattice::ElementwiseOp op);

#endif // LATTICE_LATTICEVERIFYEXTRAOPS_H
