// LibpmAllocEngine: Container::alloc/free in a container of its own. Usage
// is ContainerInfo::footprint_bytes (heap pages that are not free: blocks,
// partly used granule pages, metadata in use); the second view is
// heap_bytes (what the container has grown to), and dram the private copies
// the working view holds (pages written since the last commit, less the
// pages freed since: the heap drops those).
#ifndef TOOLS_BENCH_ALLOC_ALLOC_ENGINE_LIBPM_H_
#define TOOLS_BENCH_ALLOC_ALLOC_ENGINE_LIBPM_H_

#include <memory>
#include <string>

#include "bench/alloc/alloc_engine.h"
#include "bench/common/scoped_file.h"
#include "pm/container.h"

namespace pm::bench {

// Thread safety: alloc() and free() from any thread (Container's own locking).
class LibpmAllocEngine final : public AllocEngine {
 public:
  // Creates a container at `path` (removed again when the engine is
  // destroyed). Errors: from Container::create.
  static Result<std::unique_ptr<LibpmAllocEngine>> create(const std::string& path);

  Result<uint64_t> alloc(size_t n) override;
  Status free(uint64_t handle) override;
  std::byte* address(uint64_t handle) override;
  Status commit() override;
  Result<Usage> usage() override;

 private:
  explicit LibpmAllocEngine(const std::string& path) : file_(path) {}

  ScopedFile file_;  // declared first: the container closes before the file goes
  std::unique_ptr<Container> container_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_ENGINE_LIBPM_H_
