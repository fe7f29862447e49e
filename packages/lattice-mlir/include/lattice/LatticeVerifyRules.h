//===- LatticeVerifyRules.h - the verifier's rule layers --------*- C++ -*-===//
//
// The lattice op verifier evaluates the schema's rules
// (lattice_contract.dialect.rules) in three layers, each diagnostic tagged
// with its rule ID through RuleDiagnostic:
//
//  * generic rules, for every op, from the generated schema tables
//    (verifyAgainstSchema, verifyRequiredLast);
//  * generated rules, declared per op in the schema and emitted by the
//    generator as RuleUse tables (verifyGeneratedRules): standard kinds such
//    as stride divisibility, target strides, same-shape, absent attributes,
//    dense weights, weight layout/packing and the int32 geometry bound;
//  * exotic rules of the hand-written verifyRules overloads
//    (LatticeVerify.cpp, LatticeVerifyExtraOps.cpp).
//
// Defined in LatticeVerifySchema.cpp (generic layer, accessors, strides) and
// LatticeVerifyGenerated.cpp (generated rules).
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEVERIFYRULES_H
#define LATTICE_LATTICEVERIFYRULES_H

#include "lattice/LatticeDialect.h"

#include <optional>
#include <string>

namespace mlir::lattice::verify {

/// "(a, b, c)", the spelling of triples in diagnostics.
std::string tripleText(llvm::ArrayRef<int64_t> values);
/// Whether `type` is f16, bf16 or f32.
bool isFloatDtype(Type type);
/// a * b per axis, or nullopt when a product leaves int32.
std::optional<Triple> multiplyTriple(const Triple &a, const Triple &b);
/// a / b per axis, or nullopt when some b does not divide a.
std::optional<Triple> divideTriple(const Triple &a, const Triple &b);
/// The operand the schema calls `name` (null when absent, variadic or out of
/// range), read without trusting the op's own invariants.
Value operandNamed(Operation *op, llvm::StringRef name);
/// A triple attribute with every component >= `minimum`, or nullopt when it
/// is absent, malformed or out of range (its own rule reports that).
std::optional<Triple> tripleAttr(Operation *op, llvm::StringRef name, int64_t minimum = 1);

/// Operand kinds, undeclared attributes, attribute values and element-type
/// agreement, from the op's schema tables.
LogicalResult verifyAgainstSchema(Operation *op, const schema::OpInfo &info);
/// The op's generated rules: those that must run before the schema checks
/// (absent attributes) when `early`, the others otherwise.
LogicalResult verifyGeneratedRules(Operation *op, const schema::OpInfo &info, bool early);
/// Required attributes ODS leaves to the lattice verifier (reported last).
LogicalResult verifyRequiredLast(Operation *op, const schema::OpInfo &info);

} // namespace mlir::lattice::verify

#endif // LATTICE_LATTICEVERIFYRULES_H
