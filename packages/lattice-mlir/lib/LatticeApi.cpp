//===- LatticeApi.cpp - in-process verify and plan import -----------------===//
//
// Every call runs on a parser thread (LatticeParserPool.h): a long-lived
// thread with a stack of limits::kParserStackBytes (the pre-check bounds
// nesting, and the large stack is the second line of defence whatever the
// caller's thread has) and its own ready, single-threaded MLIRContext, which
// serves a bounded number of calls.  Calls are independent (each has its own
// diagnostic handler and source manager; see LatticeParserPool.cpp for what
// a reused context keeps) and safe to run with the GIL released, from any
// number of threads at once.  Diagnostics go to a string through a
// SourceMgr handler: nothing is printed to stderr.
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

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <utility>

using namespace mlir;
using namespace mlir::lattice;
using lattice_api::CheckOutcome;
using lattice_api::Node;
using lattice_api::Plan;

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

/// One parse on a borrowed context: the source buffer, the captured text
/// and the diagnostic handler, all of this call alone.
struct Session {
  MLIRContext &context;
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  llvm::raw_string_ostream diagStream{diagnostics};
  SourceMgrDiagnosticHandler handler{sourceMgr, &context, diagStream};
  OwningOpRef<ModuleOp> module;

  explicit Session(MLIRContext &context) : context(context) {}

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
    ParserConfig config(&context, /*verifyAfterParse=*/false);
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

/// Builds a module's `Plan` (LatticeApi.h): one walk over @forward.
class PlanBuilder {
public:
  using Ref = Plan::Ref;

  Plan build(ModuleOp module) {
    func::FuncOp entry;
    for (Operation &op : module.getBody()->getOperations())
      if (auto fn = llvm::dyn_cast<func::FuncOp>(op))
        entry = fn;
    auto strings = [&](llvm::StringRef name) {
      llvm::SmallVector<Ref> out;
      if (auto array = llvm::dyn_cast_or_null<ArrayAttr>(module->getAttr(name)))
        for (Attribute item : array)
          if (auto text = llvm::dyn_cast<StringAttr>(item))
            out.push_back(intern(text.getValue()));
      return out;
    };
    llvm::SmallVector<Ref> inputNames = strings("lattice.input_names");
    llvm::SmallVector<Ref> inputRoles = strings("lattice.input_roles");
    llvm::SmallVector<Ref> outputNames = strings("lattice.output_names");
    llvm::SmallVector<Ref> outputRoles = strings("lattice.output_roles");
    Ref tensorRole = intern("tensor");

    plan.irVersion = schema::kIrVersion;
    plan.schemaDigest = intern(schema::kSchemaDigest);
    plan.weightFile = intern(schema::kWeightFile);
    plan.name = intern(entry.getSymName());

    for (BlockArgument arg : entry.getArguments()) {
      unsigned i = arg.getArgNumber();
      Ref label = newLabel("arg", i);
      labels[arg] = label;
      plan.args.push_back({label, i < inputNames.size() ? inputNames[i] : label,
                           typeOf(arg.getType()),
                           i < inputRoles.size() ? inputRoles[i] : tensorRole});
    }

    Block &body = entry.getBody().front();
    plan.ops.reserve(body.getOperations().size());
    unsigned nextValue = 0;
    for (Operation &op : body) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
          Ref label = labelOf(value);
          plan.returns.push_back(label);
          plan.outputs.push_back({label, i < outputNames.size() ? outputNames[i] : label,
                                  typeOf(value.getType()),
                                  i < outputRoles.size() ? outputRoles[i] : tensorRole});
        }
        continue;
      }
      Plan::Op record;
      record.name = intern(op.getName().getStringRef());
      record.refBegin = static_cast<uint32_t>(plan.refs.size());
      record.numOperands = op.getNumOperands();
      record.numResults = op.getNumResults();
      for (Value operand : op.getOperands())
        plan.refs.push_back(labelOf(operand));
      for (Value result : op.getResults()) {
        Ref label = newLabel("v", nextValue++);
        labels[result] = label;
        plan.refs.push_back(label);
      }
      for (Value operand : op.getOperands())
        plan.refs.push_back(typeOf(operand.getType()));
      for (Value result : op.getResults())
        plan.refs.push_back(typeOf(result.getType()));
      record.attrBegin = static_cast<uint32_t>(plan.attrs.size());
      if (std::optional<RegisteredOperationName> info = op.getRegisteredInfo())
        for (StringAttr name : info->getAttributeNames())
          if (std::optional<Attribute> attr = op.getInherentAttr(name.getValue()); attr && *attr) {
            // #lattice.packing<dense> means what an absent packing means.
            if (auto packing = llvm::dyn_cast<PackingAttr>(*attr);
                packing && packing.getBits() == PackingBits::dense)
              continue;
            plan.attrs.push_back(attributeValue(intern(name.getValue()), *attr));
          }
      record.numAttrs = static_cast<uint32_t>(plan.attrs.size()) - record.attrBegin;
      record.location = locationOf(op.getLoc());
      plan.ops.push_back(record);
    }
    return std::move(plan);
  }

