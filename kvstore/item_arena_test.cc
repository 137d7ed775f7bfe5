#include "kvstore/item_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvstore/frontend.h"
#include "kvstore/reclaimer.h"

namespace kv {
namespace {

// Fills an item with a pattern of its own; checks it whole.
void fill(void* p, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; i++) static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(id * 31 + i);
}
bool intact(const void* p, size_t n, uint64_t id) {
  for (size_t i = 0; i < n; i++) {
    if (static_cast<const unsigned char*>(p)[i] != static_cast<unsigned char>(id * 31 + i)) return false;
  }
  return true;
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Every item retired by earlier tests of this process, freed.
void collect_all() {
  for (int i = 0; i < 1000 && Reclaimer::collect() != 0; i++) std::this_thread::yield();
}

// Freed items are reused by size; a region whose items are all freed goes
// back (the last one of its class keeps only its mapping), so items that
// move from one size class to the next do not pin the regions they left.
TEST(ItemArenaTest, ReusesItemsAndGivesBackRegionsWhoseItemsAreAllFreed) {
  collect_all();
  const size_t live0 = item_arena::live_bytes(), mapped0 = item_arena::mapped_bytes();
  constexpr int kItems = 30000;  // 30000 * 176 bytes and more: three regions of a class or more
  for (size_t size = 176; size <= 240; size += 16) {
    std::vector<void*> items;
    for (int i = 0; i < kItems; i++) {
      void* p = item_arena::allocate(size);
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      fill(p, size, i);
      items.push_back(p);
    }
    for (int i = 0; i < kItems; i++) ASSERT_TRUE(intact(items[i], size, i)) << "items overlap";
    EXPECT_GE(item_arena::mapped_bytes(), kItems * size);
    EXPECT_EQ(item_arena::live_bytes(), live0 + kItems * size);
    void* last = items.back();
    item_arena::release(last, size);
    EXPECT_EQ(item_arena::allocate(size), last);  // same class: reused
    for (void* p : items) item_arena::release(p, size);
    EXPECT_EQ(item_arena::live_bytes(), live0);
    // One region kept per class used so far.
    EXPECT_LE(item_arena::mapped_bytes(), mapped0 + ((size - 160) / 16) * item_arena::kRegionBytes);
  }
  void* big = item_arena::allocate(item_arena::kMaxSmall + 16);  // from malloc
  ASSERT_NE(big, nullptr);
  item_arena::release(big, item_arena::kMaxSmall + 16);
  EXPECT_EQ(item_arena::live_bytes(), live0);
}

// Items give back exactly what they took: a frontend of mixed sizes,
// overwritten in place and replaced, then destroyed.
TEST(ItemArenaTest, AFrontendGivesBackEveryItem) {
  collect_all();
  const size_t live0 = item_arena::live_bytes();
  {
    Frontend f(16);
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 3000; i++) {
        const std::string k = "key" + std::to_string(i);
        const uint64_t h = hash_key(k);
        Frontend::Locked lk(&f, h);
        const std::string v(static_cast<size_t>((i * 37 + round * 101) % 900), 'v');
        lk.install(lk.find(k, h), h, static_cast<uint64_t>(round * 3000 + i + 1), 0, k, v, false);
        if (i % 7 == 0) lk.erase(lk.find(k, h));
      }
    }
    EXPECT_GT(item_arena::live_bytes(), live0);
  }
  collect_all();
  EXPECT_EQ(item_arena::live_bytes(), live0);
}
#endif

TEST(ItemArenaTest, ThreadsAllocateAndFreeConcurrently) {
  const size_t live0 = item_arena::live_bytes();
  auto work = [](uint64_t seed) {
    std::vector<std::pair<void*, uint64_t>> held;
    auto size_of = [](uint64_t id) { return 16 * (1 + id % 70); };
    for (uint64_t i = 0; i < 20000; i++) {
      const uint64_t id = seed * 1000000 + i;
      void* p = item_arena::allocate(size_of(id));
      if (p == nullptr) return;
      fill(p, size_of(id), id);
      held.emplace_back(p, id);
      if (i % 3 == 0) {
        auto [q, qid] = held[held.size() / 2];
        EXPECT_TRUE(intact(q, size_of(qid), qid));
        item_arena::release(q, size_of(qid));
        held[held.size() / 2] = held.back();
        held.pop_back();
      }
    }
    for (auto [p, id] : held) {
      EXPECT_TRUE(intact(p, size_of(id), id));
      item_arena::release(p, size_of(id));
    }
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
  EXPECT_EQ(item_arena::live_bytes(), live0);
}

}  // namespace
}  // namespace kv
