//===- LatticePrecheck.cpp - lexical limits and forward references --------===//
//
// One linear scan of the text, before MLIR's parser sees it, refuses:
//
//  * text MLIR's recursive-descent parser could overflow the stack on, or
//    number parsing could stall on: more than limits::kMaxNesting open
//    brackets (( [ { <, which also open every region, callsite location,
//    nested type and attribute), a number literal longer than
//    limits::kMaxNumberChars (MLIR converts digits to APInt/APFloat in
//    quadratic time and, for floats, on the stack), an identifier longer
//    than limits::kMaxIdentifierChars, a string longer than
//    limits::kMaxStringBytes, or more than limits::kMaxInputBytes of text.
//    Aliases (`!t = ...`, `#a = ...`) count at their uses as their whole
//    definition, so chains of aliases cannot nest or grow past the limits
//    either;
//  * a use of an SSA value before its definition in the same region.  MLIR
//    19's parser frees IR in the wrong order when a parse fails after a
//    forward reference was resolved by a definition in another region
//    (llvm/llvm-project#107121, fixed upstream by #127778 after LLVM 19): a
//    heap use-after-free that can kill the process.  A valid lattice
//    artifact never contains a forward reference (its @forward body is one
//    block whose values are defined before use, and every region-bearing op
//    of the lattice and func dialects is isolated from above).
//
// The forward-reference rule only turns text MLIR would also reject into a
// clear diagnostic; the limits are far beyond any real artifact (see
// LatticePrecheck.h).
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticePrecheck.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

using namespace mlir;
using namespace mlir::lattice::limits;
using mlir::lattice::PrecheckFailure;

