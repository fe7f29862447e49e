//===- LatticeVerifyExtraOps.h - rules of the lookup/elementwise ops -*- C++ -*-===//
//
// Hand-written verifier rules of embedding_lookup and elementwise, defined in
// LatticeVerifyExtraOps.cpp (the other ops the reference system has beyond
// the first contract need only generated rules).
//
// They are declared at global scope on purpose: detail::verifyLatticeOp (in
// LatticeVerify.cpp) calls `verifyRules(op)` unqualified, and ordinary lookup
// must find these overloads in the same scope as the generic ones there, so
// overload resolution picks the exact op type.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEVERIFYEXTRAOPS_H
#define LATTICE_LATTICEVERIFYEXTRAOPS_H

#include "lattice/LatticeDialect.h"

mlir::LogicalResult verifyRules(mlir::lattice::EmbeddingLookupOp op);
mlir::LogicalResult verifyRules(mlir::lattice::ElementwiseOp op);
mlir::LogicalResult verifyRules(mlir::lattice::SparseCropOp op);
mlir::LogicalResult verifyRules(mlir::lattice::SparseToDenseOp op);

#endif // LATTICE_LATTICEVERIFYEXTRAOPS_H
