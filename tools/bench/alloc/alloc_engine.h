// AllocEngine: an allocator under test in `pm bench alloc` (libpm, glibc
// malloc, Boost.Interprocess), as the workloads see it. Objects are named by
// handles rather than pointers because an engine may remap its memory when it
// grows (Boost's managed_mapped_file does).
#ifndef TOOLS_BENCH_ALLOC_ALLOC_ENGINE_H_
#define TOOLS_BENCH_ALLOC_ALLOC_ENGINE_H_

#include <cstddef>
#include <cstdint>

#include "pm/status.h"

namespace pm::bench {

// What an engine's memory costs for the objects now live; each engine says
// what its numbers are.
struct Usage {
  uint64_t in_use = 0;  // the measure the fragmentation target compares
  uint64_t other = 0;   // a second view of the same memory
  uint64_t dram = 0;    // libpm only: DRAM of the working view (0 elsewhere)
};

// Thread safety: alloc() and free() may be called from any thread when the
// engine says so (libpm and glibc do); the other methods from one thread.
class AllocEngine {
 public:
  virtual ~AllocEngine() = default;

  // A handle to n new bytes (n > 0), never 0. kNoSpace when the engine is full.
  virtual Result<uint64_t> alloc(size_t n) = 0;
  // Frees an object returned by alloc(); 0 does nothing.
  virtual Status free(uint64_t handle) = 0;
  // Where the object is now; valid until the next alloc() (which may remap).
  virtual std::byte* address(uint64_t handle) = 0;
  // Makes the allocations so far durable where the engine can (libpm commits);
  // a no-op elsewhere.
  virtual Status commit() { return Status(); }
  virtual Result<Usage> usage() = 0;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_ENGINE_H_
