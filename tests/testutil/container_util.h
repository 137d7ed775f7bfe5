// Helpers for tests that open containers.
#ifndef TESTUTIL_CONTAINER_UTIL_H_
#define TESTUTIL_CONTAINER_UTIL_H_

#include <gtest/gtest.h>

#include <memory>

#include "libpm/heap_layout.h"
#include "pm/container.h"

namespace pm::test {

// The container, or nullptr with a test failure that shows the status.
inline std::unique_ptr<Container> must(Result<std::unique_ptr<Container>> r) {
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

// Options for a small container: 4 MiB heap, room to grow to 4 GiB.
inline Options small() {
  Options o;
  o.initial_size = 4 << 20;
  o.max_size = 4ull << 30;
  return o;
}

// The granule bitmaps (heap format 2) of the page holding p, which must be
// in the heap's first segment.
inline GranuleBits* granule_bits_for(Container* c, const void* p) {
  auto* base = reinterpret_cast<std::byte*>(c->info().base_address);
  auto* seg = reinterpret_cast<const SegmentHeader*>(base + 4096);
  uint64_t map_pages = (sizeof(SegmentHeader) + 4 * seg->npages + 4095) / 4096;
  auto* bits = reinterpret_cast<GranuleBits*>(base + 4096 * (1 + map_pages));
  uint64_t page = static_cast<uint64_t>(static_cast<const std::byte*>(p) - base) / 4096;
  return bits + (page - 1);
}

}  // namespace pm::test

#endif  // TESTUTIL_CONTAINER_UTIL_H_
