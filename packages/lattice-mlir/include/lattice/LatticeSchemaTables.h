//===- LatticeSchemaTables.h - layouts of the generated schema tables -*- C++ -*-===//
//
// The record types of the tables lattice_contract.codegen.tablegen generates
// (LatticeSchema.cpp.inc defines them) and the lookups over them
// (LatticeSchemaLookup.cpp).  Included by the generated LatticeSchema.h after
// the enums it declares from the schema (TypeKind, AttrKind, StrideRule,
// RuleId, RuleCheck); never include it directly.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICESCHEMATABLES_H
#define LATTICE_LATTICESCHEMATABLES_H

#include <cstdint>

#include "llvm/ADT/StringRef.h"

namespace mlir::lattice::schema {

/// One rule: its ID, its one-line statement and the fix its diagnostics name.
struct RuleInfo {
  const char *id;
  const char *statement;
  const char *fix;
};

/// A generated rule applied to one op, with the operand/attribute names it reads.
struct RuleUse {
  RuleId rule;
  RuleCheck check;
  const char *a; // first parameter (nullptr when none)
  const char *b; // second parameter (nullptr when none)
};

struct ValueInfo {
  const char *name;
  TypeKind kind;
  uint32_t families; // bit set of WeightFamily values; 0 unless kind == weight
  bool optional;
  bool variadic;
};

struct AttrInfo {
  const char *name;
  AttrKind kind;
  const char *enumMnemonic; // nullptr unless kind == enum
  bool hasMinimum;
  double minimum;
  bool exclusiveMinimum;
  const char *const *allowed; // closed string value set (may be empty)
  unsigned numAllowed;
  bool required;
};

struct OpInfo {
  const char *name; // full name, e.g. "lattice.conv3d"
  const char *summary;
  const ValueInfo *operands;
  unsigned numOperands;
  const ValueInfo *results;
  unsigned numResults;
  const AttrInfo *attributes;
  unsigned numAttributes;
  StrideRule stride;
  const RuleUse *rules; // the op's generated rules, in declaration order
  unsigned numRules;
};

struct PrimitiveInfo {
  const char *name;
  const char *summary;
  const char *const *inputs; // element types, e.g. "f32", "i32"
  const int *inputRanks;
  unsigned numInputs;
  const char *output;
  int outputRank;
};

struct RejectedSpelling {
  const char *mnemonic;
  const char *value;
  const char *fix;
};

struct RejectedOpPrefix {
  const char *prefix;
  const char *fix;
};

struct KnownProducer {
  const char *digest;
  const char *producer;
};

struct EnumSynonym {
  const char *mnemonic;
  const char *synonym;
  const char *canonical;
};

extern const OpInfo kOps[];
extern const unsigned kNumOps;
extern const RuleInfo kRules[];
extern const unsigned kNumRules;
extern const PrimitiveInfo kPrimitives[];
extern const unsigned kNumPrimitives;
extern const RejectedSpelling kRejectedSpellings[];
extern const unsigned kNumRejectedSpellings;
extern const RejectedOpPrefix kRejectedOpPrefixes[];
extern const unsigned kNumRejectedOpPrefixes;
extern const KnownProducer kKnownProducers[];
extern const unsigned kNumKnownProducers;
extern const EnumSynonym kEnumSynonyms[];
extern const unsigned kNumEnumSynonyms;

/// The ID, statement and fix of a rule.
const RuleInfo &ruleInfo(RuleId id);
/// The schema entry of a full op name, or nullptr.
const OpInfo *lookupOp(::llvm::StringRef fullName);
/// The registered primitive called `name`, or nullptr.
const PrimitiveInfo *lookupPrimitive(::llvm::StringRef name);
/// Fix text for a rejected legacy enum spelling, or nullptr.
const char *rejectedSpellingFix(::llvm::StringRef mnemonic, ::llvm::StringRef value);
/// Fix text for a rejected legacy op name (without the dialect prefix), or nullptr.
const char *rejectedOpFix(::llvm::StringRef opName);
/// The producer that writes schema digest `digest` (lattice migrate reads it), or nullptr.
const char *knownProducer(::llvm::StringRef digest);
/// The canonical keyword a synonym of enum `mnemonic` stands for, or nullptr.
const char *enumSynonym(::llvm::StringRef mnemonic, ::llvm::StringRef keyword);
/// Readable text of a type kind, for diagnostics.
const char *describeKind(TypeKind kind);
/// Element type a packed weight of `bits` must declare, e.g. int4 -> "i4".
const char *packedDtypeOfBits(::llvm::StringRef bits);

} // namespace mlir::lattice::schema

#endif // LATTICE_LATTICESCHEMATABLES_H
