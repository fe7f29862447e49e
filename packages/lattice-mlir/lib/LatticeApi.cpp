//===- LatticeApi.cpp - in-process verify and plan import -----------------===//
//
// Each call builds its own single-threaded MLIRContext, so calls are
// independent (no attribute storage grows across calls, no shared handler)
// and safe to run with the GIL released, from any number of threads at
// once.  Diagnostics go to a string through a SourceMgr handler: nothing is
// printed to stderr.  Every call runs on a thread of its own with a stack of
// limits::kParserStackBytes: the pre-check bounds nesting, and the large
// stack is the second line of defence whatever the caller's thread has.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeApi.h"
#include "lattice/LatticeDialect.h"
#include "lattice/LatticePrecheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/thread.h"

#include <memory>
#include <utility>

using namespace mlir;
using namespace mlir::lattice;
using lattice_api::Node;
using lattice_api::Outcome;

/// Every string an op carries (ABI names, storage keys, symbol names, ...)
/// must be UTF-8 text: MLIR's escapes (`"\\FF"`) can make any byte, and
/// the plan payload hands these strings to Python as str.  Names (ABI names,
/// storage keys, symbols) also may not hold control characters.
///
/// This runs on every import, so it reads each op's inherent attributes one
/// by one (building the op's properties as a dictionary attribute would
/// allocate and unique one per op) and looks inside only the attributes that
/// can hold a string: a number or an integer/float array is skipped, a
/// string or symbol checked directly, anything else walked element by
/// element.
LogicalResult mlir::lattice::checkStringAttributes(ModuleOp module) {
  LogicalResult result = success();
  auto isName = [](llvm::StringRef attr) {
    return attr == "lattice.input_names" || attr == "lattice.output_names" ||
           attr == "storage_key" || attr == "sym_name" || attr == "callee";
  };
  auto checkText = [&](Operation *op, llvm::StringRef attr, StringAttr text) {
    size_t at = 0;
    if (failed(result))
      return;
    if (!llvm::json::isUTF8(text.getValue(), &at)) {
      result =
          op->emitError() << "attribute '" << attr
                          << "' holds a string that is not valid UTF-8 (an escape makes byte " << at
                          << " of it invalid); names, storage keys and ABI names of a lattice "
                             "artifact are UTF-8 text, so write the character itself or its UTF-8 "
                             "bytes";
      return;
    }
    llvm::StringRef value = text.getValue();
    const char *control = llvm::find_if(
        value, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
    if (isName(attr) && control != value.end())
      result = op->emitError() << "attribute '" << attr
                               << "' holds a name with the control character "
                               << llvm::formatv("{0:x2}", static_cast<unsigned>(
                                                              static_cast<unsigned char>(*control)))
                                      .str()
                               << " at byte " << (control - value.begin())
                               << "; ABI names, storage keys and symbols are printable text";
  };
  auto checkValue = [&](Operation *op, llvm::StringRef attr, Attribute value) {
    if (!value || failed(result))
      return;
    if (auto text = llvm::dyn_cast<StringAttr>(value))
      return checkText(op, attr, text);
    if (auto symbol = llvm::dyn_cast<FlatSymbolRefAttr>(value))
      return checkText(op, attr, symbol.getAttr());
    if (llvm::isa<IntegerAttr, FloatAttr, DenseI64ArrayAttr, DenseF64ArrayAttr, UnitAttr>(value))
      return;
    value.walk([&](StringAttr text) { checkText(op, attr, text); });
  };
  module->walk([&](Operation *op) {
    if (DictionaryAttr discardable = op->getRawDictionaryAttrs())
      for (NamedAttribute named : discardable)
        checkValue(op, named.getName().getValue(), named.getValue());
    if (std::optional<RegisteredOperationName> info = op->getRegisteredInfo())
      for (StringAttr name : info->getAttributeNames())
        if (std::optional<Attribute> inherent = op->getInherentAttr(name.getValue()))
          checkValue(op, name.getValue(), *inherent);
    return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
  });
  return result;
}

namespace {

/// Runs `fn` to completion on a thread with the parser's large stack.
template <typename Fn> void onParserStack(Fn &&fn) {
  llvm::thread worker(std::optional<unsigned>(limits::kParserStackBytes), std::forward<Fn>(fn));
  worker.join();
}

/// One parse: a private context, the source buffer and the captured text.
struct Session {
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagStream{diagnostics};
  std::unique_ptr<SourceMgrDiagnosticHandler> handler;
  OwningOpRef<ModuleOp> module;

  Session() {
    registry.insert<LatticeDialect, func::FuncDialect>();
    context = std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    // Diagnostics name the rule and the line; a dump of the offending op
    // (the whole module for artifact rules) would drown them.
    context->printOpOnDiagnostic(false);
    handler = std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, context.get(), diagStream);
  }

  /// Parse, check for unknown lattice ops, verify ops, verify the artifact.
  bool run(std::string_view text) {
    unsigned id =
        sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(
                                         llvm::StringRef(text.data(), text.size()), "graph.mlir"),
                                     llvm::SMLoc());
    llvm::StringRef buffer = sourceMgr.getMemoryBuffer(id)->getBuffer();
    if (std::optional<PrecheckFailure> refused = precheck(buffer)) {
      sourceMgr.PrintMessage(diagStream,
                             llvm::SMLoc::getFromPointer(buffer.data() + refused->offset),
                             llvm::SourceMgr::DK_Error, refused->message);
      return false;
    }
    ParserConfig config(context.get(), /*verifyAfterParse=*/false);
    module = parseSourceFile<ModuleOp>(sourceMgr, config);
    if (!module)
      return false;
    if (failed(checkNoUnknownLatticeOps(*module)) || failed(mlir::verify(*module)) ||
        failed(verifyArtifact(*module)))
      return false;
    return true;
  }

  std::string takeDiagnostics() {
    diagStream.flush();
    return diagnostics;
  }
};

