// A randomized model of the allocator: random allocs (granule objects of
// 8 B .. 32 KiB and page runs above), frees, commits, aborts and reopens,
// checked against a shadow map of the live blocks. Sizes cluster around a
// drifting mode, as a program's do (a key-value store renaming files makes
// entries a byte longer each round): holes of one length pile up, which
// uniform sizes rarely produce.
//
// PM_MODEL_SEED=n picks another seed, PM_MODEL_STEPS=n another length; a
// failure names the seed and step. The second test allocates data blocks
// (AllocKind::kData) too, half of all, and checks their kind as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

constexpr uint64_t kMaxGranuleObject = 32 << 10;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 0) : fallback;
}

// What alloc(n) promises: 16 bytes, or 8 when n rounds to an odd number of
// granules (no type of alignment 16 has such a size).
uint64_t alignment_for(uint64_t n) { return (n + 7) / 8 % 2 == 0 ? 16 : 8; }

struct Block {
  uint64_t n;     // bytes asked for
  uint64_t size;  // bytes find_block reported at allocation
  uint8_t fill;   // the filled bytes (see fill()) hold this
  AllocKind kind;
};
using Model = std::map<std::byte*, Block>;

class HeapModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.initial_size = 2 << 20;
    o.max_size = 4ull << 30;
    auto r = Container::create(dir_.file("m.pm"), o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    c_ = std::move(*r);
  }

  // Roughly log-uniform in [lo, hi]: a power of two, then a value below the
  // next (integer steps only, so that a seed means the same everywhere).
  uint64_t log_uniform(uint64_t lo, uint64_t hi) {
    uint64_t from = std::bit_width(lo) - 1, to = std::bit_width(hi) - 1;
    uint64_t low = 1ull << (from + rng_() % (to - from + 1));
    return std::clamp(low + rng_() % low, lo, hi);
  }

  // Mostly within a few granules of the mode; some granule sizes of any
  // length; a few page runs.
  uint64_t random_size() {
    uint64_t r = rng_() % 100;
    if (r < 70) {
      uint64_t spread = std::max<uint64_t>(24, mode_ / 16);
      uint64_t lo = mode_ > spread ? mode_ - spread : 1;
      return std::min(kMaxGranuleObject, lo + rng_() % (2 * spread + 1));
    }
    if (r < 94) return log_uniform(1, kMaxGranuleObject);
    return log_uniform(kMaxGranuleObject + 1, 1 << 20);
  }

  // Granule objects are filled whole; page runs at both ends (filling them
  // whole would make commits, not the heap, the test's cost).
  static uint64_t filled(uint64_t n) { return std::min(n, kMaxGranuleObject); }

  void fill(std::byte* p, uint64_t n, uint8_t v) {
    uint64_t head = filled(n) / 2, tail = filled(n) - head;
    c_->will_write(p, head);
    std::memset(p, v, head);
    c_->will_write(p + n - tail, tail);
    std::memset(p + n - tail, v, tail);
  }

  // Whether the filled bytes of block p hold its value.
  static bool intact(const std::byte* p, const Block& b) {
    static std::vector<std::byte> expect(kMaxGranuleObject);
    std::fill(expect.begin(), expect.end(), std::byte{b.fill});
    uint64_t head = filled(b.n) / 2, tail = filled(b.n) - head;
    return std::memcmp(p, expect.data(), head) == 0 &&
           std::memcmp(p + b.n - tail, expect.data(), tail) == 0;
  }

  void alloc_one() {
    uint64_t n = random_size();
    AllocKind kind = mixed_kinds_ && rng_() % 2 ? AllocKind::kData : AllocKind::kObject;
    Result<void*> r = c_->alloc(n, kind);
    ASSERT_TRUE(r.ok()) << "alloc(" << n << "): " << r.status().to_string();
    auto* p = static_cast<std::byte*>(*r);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % alignment_for(n), 0u) << "alloc(" << n << ")";
    Result<BlockInfo> bi = c_->find_block(p + rng_() % n);
    ASSERT_TRUE(bi.ok()) << bi.status().to_string();
    ASSERT_EQ(bi->start, p);
    ASSERT_GE(bi->size, n);
    ASSERT_EQ(bi->kind, kind);
    auto next = live_.lower_bound(p);
    if (next != live_.end()) {
      ASSERT_LE(p + bi->size, next->first) << "overlaps the next block";
    }
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.size, p) << "overlaps the previous block";
    }
    auto v = static_cast<uint8_t>(rng_());
    fill(p, n, v);
    live_[p] = {n, bi->size, v, kind};
    picks_.push_back(p);
  }

  void free_one() {
    size_t i = rng_() % picks_.size();
    std::byte* p = picks_[i];
    picks_[i] = picks_.back();
    picks_.pop_back();
    Block b = live_.at(p);
    Status s = c_->free(p);
    ASSERT_TRUE(s.ok()) << s.to_string();
    live_.erase(p);
    if (rng_() % 8 == 0) {
      ASSERT_FALSE(c_->free(p).ok()) << "double free accepted";
    }
    // Blocks never overlap: no other block holds the freed bytes.
    Result<BlockInfo> bi = c_->find_block(p + rng_() % b.n);
    ASSERT_FALSE(bi.ok()) << "find_block finds a freed block";
  }

  // Everything the heap says matches `m`: each block at its place, with its
  // size and bytes; the counters; check().
  void verify(const Model& m) {
    uint64_t used = 0;
    for (const auto& [p, b] : m) {
      for (uint64_t at : {uint64_t{0}, rng_() % b.n}) {
        Result<BlockInfo> bi = c_->find_block(p + at);
        ASSERT_TRUE(bi.ok()) << bi.status().to_string();
        ASSERT_EQ(bi->start, p);
        ASSERT_EQ(bi->size, b.size);
        ASSERT_EQ(bi->kind, b.kind);
      }
      ASSERT_TRUE(intact(p, b)) << "the bytes of a block of " << b.n << " changed";
      used += b.size;
    }
    ContainerInfo info = c_->info();
    ASSERT_EQ(info.blocks, m.size());
    ASSERT_EQ(info.used_bytes, used);
    CheckReport r = c_->check();
    ASSERT_TRUE(r.problems.empty()) << r.problems.size() << " problems, first: " << r.problems[0];
  }

  void commit() {
    Status s = c_->commit();
    ASSERT_TRUE(s.ok()) << s.to_string();
    committed_ = live_;
  }

  void abort() {
    Status s = c_->abort();
    ASSERT_TRUE(s.ok()) << s.to_string();
    back_to_committed();
  }

  // After abort or reopen: the model is the last committed one, and blocks
  // allocated since are gone (where no committed block covers them).
  void back_to_committed() {
    for (const auto& [p, b] : live_) {
      auto after = committed_.upper_bound(p);
      bool covered = after != committed_.begin() &&
                     std::prev(after)->first + std::prev(after)->second.size > p;
      if (!covered) {
        ASSERT_FALSE(c_->find_block(p).ok()) << "an uncommitted block survived";
      }
    }
    live_ = committed_;
    picks_.clear();
    for (const auto& [p, b] : live_) picks_.push_back(p);
  }

  // Reopening drops what was not committed, like abort.
  void reopen() {
    c_.reset();
    auto r = Container::open(dir_.file("m.pm"));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    c_ = std::move(*r);
    back_to_committed();
  }

  void step() {
    if (rng_() % 2000 == 0) mode_ = log_uniform(8, kMaxGranuleObject);
    uint64_t r = rng_() % 1000;
    if (r < 4) {
      commit();
    } else if (r < 5) {
      ASSERT_NO_FATAL_FAILURE(abort());
      verify(live_);
    } else if (r < 6 && rng_() % 2 == 0) {
      if (rng_() % 2 == 0) {
        ASSERT_NO_FATAL_FAILURE(commit());
      }
      ASSERT_NO_FATAL_FAILURE(reopen());
      verify(live_);
    } else if (live_.empty() || rng_() % 100 < (live_.size() < target_ ? 60 : 40)) {
      alloc_one();
    } else {
      free_one();
    }
  }

  void run(uint64_t default_seed) {
    const uint64_t seed = env_or("PM_MODEL_SEED", default_seed);
    const uint64_t steps = env_or("PM_MODEL_STEPS", 40000);
    rng_.seed(seed);
    for (uint64_t i = 0; i < steps; i++) {
      SCOPED_TRACE("PM_MODEL_SEED=" + std::to_string(seed) + " step " + std::to_string(i));
      ASSERT_NO_FATAL_FAILURE(step());
      if (i % 5000 == 4999) {
        ASSERT_NO_FATAL_FAILURE(verify(live_));
      }
    }
    ASSERT_NO_FATAL_FAILURE(commit());
    ASSERT_NO_FATAL_FAILURE(reopen());
    ASSERT_NO_FATAL_FAILURE(verify(live_));
  }

  test::TempDir dir_;
  std::unique_ptr<Container> c_;
  std::mt19937_64 rng_;
  uint64_t mode_ = 64;
  uint64_t target_ = 5000;  // live blocks the alloc/free mix drifts towards
  bool mixed_kinds_ = false;  // data blocks too
  Model live_, committed_;
  std::vector<std::byte*> picks_;  // live_'s blocks, for picking one at random
};

TEST_F(HeapModelTest, RandomOperationsMatchTheModel) { run(2); }

TEST_F(HeapModelTest, RandomOperationsWithDataBlocksMatchTheModel) {
  mixed_kinds_ = true;
  run(3);
}

}  // namespace
}  // namespace pm
