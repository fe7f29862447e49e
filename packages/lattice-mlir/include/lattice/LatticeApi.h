//===- LatticeApi.h - plain C++ surface of the native module ----*- C++ -*-===//
//
// The Python binding talks to MLIR only through this header, which includes
// no LLVM or MLIR header.  That keeps the binding translation unit (built
// with exceptions, as nanobind requires) apart from the MLIR-facing code
// (built with -fno-exceptions, like LLVM itself).
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEAPI_H
#define LATTICE_LATTICEAPI_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lattice_api {

/// A JSON-like value: the plan payload and op descriptions cross the
/// binding as a tree of these.
struct Node {
  enum class Kind { Null, Bool, Int, Float, Str, List, Dict };
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<Node> list;
  std::vector<std::pair<std::string, Node>> dict;

  static Node null() { return Node(); }
  static Node of(bool v) {
    Node n;
    n.kind = Kind::Bool;
    n.boolean = v;
    return n;
  }
  static Node of(int64_t v) {
    Node n;
    n.kind = Kind::Int;
    n.integer = v;
    return n;
  }
  static Node of(double v) {
    Node n;
    n.kind = Kind::Float;
    n.real = v;
    return n;
  }
  static Node of(std::string v) {
    Node n;
    n.kind = Kind::Str;
    n.text = std::move(v);
    return n;
  }
  static Node makeList() {
    Node n;
    n.kind = Kind::List;
    return n;
  }
  static Node makeDict() {
    Node n;
    n.kind = Kind::Dict;
    return n;
  }
  Node &add(std::string key, Node value) {
    dict.emplace_back(std::move(key), std::move(value));
    return dict.back().second;
  }
  Node &push(Node value) {
    list.push_back(std::move(value));
    return list.back();
  }
};

/// Outcome of a native call: ok, the captured diagnostics, and a value.
struct Outcome {
  bool ok = false;
  std::string diagnostics;
  Node value;
};

/// The plan payload of a verified module in flat, typed form: what the
/// binding turns into the payload dict that `RuntimePlan.from_native`
/// freezes (its fields and their order are that dict's; see
/// `lattice_mlir.import_plan`).  Every string is stored once in `strings`
/// and referred to by its index, and every op's labels, types and
/// attributes sit in a few flat arrays, so building a plan of hundreds of
/// ops allocates a handful of times and the binding creates one Python str
/// per distinct string.
struct Plan {
  using Ref = uint32_t; // an index into `strings`

  /// One value of the entry's ABI: `{"name", "abi_name", "type", "role"}`.
  struct Port {
    Ref name, abiName, type, role;
  };
  /// One attribute of an op, as the payload spells its value.
  struct Attr {
    enum class Kind : uint8_t { Int, Float, Str, Ints, Floats, Packing };
    Ref name = 0;
    Kind kind = Kind::Int;
    int64_t integer = 0; // Int; Packing: the group size
    double real = 0.0;   // Float
    Ref text = 0;        // Str; Packing: the bits
    Ref scaleDtype = 0;  // Packing
    Ref mode = 0;        // Packing
    uint32_t begin = 0;  // Ints / Floats: the entries in `ints` / `reals`
    uint32_t size = 0;
  };
  /// One op: `{"name", "operands", "results", "attrs", "operand_types",
  /// "result_types"}` and, when the op has a source location, `"location"`
  /// last; `refs[refBegin...]` holds the operand labels, the result labels,
  /// the operand types and the result types, in that order.
  struct Op {
    Ref name;
    uint32_t refBegin, numOperands, numResults;
    uint32_t attrBegin, numAttrs; // into `attrs`
    Ref location;                 // the op's name location, or kNone
  };
  /// One entry of the type table: `{"kind", "dtype", "shape", "family"}`.
  struct TypeRecord {
    Ref text, kind;
    bool hasDtype, hasShape, hasFamily;
    Ref dtype, family;
    uint32_t shapeBegin, shapeSize; // into `ints`, -1 for a dynamic dimension
  };
  static constexpr Ref kNone = ~Ref(0);

  std::vector<std::string> strings;
  int64_t irVersion = 0;
  Ref schemaDigest = 0, weightFile = 0, name = 0;
  std::vector<Port> args, outputs;
  std::vector<Ref> returns;
  std::vector<Op> ops;
  std::vector<Ref> refs;
  std::vector<Attr> attrs;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  std::vector<TypeRecord> types;
};

/// Outcome of `check`: the verdict, the captured diagnostics and, when
/// asked for and valid, the plan.
struct CheckOutcome {
  bool ok = false;
  std::string diagnostics;
  bool hasPlan = false;
  Plan plan;
};

/// The one native check of an artifact graph: parse, verify every op and
/// apply the artifact rules, once; with `buildPlan`, a valid module's plan
/// payload is built from that same parse, so validating and importing a
/// graph never parses or verifies it twice.
CheckOutcome check(std::string_view text, bool buildPlan);

/// The ops the built dialect registers (a list of dicts).
Node dialectOps();

/// A module attribute to set: a string, or an array of strings.
struct ModuleAttrEdit {
  std::string name;
  bool isArray = false;
  std::string text;
  std::vector<std::string> items;
};

/// Parse and verify every op (the dialect's verifiers, not the artifact
/// rules), set `edits` on the module and print it (LatticeRewrite.cpp).
/// `value`: {"attributes": {...} as found, "results": ["sparse"|"tensor"|
/// "other", ...] of @forward, "printed": the module text after the edits}.
Outcome rewriteModule(std::string_view text, const std::vector<ModuleAttrEdit> &edits);

/// The schema digest compiled into this build.
const char *schemaDigest();

/// The IR version this build reads.
int64_t irVersion();

} // namespace lattice_api

#endif // LATTICE_LATTICEAPI_H
