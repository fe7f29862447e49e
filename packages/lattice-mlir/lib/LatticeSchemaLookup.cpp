//===- LatticeSchemaLookup.cpp - lookups over the generated schema tables -===//
//
// Linear lookups over the tables lattice_contract.codegen.tablegen generates (a few
// dozen entries each; the verifier caches what it looks up per op).
//
//===----------------------------------------------------------------------===//

#include "LatticeSchema.h"

namespace mlir::lattice::schema {

const RuleInfo &ruleInfo(RuleId id) { return kRules[static_cast<unsigned>(id)]; }

const OpInfo *lookupOp(::llvm::StringRef fullName) {
  for (unsigned i = 0; i < kNumOps; ++i)
    if (fullName == kOps[i].name)
      return &kOps[i];
  return nullptr;
}

const PrimitiveInfo *lookupPrimitive(::llvm::StringRef name) {
  for (unsigned i = 0; i < kNumPrimitives; ++i)
    if (name == kPrimitives[i].name)
      return &kPrimitives[i];
  return nullptr;
}

const char *rejectedSpellingFix(::llvm::StringRef mnemonic, ::llvm::StringRef value) {
  for (unsigned i = 0; i < kNumRejectedSpellings; ++i)
    if (mnemonic == kRejectedSpellings[i].mnemonic && value == kRejectedSpellings[i].value)
      return kRejectedSpellings[i].fix;
  return nullptr;
}

const char *rejectedOpFix(::llvm::StringRef opName) {
  for (unsigned i = 0; i < kNumRejectedOpPrefixes; ++i)
    if (opName.starts_with(kRejectedOpPrefixes[i].prefix))
      return kRejectedOpPrefixes[i].fix;
  return nullptr;
}

const char *knownProducer(::llvm::StringRef digest) {
  for (unsigned i = 0; i < kNumKnownProducers; ++i)
    if (digest == kKnownProducers[i].digest)
      return kKnownProducers[i].producer;
  return nullptr;
}

const char *enumSynonym(::llvm::StringRef mnemonic, ::llvm::StringRef keyword) {
  for (unsigned i = 0; i < kNumEnumSynonyms; ++i)
    if (mnemonic == kEnumSynonyms[i].mnemonic && keyword == kEnumSynonyms[i].synonym)
      return kEnumSynonyms[i].canonical;
  return nullptr;
}

} // namespace mlir::lattice::schema
