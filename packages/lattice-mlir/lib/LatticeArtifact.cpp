//===- LatticeArtifact.cpp - the artifact-level verifier ------------------===//
//
// docs/artifact.md: what makes a verified lattice module an executable artifact.  The
// op verifiers check each op; this checks the module around them: version,
// schema digest, weight file, the single @forward entry and its ABI
// metadata.  Run by lattice_mlir.verify/import_plan and by
// `lattice-opt --lattice-verify-artifact`.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::lattice;

namespace {

// Module attribute names of the artifact ABI (docs/artifact.md).  They are artifact
// metadata, not dialect schema names.
constexpr llvm::StringLiteral kIrVersionAttr = "lattice.ir_version";
constexpr llvm::StringLiteral kSchemaDigestAttr = "lattice.schema_digest";
constexpr llvm::StringLiteral kWeightFileAttr = "lattice.weight_file";
constexpr llvm::StringLiteral kInputNamesAttr = "lattice.input_names";
constexpr llvm::StringLiteral kInputRolesAttr = "lattice.input_roles";
constexpr llvm::StringLiteral kOutputNamesAttr = "lattice.output_names";
constexpr llvm::StringLiteral kOutputRolesAttr = "lattice.output_roles";
constexpr llvm::StringLiteral kEntryName = "forward";

bool isKnownModuleAttr(llvm::StringRef name) {
  return name == kIrVersionAttr || name == kSchemaDigestAttr || name == kWeightFileAttr ||
         name == kInputNamesAttr || name == kInputRolesAttr || name == kOutputNamesAttr ||
         name == kOutputRolesAttr;
}

std::string typeText(Type type) { return describeDtype(type); }

bool isOneOf(llvm::StringRef value, const char *const *items, unsigned n) {
  for (unsigned i = 0; i < n; ++i)
    if (value == items[i])
      return true;
  return false;
}

std::string listOf(const char *const *items, unsigned n) {
  std::string out;
  for (unsigned i = 0; i < n; ++i)
    out += (i ? ", " : "") + std::string(items[i]);
  return out;
}

/// A string-array module attribute, or a diagnostic.
FailureOr<llvm::SmallVector<llvm::StringRef>> stringArray(ModuleOp module, llvm::StringRef name) {
  Attribute attr = module->getAttr(name);
  if (!attr)
    return module.emitError() << "lattice artifact: module attribute " << name
                              << " is missing; the entry ABI must name every "
                              << (name.contains("input") ? "argument" : "result")
                              << " (re-export with the lattice_contract builder)";
  auto array = llvm::dyn_cast<ArrayAttr>(attr);
  if (!array)
    return module.emitError() << "lattice artifact: module attribute " << name
                              << " must be an array of strings, got " << attr;
  llvm::SmallVector<llvm::StringRef> out;
  for (Attribute item : array) {
    auto text = llvm::dyn_cast<StringAttr>(item);
    if (!text)
      return module.emitError() << "lattice artifact: module attribute " << name
                                << " must be an array of strings, got element " << item;
    out.push_back(text.getValue());
  }
  return out;
}

LogicalResult verifyModuleAttributes(ModuleOp module) {
  for (NamedAttribute named : module->getAttrs()) {
    llvm::StringRef name = named.getName().getValue();
    if (name.starts_with("lattice.") && !isKnownModuleAttr(name))
      return module.emitError()
             << "lattice artifact: unknown module attribute " << name
             << "; the graph itself is the contract (legacy JSON manifests and extra metadata "
                "are not read), remove it";
  }

  Attribute version = module->getAttr(kIrVersionAttr);
  if (!version)
    return module.emitError() << "lattice artifact: module attribute " << kIrVersionAttr
                              << " is missing; stamp lattice.ir_version = " << schema::kIrVersion
                              << " : i64 (re-export with this release's builder)";
  auto versionInt = llvm::dyn_cast<IntegerAttr>(version);
  // Any integer type spells the version (upstream writes a bare `2`, i64).
  if (!versionInt || !llvm::isa<IntegerType>(versionInt.getType()) ||
      versionInt.getValue().getSignificantBits() > 64 ||
      versionInt.getValue().getSExtValue() != schema::kIrVersion)
    return module.emitError() << "lattice artifact: " << kIrVersionAttr << " = " << version
                              << " is not supported; this release reads only IR version "
                              << schema::kIrVersion << " (" << kIrVersionAttr << " = "
                              << schema::kIrVersion << " : i64): re-export the model";

  // The weight file before the digest (upstream's order): a module that
  // lacks both is told about the payload first.
  Attribute weightFile = module->getAttr(kWeightFileAttr);
  if (!weightFile)
    return module.emitError() << "lattice artifact: module attribute " << kWeightFileAttr
                              << " is missing; declare lattice.weight_file = \""
                              << schema::kWeightFile << "\"";
  auto weightText = llvm::dyn_cast<StringAttr>(weightFile);
  if (!weightText || weightText.getValue() != schema::kWeightFile)
    return module.emitError() << "lattice artifact: " << kWeightFileAttr << " = " << weightFile
                              << " is not allowed; weights live in \"" << schema::kWeightFile
                              << "\" beside graph.mlir and no other weight file is read";
  Attribute digest = module->getAttr(kSchemaDigestAttr);
  if (!digest)
    return module.emitError() << "lattice artifact: module attribute " << kSchemaDigestAttr
                              << " is missing; stamp the schema digest " << schema::kSchemaDigest
                              << " (re-export with lattice_contract)";
  auto digestText = llvm::dyn_cast<StringAttr>(digest);
  if (const char *producer = digestText ? schema::knownProducer(digestText.getValue()) : nullptr)
    return module.emitError() << "lattice artifact: " << kSchemaDigestAttr << " = " << digest
                              << " is the schema digest of " << producer
                              << ": the artifact was written by that producer and is not loaded "
                                 "as is; migrate it once with `lattice migrate SRC DST` (it "
                                 "verifies the graph, rewrites what has one meaning in both and "
                                 "stamps this build's digest)";
  if (!digestText || digestText.getValue() != schema::kSchemaDigest)
    return module.emitError() << "lattice artifact: " << kSchemaDigestAttr << " = " << digest
                              << " does not match this build's schema digest \""
                              << schema::kSchemaDigest
                              << "\"; the producer used a different dialect schema: re-export "
                                 "with a matching lattice_contract or rebuild lattice-mlir";

  return success();
}

FailureOr<func::FuncOp> findEntry(ModuleOp module) {
  func::FuncOp entry;
  unsigned functions = 0;
  for (Operation &op : module.getBody()->getOperations()) {
    auto fn = llvm::dyn_cast<func::FuncOp>(op);
    if (!fn)
      return op.emitError() << "lattice artifact: the module may contain only func.func @"
                            << kEntryName << ", found '" << op.getName() << "'; remove it";
    ++functions;
    if (fn.getSymName() == kEntryName)
      entry = fn;
    else
      return fn.emitError() << "lattice artifact: function @" << fn.getSymName()
                            << " is not the entry; an artifact has exactly one func.func named @"
                            << kEntryName << " (inline or remove other functions)";
  }
  if (!entry || functions != 1)
    return module.emitError() << "lattice artifact: expected exactly one func.func @" << kEntryName
                              << ", found " << functions
                              << " functions; export the model's entry as @" << kEntryName;
  if (entry.isExternal())
    return entry.emitError() << "lattice artifact: @" << kEntryName
                             << " has no body; the entry must define the graph";
  if (entry.getFunctionType().getNumResults() == 0)
    return entry.emitError() << "lattice artifact: @" << kEntryName
                             << " returns no values; return at least one output";
  if (!entry.getBody().hasOneBlock())
    return entry.emitError() << "lattice artifact: @" << kEntryName
                             << " must have a single block (no control flow)";
  return entry;
}

LogicalResult verifyEntryBody(func::FuncOp entry) {
  llvm::StringSet<> symbols;
  for (Operation &op : entry.getBody().front()) {
    if (llvm::isa<func::ReturnOp>(op))
      continue;
    if (op.getName().getDialectNamespace() != schema::kDialectName)
      return op.emitError() << "lattice artifact: @" << kEntryName
                            << " may contain only lattice ops and func.return, found '"
                            << op.getName() << "'; express it with lattice ops";
    if (auto weight = llvm::dyn_cast<WeightOp>(op))
      if (!symbols.insert(weight.getSymName()).second)
        return op.emitError() << "lattice artifact: weight symbol @" << weight.getSymName()
                              << " is declared twice; give each lattice.weight its own symbol "
                                 "(reuse the SSA value instead)";
  }
  return success();
}

bool isFloat(Type t) { return t.isF16() || t.isBF16() || t.isF32(); }

LogicalResult verifySparseArgTypes(func::FuncOp entry, unsigned i) {
  auto args = entry.getArgumentTypes();
  auto coords = llvm::dyn_cast<RankedTensorType>(args[i]);
  auto features = llvm::dyn_cast<RankedTensorType>(args[i + 1]);
  auto active = llvm::dyn_cast<RankedTensorType>(args[i + 2]);
  if (!coords || coords.getRank() != 2 || coords.getDimSize(1) != 4 ||
      !coords.getElementType().isSignlessInteger(32))
    return entry.emitError() << "lattice artifact: argument #" << i
                             << " has role sparse_coords and must be tensor<?x4xi32>, got "
                             << typeText(args[i]);
  if (!features || features.getRank() != 2 || features.isDynamicDim(1) ||
      !isFloat(features.getElementType()))
    return entry.emitError() << "lattice artifact: argument #" << i + 1
                             << " has role sparse_features and must be a rank-2 float tensor "
                                "tensor<?xCxT> with static C, got "
                             << typeText(args[i + 1]);
  if (!active || active.getRank() != 1 || active.getDimSize(0) != 1 ||
      !active.getElementType().isSignlessInteger(32))
    return entry.emitError() << "lattice artifact: argument #" << i + 2
                             << " has role sparse_active and must be tensor<1xi32>, got "
                             << typeText(args[i + 2]);
  return success();
}

LogicalResult verifyInputs(ModuleOp module, func::FuncOp entry) {
  FailureOr<llvm::SmallVector<llvm::StringRef>> names = stringArray(module, kInputNamesAttr);
  if (failed(names))
    return failure();
  FailureOr<llvm::SmallVector<llvm::StringRef>> roles = stringArray(module, kInputRolesAttr);
  if (failed(roles))
    return failure();
  unsigned n = entry.getNumArguments();
  if (names->size() != n || roles->size() != n)
    return module.emitError() << "lattice artifact: @" << kEntryName << " has " << n
                              << " arguments but " << kInputNamesAttr << " has " << names->size()
                              << " and " << kInputRolesAttr << " has " << roles->size()
                              << " entries; name and role every argument, in order";
  llvm::StringSet<> seen;
  for (unsigned i = 0; i < n; ++i) {
    llvm::StringRef name = (*names)[i];
    llvm::StringRef role = (*roles)[i];
    if (name.empty())
      return module.emitError() << "lattice artifact: input name #" << i
                                << " is empty; give every argument an ABI name";
    if (!seen.insert(name).second)
      return module.emitError() << "lattice artifact: input name '" << name
                                << "' is used twice; ABI names must be unique";
    if (!isOneOf(role, schema::kInputRoles, schema::kNumInputRoles))
      return module.emitError() << "lattice artifact: input role '" << role << "' of argument #"
                                << i << " is not one of: "
                                << listOf(schema::kInputRoles, schema::kNumInputRoles);
    Type type = entry.getArgumentTypes()[i];
    if (!llvm::isa<RankedTensorType>(type))
      return entry.emitError() << "lattice artifact: argument #" << i << " has type "
                               << typeText(type)
                               << "; entry arguments are builtin ranked tensors (pass a sparse "
                                  "value as coords, features and active tensors)";
  }
  for (unsigned i = 0; i < n;) {
    llvm::StringRef role = (*roles)[i];
    if (role == schema::kSparseInputRoles[0]) {
      if (i + 2 >= n || (*roles)[i + 1] != schema::kSparseInputRoles[1] ||
          (*roles)[i + 2] != schema::kSparseInputRoles[2])
        return module.emitError()
               << "lattice artifact: argument #" << i
               << " starts a sparse input, which must be three consecutive arguments with roles "
               << listOf(schema::kSparseInputRoles, 3);
      llvm::StringRef first = (*names)[i];
      // A lone sparse input may use the bare names coords, features, active
      // (the suffixes without their underscore); several need <name>_ prefixes.
      if (first == llvm::StringRef(schema::kSparseAbiSuffixes[0]).drop_front()) {
        unsigned sparseInputs = 0;
        for (unsigned k = 0; k < n; ++k)
          sparseInputs += (*roles)[k] == schema::kSparseInputRoles[0] ? 1 : 0;
        if (sparseInputs != 1)
          return module.emitError()
                 << "lattice artifact: sparse input name '" << first
                 << "' is bare but the entry has " << sparseInputs
                 << " sparse inputs; the bare names coords, features, active are for a single "
                    "sparse input, so name each one <name>"
                 << schema::kSparseAbiSuffixes[0];
        for (unsigned k = 1; k < 3; ++k) {
          llvm::StringRef want = llvm::StringRef(schema::kSparseAbiSuffixes[k]).drop_front();
          if ((*names)[i + k] != want)
            return module.emitError()
                   << "lattice artifact: argument #" << i + k << " is named '" << (*names)[i + k]
                   << "' but the bare sparse input needs '" << want << "'";
        }
        if (failed(verifySparseArgTypes(entry, i)))
          return failure();
        i += 3;
        continue;
      }
      if (!first.ends_with(schema::kSparseAbiSuffixes[0]) ||
          first.size() == llvm::StringRef(schema::kSparseAbiSuffixes[0]).size())
        return module.emitError() << "lattice artifact: sparse input name '" << first
                                  << "' must be <name>" << schema::kSparseAbiSuffixes[0]
                                  << " (or bare coords for a single sparse input)";
      std::string base =
          first.drop_back(llvm::StringRef(schema::kSparseAbiSuffixes[0]).size()).str();
      for (unsigned k = 1; k < 3; ++k)
        if ((*names)[i + k] != base + schema::kSparseAbiSuffixes[k])
          return module.emitError() << "lattice artifact: argument #" << i + k << " is named '"
                                    << (*names)[i + k] << "' but the sparse input '" << base
                                    << "' needs '" << base << schema::kSparseAbiSuffixes[k] << "'";
      if (failed(verifySparseArgTypes(entry, i)))
        return failure();
      i += 3;
      continue;
    }
    if (role != "tensor")
      return module.emitError() << "lattice artifact: argument #" << i << " has role '" << role
                                << "' outside a " << listOf(schema::kSparseInputRoles, 3)
                                << " triple; a sparse input is three consecutive arguments";
    ++i;
  }
  return success();
}

LogicalResult verifyOutputs(ModuleOp module, func::FuncOp entry) {
  FailureOr<llvm::SmallVector<llvm::StringRef>> names = stringArray(module, kOutputNamesAttr);
  if (failed(names))
    return failure();
  FailureOr<llvm::SmallVector<llvm::StringRef>> roles = stringArray(module, kOutputRolesAttr);
  if (failed(roles))
    return failure();
  auto results = entry.getFunctionType().getResults();
  if (names->size() != results.size() || roles->size() != results.size())
    return module.emitError() << "lattice artifact: @" << kEntryName << " returns "
                              << results.size() << " values but " << kOutputNamesAttr << " has "
                              << names->size() << " and " << kOutputRolesAttr << " has "
                              << roles->size() << " entries; name and role every output";
  llvm::StringSet<> seen;
  for (unsigned i = 0; i < results.size(); ++i) {
    llvm::StringRef name = (*names)[i];
    llvm::StringRef role = (*roles)[i];
    if (name.empty())
      return module.emitError() << "lattice artifact: output name #" << i << " is empty";
    if (!seen.insert(name).second)
      return module.emitError() << "lattice artifact: output name '" << name
                                << "' is used twice; ABI names must be unique";
    if (!isOneOf(role, schema::kOutputRoles, schema::kNumOutputRoles))
      return module.emitError() << "lattice artifact: output role '" << role << "' of result #" << i
                                << " is not one of: "
                                << listOf(schema::kOutputRoles, schema::kNumOutputRoles);
    bool sparse = llvm::isa<SparseTensorType>(results[i]);
    bool wantSparse = role == "sparse_tensor";
    if (sparse != wantSparse)
      return module.emitError() << "lattice artifact: result #" << i << " has type "
                                << typeText(results[i]) << " but role '" << role
                                << "'; use role sparse_tensor exactly for !lattice.sparse_tensor "
                                   "results and tensor for ranked tensors";
    if (!sparse && !llvm::isa<RankedTensorType>(results[i]))
      return module.emitError() << "lattice artifact: result #" << i << " has type "
                                << typeText(results[i])
                                << "; outputs are sparse values or ranked tensors";
  }
  return success();
}

struct VerifyArtifactPass : public PassWrapper<VerifyArtifactPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(VerifyArtifactPass)

  llvm::StringRef getArgument() const final { return "lattice-verify-artifact"; }
  llvm::StringRef getDescription() const final {
    return "Check the artifact rules of docs/artifact.md: IR version, schema digest, weight file, "
           "the "
           "single @forward entry and its input/output ABI metadata";
  }
  void runOnOperation() override {
    if (failed(verifyArtifact(getOperation())))
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace

LogicalResult mlir::lattice::verifyArtifact(ModuleOp module) {
  if (failed(checkNoUnknownLatticeOps(module)) || failed(checkStringAttributes(module)) ||
      failed(verifyModuleAttributes(module)))
    return failure();
  FailureOr<func::FuncOp> entry = findEntry(module);
  if (failed(entry) || failed(verifyEntryBody(*entry)) || failed(verifyInputs(module, *entry)) ||
      failed(verifyOutputs(module, *entry)))
    return failure();
  return success();
}

void mlir::lattice::registerLatticePasses() { PassRegistration<VerifyArtifactPass>(); }
