//===- LatticeNative.cpp - nanobind module lattice_mlir._native -----------===//
//
// Thin binding over LatticeApi.h (no MLIR header here: this translation unit
// is built with exceptions for nanobind, the MLIR-facing code without).
// Parsing and verification run with the GIL released.
//
//===----------------------------------------------------------------------===//

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "lattice/LatticeApi.h"

namespace nb = nanobind;
using lattice_api::Node;

namespace {

/// UTF-8 text as str.  The native side only admits UTF-8 strings into a
/// plan, but diagnostics quote the text they reject: any byte that is not
/// UTF-8 shows as a backslash escape instead of escaping as
/// UnicodeDecodeError.
nb::str utf8Text(const std::string &value) {
  PyObject *decoded =
      PyUnicode_DecodeUTF8(value.data(), static_cast<Py_ssize_t>(value.size()), "backslashreplace");
  if (!decoded)
    throw nb::python_error();
  return nb::steal<nb::str>(decoded);
}

/// Converts a Node tree to Python objects.  A payload repeats the same few
/// strings (field names, type texts, labels) hundreds of times, so each
/// distinct string becomes one Python str shared by every place it occurs:
/// fewer allocations, and Python's dict lookups and comparisons on the plan
/// then meet identical objects with their hashes already cached.
class Converter {
public:
  nb::object operator()(const Node &node) {
    switch (node.kind) {
    case Node::Kind::Null:
      return nb::none();
    case Node::Kind::Bool:
      return nb::bool_(node.boolean);
    case Node::Kind::Int:
      return nb::int_(node.integer);
    case Node::Kind::Float:
      return nb::float_(node.real);
    case Node::Kind::Str:
      return text(node.text);
    case Node::Kind::List: {
      nb::list out;
      for (const Node &item : node.list)
        out.append((*this)(item));
      return out;
    }
    case Node::Kind::Dict: {
      nb::dict out;
      for (const auto &[key, value] : node.dict)
        out[text(key)] = (*this)(value);
      return out;
    }
    }
    return nb::none();
  }

private:
  // Keys view the tree's own strings, which outlive the conversion.
  std::unordered_map<std::string_view, nb::str> strings;

  nb::str text(const std::string &value) {
    auto found = strings.find(value);
    if (found != strings.end())
      return found->second;
    return strings.emplace(value, utf8Text(value)).first->second;
  }
};

nb::object toPython(const Node &node) { return Converter()(node); }

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "Native lattice MLIR dialect: parse, verify and import lattice artifacts.";

  m.def(
      "check",
      [](const std::string &text, bool buildPlan) {
        lattice_api::Outcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = lattice_api::check(text, buildPlan);
        }
        nb::object plan = outcome.ok && buildPlan ? toPython(outcome.value) : nb::none();
        return nb::make_tuple(outcome.ok, utf8Text(outcome.diagnostics), plan);
      },
      nb::arg("text"), nb::arg("build_plan"),
      "Parse and verify lattice MLIR once and, with build_plan, build its plan payload from "
      "that parse; returns (valid, diagnostics, plan or None).");

  m.def(
      "rewrite_module",
      [](const std::string &text, const nb::dict &attributes) {
        std::vector<lattice_api::ModuleAttrEdit> edits;
        for (auto [key, value] : attributes) {
          lattice_api::ModuleAttrEdit edit;
          edit.name = nb::cast<std::string>(key);
          if (nb::isinstance<nb::str>(value)) {
            edit.text = nb::cast<std::string>(value);
          } else {
            edit.isArray = true;
            for (nb::handle item : nb::cast<nb::list>(value))
              edit.items.push_back(nb::cast<std::string>(item));
          }
          edits.push_back(std::move(edit));
        }
        lattice_api::Outcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = lattice_api::rewriteModule(text, edits);
        }
        nb::object info = outcome.ok ? toPython(outcome.value) : nb::none();
        return nb::make_tuple(outcome.ok, outcome.diagnostics, info);
      },
      nb::arg("text"), nb::arg("attributes"),
      "Parse and verify every op, set module attributes (str or list of str) and print; "
      "returns (ok, diagnostics, {attributes, results, printed}).");

  m.def(
      "dialect_ops", []() { return toPython(lattice_api::dialectOps()); },
      "Describe every op the compiled dialect registers.");

  m.attr("SCHEMA_DIGEST") = lattice_api::schemaDigest();
  m.attr("IR_VERSION") = lattice_api::irVersion();
}
