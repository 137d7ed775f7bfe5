// BoostAllocEngine: Boost.Interprocess managed_mapped_file (its default
// rbtree best-fit allocator) on a file, grown (unmapped, extended, mapped
// again) when an allocation fails. Usage is get_size() - get_free_memory()
// (allocated blocks with their headers; free holes between blocks do not
// count); the second view is the file's allocated blocks (st_blocks): the
// pages ever touched, which on tmpfs is the memory the file holds.
#ifndef TOOLS_BENCH_ALLOC_ALLOC_ENGINE_BOOST_H_
#define TOOLS_BENCH_ALLOC_ALLOC_ENGINE_BOOST_H_

#include <memory>
#include <string>

#include "bench/alloc/alloc_engine.h"
#include "bench/common/scoped_file.h"

namespace pm::bench {

// Thread safety: one thread (growth remaps the file).
class BoostAllocEngine final : public AllocEngine {
 public:
  // Creates the file at `path` with `size` bytes (sparse; removed again when
  // the engine is destroyed). Errors: kIOError with Boost's message.
  static Result<std::unique_ptr<BoostAllocEngine>> create(const std::string& path, uint64_t size);
  ~BoostAllocEngine() override;

  Result<uint64_t> alloc(size_t n) override;
  Status free(uint64_t handle) override;
  std::byte* address(uint64_t handle) override;
  Result<Usage> usage() override;

  int grows() const { return grows_; }

 private:
  struct Segment;
  explicit BoostAllocEngine(const std::string& path);
  Status grow();

  ScopedFile file_;  // declared first: the mapping goes before the file
  std::unique_ptr<Segment> segment_;
  int grows_ = 0;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_ENGINE_BOOST_H_
