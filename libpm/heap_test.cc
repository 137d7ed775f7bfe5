#include "libpm/heap.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "libpm/size_classes.h"
#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

TEST(SizeClassTest, ClassesAreIncreasingAndBoundRounding) {
  ASSERT_GT(size_class_count(), 0);
  for (int c = 0; c < size_class_count(); c++) {
    const SizeClass& sc = size_class(c);
    if (c > 0) {
      EXPECT_GT(sc.size, size_class(c - 1).size);
    }
    EXPECT_GE(sc.objects, 1u);
    EXPECT_LE(sc.first_off + uint64_t{sc.objects} * sc.size, uint64_t{sc.pages} * 4096);
    EXPECT_EQ(sc.first_off % 16, 0u);
    EXPECT_GE(sc.first_off, 8 + 8 * ((sc.objects + 63) / 64));
  }
  EXPECT_EQ(size_class(size_class_count() - 1).size, kMaxSmall);
  for (uint64_t n = 1; n <= kMaxSmall; n += 7) {
    const SizeClass& sc = size_class(size_class_for(n));
    ASSERT_GE(sc.size, n);
    if (n > 128) {
      EXPECT_LE(double(sc.size) / double(n), 1.126) << n;
    }
    if (size_class_for(n) > 0) {
      EXPECT_LT(size_class(size_class_for(n) - 1).size, n);
    }
  }
}

class HeapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.initial_size = 2 << 20;
    o.max_size = 2ull << 30;
    auto r = Container::create(dir_.file("h.pm"), o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    c_ = std::move(*r);
  }
  test::TempDir dir_;
  std::unique_ptr<Container> c_;
};

// Random allocs and frees of all sizes: blocks never overlap, find_block
// agrees, the persistent metadata stays consistent, and abort/commit keep it so.
TEST_F(HeapTest, RandomAllocFreeKeepsMetadataConsistent) {
  std::mt19937_64 rng(7);
  std::map<std::byte*, size_t> live;
  auto random_size = [&]() -> size_t {
    switch (rng() % 4) {
      case 0:
        return 1 + rng() % 128;
      case 1:
        return 1 + rng() % 4096;
      case 2:
        return 1 + rng() % 40000;
      default:
        return 1 + rng() % (3 << 20);
    }
  };
  for (int i = 0; i < 4000; i++) {
    if (live.empty() || rng() % 3 != 0) {
      size_t n = random_size();
      Result<void*> p = c_->alloc(n);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      auto* b = static_cast<std::byte*>(*p);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(b) % 16, 0u);
      auto next = live.lower_bound(b);
      if (next != live.end()) {
        ASSERT_LE(b + n, next->first) << "overlap";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, b) << "overlap";
      }
      Result<BlockInfo> bi = c_->find_block(b + n - 1);
      ASSERT_TRUE(bi.ok());
      ASSERT_EQ(bi->start, b);
      live[b] = n;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(c_->free(it->first).ok());
      live.erase(it);
    }
    if (i % 1000 == 999) {
      CheckReport r = c_->check();
      ASSERT_TRUE(r.problems.empty()) << r.problems.front();
      ASSERT_EQ(r.blocks, live.size());
      ASSERT_TRUE(c_->commit().ok());
    }
  }
  // Abort drops work since the last commit; the heap's view follows.
  uint64_t blocks = c_->info().blocks;
  for (int i = 0; i < 100; i++) ASSERT_TRUE(c_->alloc(random_size()).ok());
  ASSERT_TRUE(c_->abort().ok());
  EXPECT_EQ(c_->info().blocks, blocks);
  CheckReport r = c_->check();
  EXPECT_TRUE(r.problems.empty()) << (r.problems.empty() ? "" : r.problems.front());
}

TEST_F(HeapTest, FreedPagesCoalesceAndAreReused) {
  std::vector<void*> ps;
  for (int i = 0; i < 8; i++) ps.push_back(*c_->alloc(64 << 10));
  uint64_t heap = c_->info().heap_bytes;
  for (void* p : ps) ASSERT_TRUE(c_->free(p).ok());
  Result<void*> big = c_->alloc(512 << 10);  // fits only in the coalesced run
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(c_->info().heap_bytes, heap);
}

TEST_F(HeapTest, MaxSizeIsEnforced) {
  Result<void*> p = c_->alloc(size_t{3} << 30);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kNoSpace);
  EXPECT_NE(p.status().message().find("max_size"), std::string::npos);
  EXPECT_EQ(c_->reserve(uint64_t{3} << 30).code(), Code::kNoSpace);
  EXPECT_TRUE(c_->reserve(uint64_t{100} << 20).ok());
  EXPECT_GE(c_->info().heap_bytes, uint64_t{100} << 20);
}

}  // namespace
}  // namespace pm
