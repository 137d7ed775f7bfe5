// State shared by a store's units (log writer, gleaner, recovery, API):
// the error that stops it and its counters.
#ifndef KVSTORE_STORE_STATE_H_
#define KVSTORE_STORE_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>

#include "kvstore/counters.h"
#include "pm/options.h"
#include "pm/status.h"

namespace kv {

using pm::Result;
using pm::Status;

// The first failure that stops a store from changing anything: a log sync
// or an epoch commit that failed. Sticky, because after a failed sync the
// page cache may have dropped the records it covered (Linux marks pages
// clean after a write-back error), so nothing written after them could be
// trusted to be reachable at recovery. Reads go on; reopening recovers.
//
// Thread safety: every method, from any thread.
class StopLatch {
 public:
  // `path`: the store's file, named first in the reason (empty: none).
  StopLatch(pm::Logger logger, const std::string& path)
      : logger_(std::move(logger)), prefix_(path.empty() ? "" : path + ": ") {}

  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // OK, or why the store stopped.
  Status status() const {
    if (!stopped()) return Status();
    std::lock_guard<std::mutex> l(mu_);
    return why_;
  }
  // Records the first failure; later ones are dropped. The store reports
  // kIOError from now on (EIO through a mount), whatever the cause was,
  // except kNoSpace (ENOSPC: free space, then reopen) and kCorruption (a
  // damaged file, which a reopen does not mend; EIO through a mount too).
  void stop(const Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped()) return;
    if (s.code() == pm::Code::kCorruption) {
      why_ = Status::corruption(prefix_ + "store stopped: " + s.message());
    } else {
      const std::string why = prefix_ + "store stopped (reopen it to recover): " + s.message();
      why_ = s.code() == pm::Code::kNoSpace ? Status::no_space(why) : Status::io_error(why);
    }
    stopped_.store(true, std::memory_order_release);
    if (logger_) logger_(pm::LogLevel::kError, why_.to_string());
  }

  // Runs fn, which changes the backend or the logs' state (gleaning,
  // epochs, syncs); an exception from it (out of DRAM) stops the store:
  // an epoch cut short may have lost track of what it changed, and a
  // reopen rebuilds everything from the file. Returns fn's result, or the
  // store's error.
  template <typename F>
  auto or_stop(const char* what, F&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const std::exception& e) {
      stop(Status::no_space(std::string(what) + ": " + e.what()));
      return status();
    }
  }

 private:
  pm::Logger logger_;
  const std::string prefix_;
  mutable std::mutex mu_;
  Status why_;
  std::atomic<bool> stopped_{false};
};

// Event counters (statistics only): per-thread lines, counters.h.
struct StoreCounters : Counters {
  uint64_t recovered_records = 0, recovery_us = 0;  // set once, by recovery
};

// Busy-waits ns nanoseconds (slower-PM emulation, StoreOptions::emulate_*).
inline void emulate_delay(uint32_t ns) {
  if (ns == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace kv

#endif  // KVSTORE_STORE_STATE_H_
