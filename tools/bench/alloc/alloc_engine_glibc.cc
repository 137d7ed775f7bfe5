#include "bench/alloc/alloc_engine_glibc.h"

#include <malloc.h>

#include <cstdlib>
#include <string>

#include "bench/common/memory_usage.h"

namespace pm::bench {

namespace {

uint64_t growth(uint64_t now, uint64_t base) { return now > base ? now - base : 0; }

}  // namespace

Result<std::unique_ptr<GlibcAllocEngine>> GlibcAllocEngine::create() {
  ::malloc_trim(0);
  Result<uint64_t> rss = process_rss_anon();
  if (!rss.ok()) return rss.status();
  return std::unique_ptr<GlibcAllocEngine>(new GlibcAllocEngine(*rss));
}

Result<uint64_t> GlibcAllocEngine::alloc(size_t n) {
  void* p = std::malloc(n);
  if (p == nullptr) return Status::no_space("malloc(" + std::to_string(n) + ") failed");
  return reinterpret_cast<uint64_t>(p);
}

Status GlibcAllocEngine::free(uint64_t handle) {
  std::free(reinterpret_cast<void*>(handle));
  return Status();
}

std::byte* GlibcAllocEngine::address(uint64_t handle) {
  return reinterpret_cast<std::byte*>(handle);
}

Result<Usage> GlibcAllocEngine::usage() {
  Result<uint64_t> untrimmed = process_rss_anon();
  if (!untrimmed.ok()) return untrimmed.status();
  ::malloc_trim(0);
  Result<uint64_t> trimmed = process_rss_anon();
  if (!trimmed.ok()) return trimmed.status();
  return Usage{growth(*untrimmed, base_rss_), growth(*trimmed, base_rss_)};
}

}  // namespace pm::bench
