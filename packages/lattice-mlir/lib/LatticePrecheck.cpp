//===- LatticePrecheck.cpp - reject forward SSA references before parsing -===//
//
// MLIR 19's parser frees IR in the wrong order when a parse fails after a
// forward reference was resolved by a definition in another region
// (llvm/llvm-project#107121, fixed upstream by #127778 after LLVM 19): a
// heap use-after-free that can kill the process.  A valid lattice artifact
// never contains a forward reference (its @forward body is one block whose
// values are defined before use, and every region-bearing op of the lattice
// and func dialects is isolated from above), so this lexical pass rejects,
// before MLIR sees the text, every use of an SSA value that is not defined
// earlier in the same region.  It is deliberately conservative: it only ever
// turns an input MLIR would also reject into a clear diagnostic.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeDialect.h"

#include "llvm/ADT/StringSet.h"

#include <cctype>
#include <vector>

using namespace mlir;

namespace {

bool isIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}

enum class Last { other, caret, at, attributesKeyword, less };
enum class ParenKind { other, blockArgs, signature };

class Scanner {
public:
  explicit Scanner(llvm::StringRef text) : text(text) { scopes.emplace_back(); }

  std::optional<lattice::ForwardReference> run() {
    while (pos < text.size()) {
      char c = text[pos];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos;
      } else if (c == '"') {
        skipString();
        last = Last::other;
      } else if (c == '/' && peek(1) == '/') {
        skipComment();
      } else if (c == '{') {
        openScope();
      } else if (c == '}') {
        if (scopes.size() > 1)
          scopes.pop_back();
        last = Last::other;
        ++pos;
      } else if (c == '(') {
        parens.push_back(last == Last::caret  ? ParenKind::blockArgs
                         : last == Last::at ? ParenKind::signature
                                            : ParenKind::other);
        last = Last::other;
        ++pos;
      } else if (c == ')') {
        if (!parens.empty())
          parens.pop_back();
        last = Last::other;
        ++pos;
      } else if (c == '^' || c == '@') {
        ++pos;
        if (c == '@' && pos < text.size() && text[pos] == '"')
          skipString();
        else
          readId();
        last = c == '^' ? Last::caret : Last::at;
      } else if (c == '%') {
        if (std::optional<lattice::ForwardReference> bad = value())
          return bad;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        llvm::StringRef word = readId();
        last = word == "attributes" ? Last::attributesKeyword : Last::other;
      } else {
        last = c == '<' ? Last::less : Last::other;
        ++pos;
      }
    }
    return std::nullopt;
  }

private:
  char peek(size_t ahead) const {
    return pos + ahead < text.size() ? text[pos + ahead] : '\0';
  }

  llvm::StringRef readId() {
    size_t start = pos;
    while (pos < text.size() && isIdChar(text[pos]))
      ++pos;
    return text.slice(start, pos);
  }

  void skipString() {
    ++pos; // opening quote
    while (pos < text.size() && text[pos] != '"' && text[pos] != '\n')
      pos += text[pos] == '\\' ? 2 : 1;
    ++pos;
  }

  void skipComment() {
    size_t end = text.find('\n', pos);
    if (end == llvm::StringRef::npos)
      end = text.size();
    // lattice-opt --split-input-file separates modules with this marker;
    // each chunk is parsed on its own.
    if (text.slice(pos, end).rtrim() == "// -----") {
      scopes.assign(1, llvm::StringSet<>());
      pending.clear();
      parens.clear();
    }
    pos = end;
  }

  void openScope() {
    scopes.emplace_back();
    // A function signature's arguments belong to the body, the first brace
    // outside parentheses that is not a property (`<{`) or `attributes` dict.
    if (!pending.empty() && parens.empty() && last != Last::attributesKeyword &&
        last != Last::less) {
      for (const auto &name : pending)
        scopes.back().insert(name.getKey());
      pending.clear();
    }
    last = Last::other;
    ++pos;
  }

  /// A `%name` token: a result definition (`%a, %b = ...`), an argument
  /// definition (`%a: type` in a block or signature argument list) or a use.
  std::optional<lattice::ForwardReference> value() {
    size_t start = pos;
    ++pos;
    llvm::StringRef name = readId();
    if (pos < text.size() && text[pos] == '#') { // %0#1: one result of a group
      ++pos;
      readId();
    }
    last = Last::other;
    if (isResultList()) {
      scopes.back().insert(name);
      return std::nullopt;
    }
    size_t after = pos;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t'))
      ++after;
    bool typed = after < text.size() && text[after] == ':' &&
                 (after + 1 >= text.size() || text[after + 1] != ':');
    if (typed && !parens.empty() && parens.back() != ParenKind::other) {
      if (parens.back() == ParenKind::signature)
        pending.insert(name);
      else
        scopes.back().insert(name);
      return std::nullopt;
    }
    if (name.empty() || scopes.back().contains(name))
      return std::nullopt;
    return lattice::ForwardReference{start, ("%" + name).str()};
  }

  /// Whether the `%name` just read starts (or continues) a result list
  /// `%a(:N)?, %b(:N)? =`.
  bool isResultList() const {
    size_t at = pos;
    auto skipSpace = [&] {
      while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at])))
        ++at;
    };
    for (int names = 0; names < 64; ++names) {
      if (at < text.size() && text[at] == ':') { // %a:2 = ...
        ++at;
        while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])))
          ++at;
      }
      skipSpace();
      if (at >= text.size())
        return false;
      if (text[at] == '=')
        return at + 1 >= text.size() || text[at + 1] != '=';
      if (text[at] != ',')
        return false;
      ++at;
      skipSpace();
      if (at >= text.size() || text[at] != '%')
        return false;
      ++at;
      while (at < text.size() && isIdChar(text[at]))
        ++at;
    }
    return false;
  }

  llvm::StringRef text;
  size_t pos = 0;
  Last last = Last::other;
  std::vector<llvm::StringSet<>> scopes;
  llvm::StringSet<> pending;
  std::vector<ParenKind> parens;
};

} // namespace

std::optional<lattice::ForwardReference> lattice::findForwardReference(llvm::StringRef text) {
  return Scanner(text).run();
}

std::string lattice::describeForwardReference(const ForwardReference &ref) {
  return "use of SSA value " + ref.name +
         " before its definition in this region: a lattice graph defines every value before "
         "its first use (one block, in program order); move the op that defines " +
         ref.name + " above this use";
}
