//===- LatticeParserPool.h - long-lived parser threads ---------*- C++ -*-===//
//
// The in-process API parses and verifies every text on a parser thread: a
// long-lived thread with a stack of limits::kParserStackBytes that owns one
// ready MLIRContext (the lattice and func dialects loaded).  Creating a
// context, loading its dialects, starting a thread with a large stack and
// tearing all of it down again cost more than verifying a small graph, so
// they are paid once per thread, not once per call; see
// LatticeParserPool.cpp for how calls stay independent and memory bounded.
//
//===----------------------------------------------------------------------===//

#ifndef LATTICE_LATTICEPARSERPOOL_H
#define LATTICE_LATTICEPARSERPOOL_H

#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstddef>
#include <memory>

namespace mlir::lattice {

/// When a parser thread replaces its context by a fresh one: after this
/// many calls, after this many bytes of text parsed in it, and after any
/// call whose text it rejected.  A context keeps every type, attribute and
/// location it ever uniqued, so these bound what one context holds (about
/// what parsing kContextMaxBytes of text once creates, plus one text).
namespace pool_limits {
inline constexpr unsigned kContextMaxUses = 256;
inline constexpr size_t kContextMaxBytes = size_t(4) << 20;
/// Parser threads at most; a caller beyond them waits for one to be free.
inline constexpr unsigned kMaxThreads = 8;
} // namespace pool_limits

/// The name every parser thread carries (in /proc/PID/task/TID/comm).
inline constexpr const char *kParserThreadName = "lattice-parser";

/// A context as every call gets it: the lattice and func dialects loaded,
/// single-threaded, no op dump on diagnostics.
std::unique_ptr<MLIRContext> makeParserContext();

/// Runs `job` on a free parser thread with that thread's context and
/// returns when it is done (the caller's thread waits; the job may touch
/// the caller's data).  `textBytes` counts towards the context's byte
/// limit; `job` returns false when the context should not serve again
/// (the text was rejected).  Safe from any number of threads at once, and
/// in a process forked from one that used it.
void runOnParserThread(size_t textBytes, llvm::function_ref<bool(MLIRContext &)> job);

} // namespace mlir::lattice

#endif // LATTICE_LATTICEPARSERPOOL_H