namespace {

/// Character classes of the scan, ASCII only (as MLIR's lexer reads text),
/// looked up in one table: the scan visits every byte of the text, and the
/// <cctype> functions are calls into libc that also consult the locale.
enum CharClass : uint8_t {
  kSpace = 1,  // ' ' \t \n \v \f \r
  kAlpha = 2,  // A-Z a-z
  kDigit = 4,  // 0-9
  kXDigit = 8, // 0-9 A-F a-f
  kIdChar = 16 // alphanumeric, _ $ . -
};

constexpr std::array<uint8_t, 256> makeCharClasses() {
  std::array<uint8_t, 256> table{};
  for (unsigned c : {' ', '\t', '\n', '\v', '\f', '\r'})
    table[c] |= kSpace;
  for (unsigned c = 'a'; c <= 'z'; ++c)
    table[c] |= kAlpha | kIdChar;
  for (unsigned c = 'A'; c <= 'Z'; ++c)
    table[c] |= kAlpha | kIdChar;
  for (unsigned c = '0'; c <= '9'; ++c)
    table[c] |= kDigit | kXDigit | kIdChar;
  for (unsigned c = 'a'; c <= 'f'; ++c)
    table[c] |= kXDigit;
  for (unsigned c = 'A'; c <= 'F'; ++c)
    table[c] |= kXDigit;
  for (unsigned c : {'_', '$', '.', '-'})
    table[c] |= kIdChar;
  return table;
}

constexpr std::array<uint8_t, 256> kCharClasses = makeCharClasses();

inline bool hasClass(char c, CharClass kind) {
  return (kCharClasses[static_cast<unsigned char>(c)] & kind) != 0;
}
inline bool isSpace(char c) { return hasClass(c, kSpace); }
inline bool isAlpha(char c) { return hasClass(c, kAlpha); }
inline bool isDigit(char c) { return hasClass(c, kDigit); }
inline bool isXDigit(char c) { return hasClass(c, kXDigit); }
inline bool isIdChar(char c) { return hasClass(c, kIdChar); }

std::string bytesText(size_t bytes) {
  if (bytes % (size_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes % (size_t(1) << 10) == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

enum class Last { other, caret, at, attributesKeyword, less };
enum class ParenKind { other, blockArgs, signature };

/// What an alias (`!name = ...` or `#name = ...`) stands for at each use.
struct AliasExtent {
  unsigned depth = 0; // deepest nesting inside the definition
  size_t bytes = 0;   // size of the definition with its own aliases expanded
};

class Scanner {
public:
  Scanner(llvm::StringRef text, llvm::StringRef splitMarker)
      : text(text), splitMarker(splitMarker), expanded(text.size()) {
    scopes.emplace_back();
  }

  std::optional<PrecheckFailure> run() {
    if (text.size() > kMaxInputBytes) {
      fail(kMaxInputBytes, "the text is " + std::to_string(text.size()) +
                               " bytes, more than the parser's limit of " +
                               bytesText(kMaxInputBytes) +
                               " (a lattice graph of thousands of ops is far smaller); "
                               "weights belong in weights.safetensors, not in the graph");
      return failure;
    }
    while (pos < text.size() && !failure) {
      char c = text[pos];
      if (c == '\n' && depth == 0)
        endAlias();
      if (isSpace(c)) {
        ++pos;
      } else if (c == '"') {
        skipString();
        last = Last::other;
      } else if (c == '/' && peek(1) == '/') {
        skipComment();
      } else if (c == '{') {
        if (!open(c))
          break;
        openScope();
      } else if (c == '}') {
        if (close(c) && scopes.size() > 1)
          scopes.pop_back();
        last = Last::other;
        ++pos;
      } else if (c == '(') {
        if (!open(c))
          break;
        parens.push_back(last == Last::caret ? ParenKind::blockArgs
                         : last == Last::at  ? ParenKind::signature
                                             : ParenKind::other);
        last = Last::other;
        ++pos;
      } else if (c == ')') {
        if (close(c) && !parens.empty())
          parens.pop_back();
        last = Last::other;
        ++pos;
      } else if (c == '[' || c == '<') {
        if (!open(c))
          break;
        last = c == '<' ? Last::less : Last::other;
        ++pos;
      } else if (c == ']' || (c == '>' && (pos == 0 || text[pos - 1] != '-'))) {
        close(c);
        last = Last::other;
        ++pos;
      } else if (c == '^' || c == '@') {
        ++pos;
        if (c == '@' && pos < text.size() && text[pos] == '"')
          skipString();
        else
          readId();
        last = c == '^' ? Last::caret : Last::at;
      } else if (c == '!' || c == '#') {
        alias();
        last = Last::other;
      } else if (c == '%') {
        value();
      } else if (isDigit(c)) {
        number();
        last = Last::other;
      } else if (isAlpha(c) || c == '_') {
        llvm::StringRef word = readId();
        last = word == "attributes" ? Last::attributesKeyword : Last::other;
      } else if (c == '-' && peek(1) != '>') {
        // MLIR parses each prefix minus of an affine expression by
        // recursion, without brackets.
        if (!withinNesting(++minusRun, pos, "this run of minus signs"))
          break;
        last = Last::other;
        ++pos;
        continue;
      } else {
        last = Last::other;
        ++pos;
      }
      if (!isSpace(c))
        minusRun = 0;
    }
    return failure;
  }

private:
  char peek(size_t ahead) const { return pos + ahead < text.size() ? text[pos + ahead] : '\0'; }

  bool fail(size_t offset, std::string message) {
    if (!failure)
      failure = PrecheckFailure{std::min(offset, text.size()), std::move(message)};
    return false;
  }

  llvm::StringRef readId() {
    size_t start = pos;
    while (pos < text.size() && isIdChar(text[pos]))
      ++pos;
    if (pos - start > kMaxIdentifierChars)
      fail(start, "an identifier of " + std::to_string(pos - start) +
                      " characters is longer than the parser's limit of " +
                      std::to_string(kMaxIdentifierChars) +
                      " (shapes count as one: 1x2x3xf32); use shorter names and "
                      "lower-rank types");
    return text.slice(start, pos);
  }

  // --- nesting -------------------------------------------------------------

  /// Checks `extra` more levels (an alias's own nesting) on top of the
  /// current depth.
  bool withinNesting(unsigned extra, size_t offset, llvm::StringRef what) {
    if (depth + extra <= kMaxNesting)
      return true;
    return fail(offset, "nesting deeper than the parser's limit of " + std::to_string(kMaxNesting) +
                            " open brackets ( [ { < (regions, types, attributes and locations "
                            "all count) at " +
                            what.str() +
                            "; a lattice graph nests a few levels deep, so flatten or "
                            "regenerate this text");
  }

  bool open(char c) {
    brackets.push_back(c);
    ++depth;
    if (alias_)
      alias_->extent.depth = std::max(alias_->extent.depth, depth);
    return withinNesting(0, pos, std::string("this '") + c + "'");
  }

  /// Closes the innermost bracket if `c` closes its kind.  Any other closer
  /// (`>` of `>=` in an affine constraint, a stray one MLIR will reject)
  /// leaves the count as it is, so no text can nest deeper than counted.
  bool close(char c) {
    static constexpr llvm::StringRef openers = "([{<", closers = ")]}>";
    if (brackets.empty() || openers.find(brackets.back()) != closers.find(c))
      return false;
    brackets.pop_back();
    --depth;
    return true;
  }

  // --- literals --------------------------------------------------------------

  void skipString() {
    size_t start = pos;
    ++pos; // opening quote
    while (pos < text.size() && text[pos] != '"' && text[pos] != '\n')
      pos += text[pos] == '\\' ? 2 : 1;
    size_t bytes = std::min(pos, text.size()) - start - 1;
    ++pos;
    if (bytes > kMaxStringBytes)
      fail(start, "a string literal of " + std::to_string(bytes) +
                      " bytes is longer than the parser's limit of " + bytesText(kMaxStringBytes) +
                      "; names, keys and digests in a lattice graph are short");
  }

  /// A number as MLIR's lexer reads it: digits, an optional fraction and
  /// exponent, or a 0x hexadecimal literal.
  void number() {
    size_t start = pos;
    auto digits = [&](auto accept) {
      while (pos < text.size() && accept(text[pos]))
        ++pos;
    };
    if (text[pos] == '0' && peek(1) == 'x' && isXDigit(peek(2))) {
      pos += 2;
      digits(isXDigit);
    } else {
      digits(isDigit);
      if (peek(0) == '.') {
        ++pos;
        digits(isDigit);
        if ((peek(0) == 'e' || peek(0) == 'E') &&
            (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
          pos += 2;
          digits(isDigit);
        }
      }
    }
    size_t length = pos - start;
    if (length > kMaxNumberChars)
      fail(start, "a number literal of " + std::to_string(length) +
                      " characters is longer than the parser's limit of " +
                      std::to_string(kMaxNumberChars) +
                      " (no lattice attribute needs more than an f64's or i64's digits); "
                      "write the value with fewer digits");
  }

  // --- aliases -----------------------------------------------------------------

  struct OpenAlias {
    llvm::StringRef name; // the sigil and the name, in the text
    size_t start;
    AliasExtent extent;
  };

  /// `!name` / `#name`: the definition of an alias at the top level, a use
  /// of a known alias (which weighs as much as its definition), or a
  /// dialect type or attribute.
  void alias() {
    size_t start = pos;
    ++pos; // the sigil
    llvm::StringRef name = readId();
    size_t after = pos;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t'))
      ++after;
    bool defines = depth == 0 && !name.empty() && after < text.size() && text[after] == '=' &&
                   (after + 1 >= text.size() || text[after + 1] != '=');
    llvm::StringRef key = text.slice(start, pos); // sigil and name
    if (defines) {
      endAlias();
      alias_ = OpenAlias{key, start, AliasExtent{}};
      return;
    }
    auto it = aliases.find(key);
    if (it == aliases.end())
      return;
    const AliasExtent &used = it->second;
    if (!withinNesting(used.depth, start, "this use of alias " + key.str()))
      return;
    if (alias_) {
      alias_->extent.depth = std::max(alias_->extent.depth, depth + used.depth);
      alias_->extent.bytes = std::min(alias_->extent.bytes + used.bytes, kMaxInputBytes + 1);
    }
    expanded = std::min(expanded + used.bytes, kMaxInputBytes + 1);
    if (expanded > kMaxInputBytes)
      fail(start, "with its aliases expanded the text exceeds the parser's limit of " +
                      bytesText(kMaxInputBytes) + " at this use of alias " + key.str() +
                      "; define types and attributes without chains of aliases that double "
                      "in size");
  }

  void endAlias() {
    if (!alias_)
      return;
    alias_->extent.bytes =
        std::min(alias_->extent.bytes + (pos - alias_->start), kMaxInputBytes + 1);
    aliases[alias_->name] = alias_->extent;
    alias_.reset();
  }

  // --- SSA values ----------------------------------------------------------------

  void skipComment() {
    size_t end = text.find('\n', pos);
    if (end == llvm::StringRef::npos)
      end = text.size();
    // lattice-opt --split-input-file separates modules with a marker line
    // and parses each chunk on its own; without it the line is a comment.
    bool lineStart = pos == 0 || text[pos - 1] == '\n';
    if (!splitMarker.empty() && lineStart && text.slice(pos, end).rtrim() == splitMarker) {
      scopes.assign(1, Names());
      pending.clear();
      parens.clear();
      brackets.clear();
      depth = 0;
      alias_.reset();
      aliases.clear();
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
        scopes.back().insert(name);
      pending.clear();
    }
    last = Last::other;
    ++pos;
  }

  /// A `%name` token: a result definition (`%a, %b = ...`), an argument
  /// definition (`%a: type` in a block or signature argument list) or a use.
  void value() {
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
      return;
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
      return;
    }
    if (name.empty() || scopes.back().contains(name))
      return;
    std::string ref = "%" + name.str();
    fail(start, "use of SSA value " + ref +
                    " before its definition in this region: a lattice graph defines every "
                    "value before its first use (one block, in program order); move the op "
                    "that defines " +
                    ref + " above this use");
  }

  /// Whether the `%name` just read starts (or continues) a result list
  /// `%a(:N)?, %b(:N)? =`.
  bool isResultList() const {
    size_t at = pos;
    auto skipSpace = [&] {
      while (at < text.size() && isSpace(text[at]))
        ++at;
    };
    for (int names = 0; names < 64; ++names) {
      if (at < text.size() && text[at] == ':') { // %a:2 = ...
        ++at;
        while (at < text.size() && isDigit(text[at]))
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
  llvm::StringRef splitMarker;
  size_t pos = 0;
  Last last = Last::other;
  std::vector<char> brackets; // the open ones, innermost last
  unsigned depth = 0;         // brackets.size()
  unsigned minusRun = 0;      // minus signs in a row, whitespace between them
  size_t expanded;
  std::optional<PrecheckFailure> failure;
  std::optional<OpenAlias> alias_;
  llvm::StringMap<AliasExtent> aliases;
  // SSA names as slices of the text (which outlives the scan): no copies.
  using Names = llvm::DenseSet<llvm::StringRef>;
  std::vector<Names> scopes;
  Names pending;
  std::vector<ParenKind> parens;
};

} // namespace

std::optional<PrecheckFailure> mlir::lattice::precheck(llvm::StringRef text,
                                                       llvm::StringRef splitMarker) {
  return Scanner(text, splitMarker).run();
}
