#include "kvstore/item_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kvstore/reclaimer.h"

namespace kv {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
// Freed items are reused by size; the regions go back once every item is
// freed. (Run in a process whose stores are all closed.)
TEST(ItemArenaTest, ReusesFreedItemsAndReturnsEveryRegionOnceAllAreFreed) {
  while (Reclaimer::collect() != 0) std::this_thread::yield();  // items earlier tests retired
  ASSERT_EQ(item_arena::mapped_bytes(), 0u) << "an item of an earlier test is still alive";
  std::vector<void*> items;
  for (int i = 0; i < 30000; i++) {  // 30000 * 176 bytes: more than two regions
    void* p = item_arena::allocate(176);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    std::memset(p, i & 0xff, 176);
    items.push_back(p);
  }
  EXPECT_GE(item_arena::mapped_bytes(), size_t{4} << 20);
  for (int i = 0; i < 30000; i++) {
    EXPECT_EQ(static_cast<unsigned char*>(items[i])[175], i & 0xff) << "items overlap";
  }
  void* last = items.back();
  items.pop_back();
  item_arena::release(last, 176);
  EXPECT_EQ(item_arena::allocate(176), last);  // same class: reused
  items.push_back(last);
  void* big = item_arena::allocate(item_arena::kMaxSmall + 16);  // from malloc
  ASSERT_NE(big, nullptr);
  item_arena::release(big, item_arena::kMaxSmall + 16);
  for (void* p : items) item_arena::release(p, 176);
  EXPECT_EQ(item_arena::mapped_bytes(), 0u);
}
#endif

TEST(ItemArenaTest, ThreadsAllocateAndFreeConcurrently) {
  auto work = [](int seed) {
    std::vector<std::pair<void*, size_t>> held;
    for (int i = 0; i < 20000; i++) {
      const size_t size = 16 * (1 + static_cast<size_t>((i * 7 + seed) % 70));
      void* p = item_arena::allocate(size);
      ASSERT_NE(p, nullptr);
      std::memset(p, seed, size);
      held.emplace_back(p, size);
      if (i % 3 == 0) {
        auto [q, n] = held[held.size() / 2];
        EXPECT_EQ(static_cast<unsigned char*>(q)[n - 1], seed);
        item_arena::release(q, n);
        held[held.size() / 2] = held.back();
        held.pop_back();
      }
    }
    for (auto [p, n] : held) item_arena::release(p, n);
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
}

}  // namespace
}  // namespace kv
