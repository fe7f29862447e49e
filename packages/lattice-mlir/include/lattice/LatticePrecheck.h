//===- LatticePrecheck.h - lexical checks before MLIR parses ---*- C++ -*-===//
//
// Every text reaches MLIR's parser only after this lexical pass accepts it
// (the in-process API and lattice-opt both call it).  It bounds what MLIR's
// recursive-descent parser and its number parsing can be made to do, and it
// keeps MLIR 19's use-after-free on forward references out of reach (see
// LatticePrecheck.cpp).  Plain LLVM types only.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEPRECHECK_H
#define LATTICE_LATTICEPRECHECK_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>
#include <string>

namespace mlir::lattice {

/// The parser limits.  A real artifact stays far inside each of them (a
/// 200-op network is about 100 KB of text, nests about 6 deep, and its
/// longest number and string are a few dozen bytes); text at a limit still
/// parses.
namespace limits {
/// Bytes of text, counting every alias use as the size of its definition.
inline constexpr size_t kMaxInputBytes = size_t(16) << 20;
/// Open brackets of every kind at once: ( [ { < and the regions they open,
/// counting through aliases; a run of prefix minus signs (`- - x` in an
/// affine expression) nests like brackets.
inline constexpr unsigned kMaxNesting = 256;
/// Characters of one identifier (bare name, %value, @symbol, ^block, !type
/// or #attribute name).  MLIR splits a shape such as 1x2x3xf32 by lexing
/// its tail again for every dimension, so a long one costs its square.
inline constexpr size_t kMaxIdentifierChars = 256;
/// Characters of one number literal (sign excluded): i64 needs 19 digits,
/// the exact decimal of an f64 near 1 at most ~60, a hex bit pattern 34.
inline constexpr size_t kMaxNumberChars = 128;
/// Bytes between the quotes of one string literal.
inline constexpr size_t kMaxStringBytes = size_t(64) << 10;
/// Stack of the thread that parses and verifies: far more than the nesting
/// limit needs, so deep but legal text has headroom (address space only;
/// untouched pages cost nothing).
inline constexpr unsigned kParserStackBytes = 64u << 20;
} // namespace limits

/// Why the pre-check refused a text: the byte offset it points at and the
/// message (which names the limit or the rule and the fix).
struct PrecheckFailure {
  size_t offset;
  std::string message;
};

/// The lexical pre-check: the limits above, and no SSA value used before
/// its definition in the same region.  nullopt when MLIR may parse the text.
/// `splitMarker`: the line (e.g. `// -----`) at which lattice-opt
/// --split-input-file parses the text as separate modules; empty when the
/// text is one module (then such a line is an ordinary comment).
std::optional<PrecheckFailure> precheck(llvm::StringRef text, llvm::StringRef splitMarker = "");

} // namespace mlir::lattice

#endif // LATTICE_LATTICEPRECHECK_H
