#include "bench/alloc/alloc_engine_libpm.h"

#include "bench/common/memory_usage.h"

namespace pm::bench {

Result<std::unique_ptr<LibpmAllocEngine>> LibpmAllocEngine::create(const std::string& path) {
  std::unique_ptr<LibpmAllocEngine> e(new LibpmAllocEngine(path));
  Result<std::unique_ptr<Container>> c = Container::create(path);
  if (!c.ok()) return c.status();
  e->container_ = std::move(*c);
  return e;
}

Result<uint64_t> LibpmAllocEngine::alloc(size_t n) {
  Result<void*> p = container_->alloc(n);
  if (!p.ok()) return p.status();
  return reinterpret_cast<uint64_t>(*p);
}

Status LibpmAllocEngine::free(uint64_t handle) {
  return container_->free(reinterpret_cast<void*>(handle));
}

std::byte* LibpmAllocEngine::address(uint64_t handle) {
  return reinterpret_cast<std::byte*>(handle);
}

Status LibpmAllocEngine::commit() { return container_->commit(); }

Result<Usage> LibpmAllocEngine::usage() {
  ContainerInfo info = container_->info();
  Result<RangeMemory> view = range_memory(info.base_address, info.base_address + info.heap_bytes);
  if (!view.ok()) return view.status();
  return Usage{info.footprint_bytes, info.heap_bytes, view->anonymous};
}

}  // namespace pm::bench
