//===- LatticeRewrite.cpp - rewrite module attributes, print with MLIR ----===//
//
// The one native step `lattice migrate` needs: parse a module (after the same
// lexical pre-check, see LatticePrecheck.h, and on a parser thread with its
// reused context, see LatticeParserPool.h, as every other entry point),
// verify every op with the
// dialect's verifiers (not the artifact rules: a module from another producer
// carries that producer's schema digest), describe its module attributes and
// entry results, set the requested module attributes and print the module as
// MLIR prints it.  What to rewrite is decided in Python
// (lattice_conformance.migrate); nothing here knows a producer.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeApi.h"
#include "lattice/LatticeDialect.h"
#include "lattice/LatticeParserPool.h"
#include "lattice/LatticePrecheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using lattice_api::Node;
using lattice_api::Outcome;

namespace {

Node attributeRecord(Attribute attr) {
  if (auto text = llvm::dyn_cast<StringAttr>(attr))
    return Node::of(text.getValue().str());
  if (auto integer = llvm::dyn_cast<IntegerAttr>(attr);
      integer && integer.getValue().getSignificantBits() <= 64)
    return Node::of(static_cast<int64_t>(integer.getValue().getSExtValue()));
  if (auto array = llvm::dyn_cast<ArrayAttr>(attr)) {
    bool strings = llvm::all_of(array, [](Attribute a) { return llvm::isa<StringAttr>(a); });
    if (strings) {
      Node list = Node::makeList();
      for (Attribute item : array)
        list.push(Node::of(llvm::cast<StringAttr>(item).getValue().str()));
      return list;
    }
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return Node::of("<attribute " + text + ">");
}

} // namespace

namespace lattice_api {

namespace {

void rewriteWith(MLIRContext &context, std::string_view text,
                 const std::vector<ModuleAttrEdit> &edits, Outcome &outcome) {
  llvm::SourceMgr sourceMgr;
  llvm::raw_string_ostream diagStream(outcome.diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagStream);

  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(text.data(), text.size()), "graph.mlir"),
      llvm::SMLoc());
  llvm::StringRef buffer = sourceMgr.getMemoryBuffer(id)->getBuffer();
  if (std::optional<lattice::PrecheckFailure> refused = lattice::precheck(buffer)) {
    sourceMgr.PrintMessage(diagStream, llvm::SMLoc::getFromPointer(buffer.data() + refused->offset),
                           llvm::SourceMgr::DK_Error, refused->message);
    return;
  }
  ParserConfig config(&context, /*verifyAfterParse=*/false);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!module || failed(lattice::checkNoUnknownLatticeOps(*module)) ||
      failed(mlir::verify(*module)))
    return;

  // The module as found: its attributes and the kinds of @forward's results.
  Node info = Node::makeDict();
  Node attributes = Node::makeDict();
  for (NamedAttribute named : (*module)->getAttrs())
    attributes.add(named.getName().getValue().str(), attributeRecord(named.getValue()));
  info.add("attributes", std::move(attributes));
  Node results = Node::makeList();
  for (Operation &op : module->getBody()->getOperations())
    if (auto fn = llvm::dyn_cast<func::FuncOp>(op); fn && fn.getSymName() == "forward")
      for (Type type : fn.getFunctionType().getResults())
        results.push(Node::of(std::string(llvm::isa<lattice::SparseTensorType>(type) ? "sparse"
                                          : llvm::isa<RankedTensorType>(type)        ? "tensor"
                                                                                     : "other")));
  info.add("results", std::move(results));

  Builder builder(&context);
  for (const ModuleAttrEdit &edit : edits) {
    Attribute value;
    if (edit.isArray) {
      llvm::SmallVector<Attribute> items;
      for (const std::string &item : edit.items)
        items.push_back(builder.getStringAttr(item));
      value = builder.getArrayAttr(items);
    } else {
      value = builder.getStringAttr(edit.text);
    }
    (*module)->setAttr(edit.name, value);
  }
  std::string printed;
  llvm::raw_string_ostream os(printed);
  module->print(os);
  os << "\n";
  info.add("printed", Node::of(std::move(printed)));
  outcome.value = std::move(info);
  outcome.ok = true;
}

} // namespace

Outcome rewriteModule(std::string_view text, const std::vector<ModuleAttrEdit> &edits) {
  Outcome outcome;
  lattice::runOnParserThread(text.size(), [&](MLIRContext &context) {
    rewriteWith(context, text, edits, outcome);
    return outcome.ok;
  });
  return outcome;
}

} // namespace lattice_api
