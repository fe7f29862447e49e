//===- LatticeParserPool.cpp - long-lived parser threads ------------------===//
//
// A pool of parser threads (LatticeParserPool.h).  Why each call is still
// independent of the ones before it:
//
//  * a context is used by one thread at a time: each parser thread owns
//    its context, and a thread runs one call at a time;
//  * diagnostics are per call: the caller's job installs its own handler
//    and source manager and removes them before it returns;
//  * what a context keeps between calls is only MLIR's uniqued, immutable
//    storage (types, attributes, locations), and the thread's stride table
//    is emptied after every call: a call sees the same values
//    whether they were created by it or by an earlier call, and a context
//    that rejected a text is replaced, so no failed parse leaves anything
//    behind for the next one;
//  * that storage is bounded: a context is replaced after
//    pool_limits::kContextMaxUses calls or kContextMaxBytes of text.
//
// Threads are started on demand (at most pool_limits::kMaxThreads) and live
// as long as the process.  The pool is never destroyed, so a thread idle at
// exit touches nothing that exit tears down; a forked child, which has none
// of the parent's threads, starts a new pool.
//
//===----------------------------------------------------------------------===//

#include "lattice/LatticeParserPool.h"
#include "lattice/LatticeDialect.h"
#include "lattice/LatticePrecheck.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/Support/Threading.h"
#include "llvm/Support/thread.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

using namespace mlir;
using namespace mlir::lattice;

std::unique_ptr<MLIRContext> mlir::lattice::makeParserContext() {
  DialectRegistry registry;
  registry.insert<LatticeDialect, func::FuncDialect>();
  auto context = std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  // Diagnostics name the rule and the line; a dump of the offending op
  // (the whole module for artifact rules) would drown them.
  context->printOpOnDiagnostic(false);
  return context;
}

namespace {

/// One call handed to a parser thread; lives on the caller's stack.
struct Ticket {
  llvm::function_ref<bool(MLIRContext &)> job;
  size_t textBytes;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
};

class Pool;

/// A parser thread's state: its mailbox and its context.
struct Worker {
  Pool &pool;
  std::mutex mutex;
  std::condition_variable wake;
  Ticket *pending = nullptr;
  std::unique_ptr<MLIRContext> context;
  unsigned uses = 0;
  size_t bytes = 0;

  explicit Worker(Pool &pool) : pool(pool) {}
  void loop();
};

class Pool {
public:
  void run(Ticket &ticket) {
    Worker *worker = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex);
      freed.wait(lock, [&] { return !idle.empty() || started < pool_limits::kMaxThreads; });
      if (!idle.empty()) {
        worker = idle.back();
        idle.pop_back();
      } else {
        worker = new Worker(*this); // lives as long as the process, like its thread
        ++started;
        llvm::thread thread(std::optional<unsigned>(limits::kParserStackBytes),
                            [worker] { worker->loop(); });
        thread.detach();
      }
    }
    {
      std::lock_guard<std::mutex> lock(worker->mutex);
      worker->pending = &ticket;
    }
    worker->wake.notify_one();
    std::unique_lock<std::mutex> lock(ticket.mutex);
    ticket.finished.wait(lock, [&] { return ticket.done; });
  }

  /// A worker is free again (before it signals its caller, so that a
  /// caller that then calls again finds it instead of starting a thread).
  void release(Worker *worker) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      idle.push_back(worker);
    }
    freed.notify_one();
  }

private:
  std::mutex mutex;
  std::condition_variable freed;
  std::vector<Worker *> idle;
  unsigned started = 0;
};

void Worker::loop() {
  llvm::set_thread_name(kParserThreadName);
  for (;;) {
    Ticket *ticket;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return pending != nullptr; });
      ticket = pending;
      pending = nullptr;
    }
    if (!context)
      context = makeParserContext();
    bool reusable = ticket->job(*context);
    mlir::lattice::detail::endStrideVerification(); // its keys point into this call's module
    ++uses;
    bytes += ticket->textBytes;
    bool stale =
        !reusable || uses >= pool_limits::kContextMaxUses || bytes >= pool_limits::kContextMaxBytes;
    pool.release(this);
    {
      // Notified under the lock: once the caller sees `done` it returns and
      // the ticket is gone, so nothing may touch it after this block.
      std::lock_guard<std::mutex> lock(ticket->mutex);
      ticket->done = true;
      ticket->finished.notify_one();
    }
    if (stale) {
      // Replaced after the caller has its result, so it does not wait for
      // the teardown; a call that arrives meanwhile waits in the mailbox.
      context.reset();
      context = makeParserContext();
      uses = 0;
      bytes = 0;
    }
  }
}

std::atomic<Pool *> currentPool{nullptr};

/// In a forked child the parent's threads do not exist and the pool's locks
/// may be held by one of them: leave that pool behind and start a new one.
void startPoolInChild() { currentPool.store(new Pool()); }

Pool &pool() {
  static const bool installed = [] {
    currentPool.store(new Pool());
    pthread_atfork(nullptr, nullptr, startPoolInChild);
    return true;
  }();
  (void)installed;
  return *currentPool.load();
}

} // namespace

void mlir::lattice::runOnParserThread(size_t textBytes,
                                      llvm::function_ref<bool(MLIRContext &)> job) {
  Ticket ticket{job, textBytes, {}, {}, false};
  pool().run(ticket);
}
