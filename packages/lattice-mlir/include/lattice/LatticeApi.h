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

/// The one native check of an artifact graph: parse, verify every op and
/// apply the artifact rules, once; with `buildPlan`, a valid module's plan
/// payload is built from that same parse (`value` is the payload dict), so
/// validating and importing a graph never parses or verifies it twice.
Outcome check(std::string_view text, bool buildPlan);

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
