// GlibcAllocEngine: malloc/free of the C library. Usage is the growth of the
// process's anonymous resident memory (RssAnon) since the engine was made,
// without malloc_trim; the second view is the same after malloc_trim(0),
// which returns free heap pages to the kernel. Only meaningful when nothing
// else in the process allocates meanwhile: the fragmentation suite runs it in
// a forked child.
#ifndef TOOLS_BENCH_ALLOC_ALLOC_ENGINE_GLIBC_H_
#define TOOLS_BENCH_ALLOC_ALLOC_ENGINE_GLIBC_H_

#include <memory>

#include "bench/alloc/alloc_engine.h"

namespace pm::bench {

// Thread safety: alloc() and free() from any thread.
class GlibcAllocEngine final : public AllocEngine {
 public:
  // Trims the heap and records the resident memory it starts from.
  // Errors: kIOError when /proc/self/status is unreadable.
  static Result<std::unique_ptr<GlibcAllocEngine>> create();

  Result<uint64_t> alloc(size_t n) override;
  Status free(uint64_t handle) override;
  std::byte* address(uint64_t handle) override;
  // Calls malloc_trim(0) after the first measurement: call it last.
  Result<Usage> usage() override;

 private:
  explicit GlibcAllocEngine(uint64_t base_rss) : base_rss_(base_rss) {}

  uint64_t base_rss_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_ENGINE_GLIBC_H_
