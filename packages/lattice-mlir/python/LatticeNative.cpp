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

/// Owns a new reference; raises the pending Python error when it is null.
nb::object owned(PyObject *object) {
  if (!object)
    throw nb::python_error();
  return nb::steal(object);
}

/// The payload dict of a `Plan` (its shape: `lattice_mlir.import_plan`),
/// built with the C API straight from the flat arrays: one str per entry of
/// the plan's string table, shared by every place it occurs (fewer
/// allocations, and Python's dict lookups and comparisons on the plan meet
/// identical objects with their hashes cached); field names interned once.
class PlanConverter {
public:
  explicit PlanConverter(const lattice_api::Plan &plan) : plan(plan) {
    strings.resize(plan.strings.size());
  }

  nb::object operator()() {
    nb::object payload = owned(PyDict_New());
    set(payload, "ir_version", owned(PyLong_FromLongLong(plan.irVersion)));
    set(payload, "schema_digest", str(plan.schemaDigest));
    set(payload, "weight_file", str(plan.weightFile));
    set(payload, "name", str(plan.name));
    set(payload, "args", ports(plan.args));
    nb::object ops = owned(PyList_New(static_cast<Py_ssize_t>(plan.ops.size())));
    for (size_t i = 0; i < plan.ops.size(); ++i)
      PyList_SET_ITEM(ops.ptr(), i, op(plan.ops[i]).release().ptr());
    set(payload, "ops", ops);
    set(payload, "returns", refs(plan.returns.data(), plan.returns.size()));
    set(payload, "outputs", ports(plan.outputs));
    nb::object types = owned(PyDict_New());
    for (const lattice_api::Plan::TypeRecord &type : plan.types)
      setItem(types, str(type.text), typeRecord(type));
    set(payload, "types", types);
    return payload;
  }

private:
  const lattice_api::Plan &plan;
  std::vector<nb::object> strings;

  /// The shared str of string-table entry `ref`.
  nb::object str(lattice_api::Plan::Ref ref) {
    nb::object &slot = strings[ref];
    if (!slot.is_valid())
      slot = utf8Text(plan.strings[ref]);
    return slot;
  }

  static void setItem(const nb::object &dict, const nb::object &key, const nb::object &value) {
    if (PyDict_SetItem(dict.ptr(), key.ptr(), value.ptr()) != 0)
      throw nb::python_error();
  }

  /// `dict[name] = value` for a field name: each name is one interned str,
  /// made on first use and kept for the life of the process.
  static void set(const nb::object &dict, const char *name, const nb::object &value) {
    static std::unordered_map<const char *, PyObject *> keys;
    PyObject *&key = keys[name];
    if (!key && !(key = PyUnicode_InternFromString(name)))
      throw nb::python_error();
    if (PyDict_SetItem(dict.ptr(), key, value.ptr()) != 0)
      throw nb::python_error();
  }

  nb::object refs(const lattice_api::Plan::Ref *begin, size_t size) {
    nb::object list = owned(PyList_New(static_cast<Py_ssize_t>(size)));
    for (size_t i = 0; i < size; ++i)
      PyList_SET_ITEM(list.ptr(), i, str(begin[i]).release().ptr());
    return list;
  }

  nb::object ints(uint32_t begin, uint32_t size) {
    nb::object list = owned(PyList_New(size));
    for (uint32_t i = 0; i < size; ++i)
      PyList_SET_ITEM(list.ptr(), i,
                      owned(PyLong_FromLongLong(plan.ints[begin + i])).release().ptr());
    return list;
  }

  nb::object ports(const std::vector<lattice_api::Plan::Port> &items) {
    nb::object list = owned(PyList_New(static_cast<Py_ssize_t>(items.size())));
    for (size_t i = 0; i < items.size(); ++i) {
      const lattice_api::Plan::Port &port = items[i];
      nb::object record = owned(PyDict_New());
      set(record, "name", str(port.name));
      set(record, "abi_name", str(port.abiName));
      set(record, "type", str(port.type));
      set(record, "role", str(port.role));
      PyList_SET_ITEM(list.ptr(), i, record.release().ptr());
    }
    return list;
  }

  nb::object op(const lattice_api::Plan::Op &op) {
    const lattice_api::Plan::Ref *at = plan.refs.data() + op.refBegin;
    nb::object record = owned(PyDict_New());
    set(record, "name", str(op.name));
    set(record, "operands", refs(at, op.numOperands));
    set(record, "results", refs(at + op.numOperands, op.numResults));
    nb::object attrs = owned(PyDict_New());
    for (uint32_t i = 0; i < op.numAttrs; ++i) {
      const lattice_api::Plan::Attr &attr = plan.attrs[op.attrBegin + i];
      setItem(attrs, str(attr.name), attrValue(attr));
    }
    set(record, "attrs", attrs);
    set(record, "operand_types", refs(at + op.numOperands + op.numResults, op.numOperands));
    set(record, "result_types", refs(at + 2 * op.numOperands + op.numResults, op.numResults));
    if (op.location != lattice_api::Plan::kNone)
      set(record, "location", str(op.location));
    return record;
  }

  nb::object attrValue(const lattice_api::Plan::Attr &attr) {
    using Kind = lattice_api::Plan::Attr::Kind;
    switch (attr.kind) {
    case Kind::Int:
      return owned(PyLong_FromLongLong(attr.integer));
    case Kind::Float:
      return owned(PyFloat_FromDouble(attr.real));
    case Kind::Str:
      return str(attr.text);
    case Kind::Ints:
      return ints(attr.begin, attr.size);
    case Kind::Floats: {
      nb::object list = owned(PyList_New(attr.size));
      for (uint32_t i = 0; i < attr.size; ++i)
        PyList_SET_ITEM(list.ptr(), i,
                        owned(PyFloat_FromDouble(plan.reals[attr.begin + i])).release().ptr());
      return list;
    }
    case Kind::Packing: {
      nb::object packing = owned(PyDict_New());
      set(packing, "bits", str(attr.text));
      set(packing, "group_size", owned(PyLong_FromLongLong(attr.integer)));
      set(packing, "scale_dtype", str(attr.scaleDtype));
      set(packing, "mode", str(attr.mode));
      return packing;
    }
    }
    return nb::none();
  }

  nb::object typeRecord(const lattice_api::Plan::TypeRecord &type) {
    nb::object record = owned(PyDict_New());
    set(record, "kind", str(type.kind));
    set(record, "dtype", type.hasDtype ? str(type.dtype) : nb::none());
    set(record, "shape", type.hasShape ? ints(type.shapeBegin, type.shapeSize) : nb::none());
    set(record, "family", type.hasFamily ? str(type.family) : nb::none());
    return record;
  }
};

} // namespace

NB_MODULE(_native, m) {
  m.doc() = "Native lattice MLIR dialect: parse, verify and import lattice artifacts.";

  m.def(
      "check",
      [](const std::string &text, bool buildPlan) {
        lattice_api::CheckOutcome outcome;
        {
          nb::gil_scoped_release release;
          outcome = lattice_api::check(text, buildPlan);
        }
        nb::object plan = outcome.hasPlan ? PlanConverter(outcome.plan)() : nb::none();
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