//===----------------------------------------------------------------------===//
// Plan payload.
//===----------------------------------------------------------------------===//

std::string printed(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::string printed(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

Node attributeValue(Attribute attr) {
  if (auto array = llvm::dyn_cast<DenseI64ArrayAttr>(attr)) {
    Node list = Node::makeList();
    for (int64_t v : array.asArrayRef())
      list.push(Node::of(v));
    return list;
  }
  if (auto array = llvm::dyn_cast<DenseF64ArrayAttr>(attr)) {
    Node list = Node::makeList();
    for (double v : array.asArrayRef())
      list.push(Node::of(v));
    return list;
  }
  if (auto integer = llvm::dyn_cast<IntegerAttr>(attr))
    return Node::of(static_cast<int64_t>(integer.getValue().getSExtValue()));
  if (auto real = llvm::dyn_cast<FloatAttr>(attr)) {
    // The exact value of the stored f32 (0.2 : f32 -> 0.20000000298023224),
    // so Python sees precisely what every runtime computes with.
    return Node::of(real.getValueAsDouble());
  }
  if (auto text = llvm::dyn_cast<StringAttr>(attr))
    return Node::of(text.getValue().str());
  if (auto symbol = llvm::dyn_cast<FlatSymbolRefAttr>(attr))
    return Node::of(symbol.getValue().str());
  if (std::optional<llvm::StringRef> value = enumAttrValue(attr))
    return Node::of(value->str());
  if (auto packing = llvm::dyn_cast<PackingAttr>(attr)) {
    Node dict = Node::makeDict();
    dict.add("bits", Node::of(stringifyEnum(packing.getBits()).str()));
    dict.add("group_size", Node::of(static_cast<int64_t>(packing.getGroupSize())));
    dict.add("scale_dtype", Node::of(stringifyEnum(packing.getScaleDtype()).str()));
    dict.add("mode", Node::of(stringifyEnum(packing.getMode()).str()));
    return dict;
  }
  return Node::of(printed(attr));
}

/// Structured form of a type, so Python never parses type text.
Node typeRecord(Type type) {
  Node record = Node::makeDict();
  if (auto sparse = llvm::dyn_cast<SparseTensorType>(type)) {
    record.add("kind", Node::of(std::string("sparse")));
    record.add("dtype", Node::of(describeDtype(sparse.getDtype())));
    record.add("shape", Node::null());
    record.add("family", Node::null());
  } else if (auto weight = llvm::dyn_cast<WeightType>(type)) {
    record.add("kind", Node::of(std::string("weight")));
    record.add("dtype", Node::of(describeDtype(weight.getDtype())));
    record.add("shape", Node::null());
    record.add("family", Node::of(stringifyEnum(weight.getFamily()).str()));
  } else if (auto tensor = llvm::dyn_cast<RankedTensorType>(type)) {
    record.add("kind", Node::of(std::string("tensor")));
    record.add("dtype", Node::of(describeDtype(tensor.getElementType())));
    Node shape = Node::makeList();
    for (int64_t dim : tensor.getShape())
      shape.push(Node::of(ShapedType::isDynamic(dim) ? int64_t(-1) : dim));
    record.add("shape", std::move(shape));
    record.add("family", Node::null());
  } else {
    record.add("kind", Node::of(std::string("other")));
    record.add("dtype", Node::null());
    record.add("shape", Node::null());
    record.add("family", Node::null());
  }
  return record;
}

struct PlanBuilder {
  llvm::DenseMap<Value, std::string> labels;
  llvm::DenseMap<Type, std::string> typeTexts;
  llvm::StringMap<bool> typeSeen;
  Node types = Node::makeDict();
  unsigned nextValue = 0;

  const std::string &typeOf(Type type) {
    auto it = typeTexts.find(type);
    if (it != typeTexts.end())
      return it->second;
    std::string text = printed(type);
    if (typeSeen.try_emplace(text, true).second)
      types.add(text, typeRecord(type));
    return typeTexts.try_emplace(type, std::move(text)).first->second;
  }

  Node build(ModuleOp module) {
    func::FuncOp entry;
    for (Operation &op : module.getBody()->getOperations())
      if (auto fn = llvm::dyn_cast<func::FuncOp>(op))
        entry = fn;
    auto strings = [&](llvm::StringRef name) {
      llvm::SmallVector<std::string> out;
      if (auto array = llvm::dyn_cast_or_null<ArrayAttr>(module->getAttr(name)))
        for (Attribute item : array)
          if (auto text = llvm::dyn_cast<StringAttr>(item))
            out.push_back(text.getValue().str());
      return out;
    };
    llvm::SmallVector<std::string> inputNames = strings("lattice.input_names");
    llvm::SmallVector<std::string> inputRoles = strings("lattice.input_roles");
    llvm::SmallVector<std::string> outputNames = strings("lattice.output_names");
    llvm::SmallVector<std::string> outputRoles = strings("lattice.output_roles");

    Node plan = Node::makeDict();
    plan.add("ir_version", Node::of(schema::kIrVersion));
    plan.add("schema_digest", Node::of(std::string(schema::kSchemaDigest)));
    plan.add("weight_file", Node::of(std::string(schema::kWeightFile)));
    plan.add("name", Node::of(entry.getSymName().str()));

    Node args = Node::makeList();
    for (BlockArgument arg : entry.getArguments()) {
      unsigned i = arg.getArgNumber();
      std::string label = "arg" + std::to_string(i);
      labels[arg] = label;
      Node record = Node::makeDict();
      record.add("name", Node::of(label));
      record.add("abi_name", Node::of(i < inputNames.size() ? inputNames[i] : label));
      record.add("type", Node::of(typeOf(arg.getType())));
      record.add("role", Node::of(i < inputRoles.size() ? inputRoles[i] : std::string("tensor")));
      args.push(std::move(record));
    }
    plan.add("args", std::move(args));

    Node ops = Node::makeList();
    Node returns = Node::makeList();
    Node outputs = Node::makeList();
    for (Operation &op : entry.getBody().front()) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
          std::string label = labels.lookup(value);
          returns.push(Node::of(label));
          Node record = Node::makeDict();
          record.add("name", Node::of(label));
          record.add("abi_name", Node::of(i < outputNames.size() ? outputNames[i] : label));
          record.add("type", Node::of(typeOf(value.getType())));
          record.add("role",
                     Node::of(i < outputRoles.size() ? outputRoles[i] : std::string("tensor")));
          outputs.push(std::move(record));
        }
        continue;
      }
      Node record = Node::makeDict();
      record.add("name", Node::of(op.getName().getStringRef().str()));
      Node operands = Node::makeList();
      Node operandTypes = Node::makeList();
      for (Value operand : op.getOperands()) {
        operands.push(Node::of(labels.lookup(operand)));
        operandTypes.push(Node::of(typeOf(operand.getType())));
      }
      Node results = Node::makeList();
      Node resultTypes = Node::makeList();
      for (Value result : op.getResults()) {
        std::string label = "v" + std::to_string(nextValue++);
        labels[result] = label;
        results.push(Node::of(label));
        resultTypes.push(Node::of(typeOf(result.getType())));
      }
      Node attrs = Node::makeDict();
      if (std::optional<RegisteredOperationName> info = op.getRegisteredInfo())
        for (StringAttr name : info->getAttributeNames())
          if (std::optional<Attribute> attr = op.getInherentAttr(name.getValue()); attr && *attr) {
            // #lattice.packing<dense> means what an absent packing means.
            if (auto packing = llvm::dyn_cast<PackingAttr>(*attr);
                packing && packing.getBits() == PackingBits::dense)
              continue;
            attrs.add(name.getValue().str(), attributeValue(*attr));
          }
      record.add("operands", std::move(operands));
      record.add("results", std::move(results));
      record.add("attrs", std::move(attrs));
      record.add("operand_types", std::move(operandTypes));
      record.add("result_types", std::move(resultTypes));
      ops.push(std::move(record));
    }
    plan.add("ops", std::move(ops));
    plan.add("returns", std::move(returns));
    plan.add("outputs", std::move(outputs));
    plan.add("types", std::move(types));
    return plan;
  }
};