private:
  Plan plan;
  llvm::StringMap<Ref> interned;
  llvm::DenseMap<Value, Ref> labels;
  llvm::DenseMap<Type, Ref> typeTexts;

  /// The index of `text` in the plan's string table, added on first use.
  Ref intern(llvm::StringRef text) {
    auto [it, added] = interned.try_emplace(text, static_cast<Ref>(plan.strings.size()));
    if (added)
      plan.strings.push_back(text.str());
    return it->second;
  }

  /// The name an exporter gave the op's source (`loc("conv_input.0")`, the
  /// module path it came from), or kNone.  The parser gives an op without a
  /// written location its place in the text (a FileLineColLoc), which names
  /// nothing; a NameLoc may also sit inside a FusedLoc or CallSiteLoc, where
  /// the outermost one found first (pre-order) is the op's name.
  Ref locationOf(Location loc) {
    if (llvm::isa<FileLineColLoc, UnknownLoc>(loc))
      return Plan::kNone; // the common case, without a walk
    NameLoc name = llvm::dyn_cast<NameLoc>(loc);
    if (!name)
      name = LocationAttr(loc).findInstanceOf<NameLoc>();
    if (!name || name.getName().getValue().empty())
      return Plan::kNone;
    return intern(name.getName().getValue());
  }

  /// A new label (`arg3`, `v12`): distinct by construction, so not looked up.
  Ref newLabel(const char *prefix, unsigned number) {
    plan.strings.push_back(prefix + std::to_string(number));
    return static_cast<Ref>(plan.strings.size() - 1);
  }

  /// The label of a defined value (verification guarantees one); a value
  /// without one, which a verified module cannot have, reads as "".
  Ref labelOf(Value value) {
    auto it = labels.find(value);
    return it != labels.end() ? it->second : intern("");
  }

  /// The type's text, with its record added to the table on first use.
  Ref typeOf(Type type) {
    auto it = typeTexts.find(type);
    if (it != typeTexts.end())
      return it->second;
    Ref text = intern(printed(type));
    typeTexts[type] = text;
    if (!llvm::any_of(plan.types, [&](const Plan::TypeRecord &t) { return t.text == text; }))
      plan.types.push_back(typeRecord(text, type));
    return text;
  }

  /// Structured form of a type, so Python never parses type text.
  Plan::TypeRecord typeRecord(Ref text, Type type) {
    Plan::TypeRecord record{text, 0, false, false, false, 0, 0, 0, 0};
    auto dtype = [&](Type element) {
      record.hasDtype = true;
      record.dtype = intern(describeDtype(element));
    };
    if (auto sparse = llvm::dyn_cast<SparseTensorType>(type)) {
      record.kind = intern("sparse");
      dtype(sparse.getDtype());
    } else if (auto weight = llvm::dyn_cast<WeightType>(type)) {
      record.kind = intern("weight");
      dtype(weight.getDtype());
      record.hasFamily = true;
      record.family = intern(stringifyEnum(weight.getFamily()));
    } else if (auto tensor = llvm::dyn_cast<RankedTensorType>(type)) {
      record.kind = intern("tensor");
      dtype(tensor.getElementType());
      record.hasShape = true;
      record.shapeBegin = static_cast<uint32_t>(plan.ints.size());
      record.shapeSize = static_cast<uint32_t>(tensor.getRank());
      for (int64_t dim : tensor.getShape())
        plan.ints.push_back(ShapedType::isDynamic(dim) ? int64_t(-1) : dim);
    } else {
      record.kind = intern("other");
    }
    return record;
  }

  Plan::Attr attributeValue(Ref name, Attribute attr) {
    using Kind = Plan::Attr::Kind;
    Plan::Attr value;
    value.name = name;
    if (auto array = llvm::dyn_cast<DenseI64ArrayAttr>(attr)) {
      value.kind = Kind::Ints;
      value.begin = static_cast<uint32_t>(plan.ints.size());
      value.size = static_cast<uint32_t>(array.size());
      llvm::append_range(plan.ints, array.asArrayRef());
    } else if (auto array = llvm::dyn_cast<DenseF64ArrayAttr>(attr)) {
      value.kind = Kind::Floats;
      value.begin = static_cast<uint32_t>(plan.reals.size());
      value.size = static_cast<uint32_t>(array.size());
      llvm::append_range(plan.reals, array.asArrayRef());
    } else if (auto integer = llvm::dyn_cast<IntegerAttr>(attr)) {
      value.kind = Kind::Int;
      value.integer = integer.getValue().getSExtValue();
    } else if (auto real = llvm::dyn_cast<FloatAttr>(attr)) {
      // The exact value of the stored f32 (0.2 : f32 -> 0.20000000298023224),
      // so Python sees precisely what every runtime computes with.
      value.kind = Kind::Float;
      value.real = real.getValueAsDouble();
    } else if (auto text = llvm::dyn_cast<StringAttr>(attr)) {
      value.kind = Kind::Str;
      value.text = intern(text.getValue());
    } else if (auto symbol = llvm::dyn_cast<FlatSymbolRefAttr>(attr)) {
      value.kind = Kind::Str;
      value.text = intern(symbol.getValue());
    } else if (std::optional<llvm::StringRef> keyword = enumAttrValue(attr)) {
      value.kind = Kind::Str;
      value.text = intern(*keyword);
    } else if (auto packing = llvm::dyn_cast<PackingAttr>(attr)) {
      value.kind = Kind::Packing;
      value.text = intern(stringifyEnum(packing.getBits()));
      value.integer = static_cast<int64_t>(packing.getGroupSize());
      value.scaleDtype = intern(stringifyEnum(packing.getScaleDtype()));
      value.mode = intern(stringifyEnum(packing.getMode()));
    } else {
      value.kind = Kind::Str;
      value.text = intern(printed(attr));
    }
    return value;
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

CheckOutcome check(std::string_view text, bool buildPlan) {
  CheckOutcome outcome;
  runOnParserThread(text.size(), [&](MLIRContext &context) {
    Session session(context);
    outcome.ok = session.run(text);
    if (outcome.ok && buildPlan) {
      outcome.plan = PlanBuilder().build(*session.module);
      outcome.hasPlan = true;
    }
    outcome.diagnostics = session.takeDiagnostics();
    return outcome.ok;
  });
  return outcome;
}

Node dialectOps() {
  std::unique_ptr<MLIRContext> context = makeParserContext();
  Node out = Node::makeList();
  describeOps<
#define GET_OP_LIST
#include "LatticeOps.cpp.inc"
      >(context.get(), out);
  return out;
}

const char *schemaDigest() { return schema::kSchemaDigest; }

int64_t irVersion() { return schema::kIrVersion; }

} // namespace lattice_api