//===----------------------------------------------------------------------===//
// Dialect description.
//===----------------------------------------------------------------------===//

template <int... N>
int64_t exactOperands(const RegisteredOperationName &info, std::integer_sequence<int, N...>) {
  int64_t found = -1;
  ((info.hasTrait<OpTrait::NOperands<N + 2>::template Impl>() ? (found = N + 2) : 0), ...);
  return found;
}

template <int... N>
int64_t atLeastOperands(const RegisteredOperationName &info, std::integer_sequence<int, N...>) {
  int64_t found = -1;
  ((info.hasTrait<OpTrait::AtLeastNOperands<N + 1>::template Impl>() ? (found = N + 1) : 0), ...);
  return found;
}

template <int... N>
int64_t exactResults(const RegisteredOperationName &info, std::integer_sequence<int, N...>) {
  int64_t found = -1;
  ((info.hasTrait<OpTrait::NResults<N + 2>::template Impl>() ? (found = N + 2) : 0), ...);
  return found;
}

template <typename OpT> void describeOp(MLIRContext *context, Node &out) {
  std::optional<RegisteredOperationName> info =
      RegisteredOperationName::lookup(OpT::getOperationName(), context);
  if (!info)
    return;
  Node record = Node::makeDict();
  record.add("name", Node::of(OpT::getOperationName().str()));
  Node operandNames = Node::makeList();
  for (llvm::StringRef name : OpT::getSchemaOperandNames())
    operandNames.push(Node::of(name.str()));
  record.add("operand_names", std::move(operandNames));

  // Operand and result counts as ODS compiled them (its count traits).
  auto sequence = std::make_integer_sequence<int, 8>();
  int64_t minOperands = 0;
  bool variadic = info->hasTrait<OpTrait::VariadicOperands>();
  if (info->hasTrait<OpTrait::ZeroOperands>())
    minOperands = 0;
  else if (info->hasTrait<OpTrait::OneOperand>())
    minOperands = 1;
  else if (int64_t exact = exactOperands(*info, sequence); exact >= 0)
    minOperands = exact;
  else if (int64_t least = atLeastOperands(*info, sequence); least >= 0)
    minOperands = least;
  record.add("min_operands", Node::of(minOperands));
  record.add("variadic_operands", Node::of(variadic));
  int64_t results = -1;
  if (info->hasTrait<OpTrait::ZeroResults>())
    results = 0;
  else if (info->hasTrait<OpTrait::OneResult>())
    results = 1;
  else
    results = exactResults(*info, sequence);
  record.add("num_results", Node::of(results));

  Node attributes = Node::makeList();
  for (StringAttr name : info->getAttributeNames())
    attributes.push(Node::of(name.getValue().str()));
  record.add("attribute_names", std::move(attributes));
  out.push(std::move(record));
}

template <typename... Ops> void describeOps(MLIRContext *context, Node &out) {
  (describeOp<Ops>(context, out), ...);
}

} // namespace

namespace lattice_api {

Outcome check(std::string_view text, bool buildPlan) {
  Outcome outcome;
  onParserStack([&] {
    Session session;
    outcome.ok = session.run(text);
    if (outcome.ok && buildPlan)
      outcome.value = PlanBuilder().build(*session.module);
    outcome.diagnostics = session.takeDiagnostics();
  });
  return outcome;
}

Node dialectOps() {
  Session session;
  Node out = Node::makeList();
  describeOps<
#define GET_OP_LIST
#include "LatticeOps.cpp.inc"
      >(session.context.get(), out);
  return out;
}

const char *schemaDigest() { return schema::kSchemaDigest; }

int64_t irVersion() { return schema::kIrVersion; }

} // namespace lattice_api
