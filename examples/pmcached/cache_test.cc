#include "cache.h"

#include <gtest/gtest.h>

#include <thread>

#include "testutil/temp_dir.h"

namespace pmcached {
namespace {

// A cache on a clock the test moves.
class CacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<Cache> open(CacheOptions o = {}) {
    o.clock = [this] { return now_.load(); };
    Result<std::unique_ptr<Cache>> c = Cache::open(path_, o);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) return nullptr;
    (*c)->wait_for_index();
    return std::move(*c);
  }
  std::string get(Cache& c, std::string_view k) {
    Item it;
    Result<bool> r = c.get(k, &it);
    EXPECT_TRUE(r.ok());
    return r.ok() && *r ? it.data : "<none>";
  }
  StoreResult set(Cache& c, StoreMode m, std::string_view k, std::string_view v, int64_t exp = 0,
                  uint64_t cas = 0) {
    Result<StoreResult> r = c.store(m, k, 5, exp, v, cas);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : StoreResult::kNoMemory;
  }

  // A cache of n items ("k0".."k<n-1>"), closed and opened again: its
  // index is still being rebuilt when this returns.
  Result<std::unique_ptr<Cache>> reopen_with_items(int n) {
    {
      auto c = open();
      for (int i = 0; i < n; i++) set(*c, StoreMode::kSet, "k" + std::to_string(i), "v");
    }
    CacheOptions o;
    o.clock = [this] { return now_.load(); };
    return Cache::open(path_, o);
  }

  pm::test::TempDir dir_;
  std::string path_ = dir_.file("cache.kv");
  std::atomic<int64_t> now_{1'700'000'000};
};

TEST_F(CacheTest, ExpiryRelativeAbsoluteNegativeAndTouch) {
  auto c = open();
  EXPECT_EQ(set(*c, StoreMode::kSet, "rel", "x", 10), StoreResult::kStored);
  EXPECT_EQ(set(*c, StoreMode::kSet, "abs", "x", now_ + 100), StoreResult::kStored);
  EXPECT_EQ(set(*c, StoreMode::kSet, "neg", "x", -1), StoreResult::kStored);
  EXPECT_EQ(set(*c, StoreMode::kSet, "past", "x", now_ - 5), StoreResult::kStored);
  EXPECT_EQ(get(*c, "neg"), "<none>");
  EXPECT_EQ(get(*c, "past"), "<none>");
  EXPECT_EQ(get(*c, "rel"), "x");
  EXPECT_TRUE(*c->touch("rel", 1000));
  now_ += 50;
  EXPECT_EQ(get(*c, "rel"), "x");  // touched
  EXPECT_EQ(get(*c, "abs"), "x");
  now_ += 60;
  EXPECT_EQ(get(*c, "abs"), "<none>");
  EXPECT_EQ(c->stats().get_expired, 1u);
  // The sweep removes what nobody asks for.
  EXPECT_EQ(set(*c, StoreMode::kSet, "unasked", "x", 5), StoreResult::kStored);
  now_ += 10;
  EXPECT_EQ(c->sweep(0, 1024), 1u);
  EXPECT_EQ(c->stats().curr_items, 1u);  // rel
}

TEST_F(CacheTest, CasUniquesAreNeverReusedAcrossRestarts) {
  uint64_t last = 0;
  for (int session = 0; session < 3; session++) {
    auto c = open();
    Item it;
    EXPECT_EQ(set(*c, StoreMode::kSet, "k", "v"), StoreResult::kStored);
    ASSERT_TRUE(*c->get("k", &it));
    EXPECT_GT(it.cas, last);
    last = it.cas;
    EXPECT_EQ(set(*c, StoreMode::kCas, "k", "w", 0, it.cas + 1), StoreResult::kExists);
    EXPECT_EQ(set(*c, StoreMode::kCas, "k", "w", 0, it.cas), StoreResult::kStored);
    EXPECT_EQ(set(*c, StoreMode::kCas, "k", "w", 0, it.cas), StoreResult::kExists);
    ASSERT_TRUE(*c->get("k", &it));
    last = it.cas;
  }
}

TEST_F(CacheTest, IncrWrapsDecrStopsAtZeroAndPadsAsMemcached) {
  auto c = open();
  uint64_t v = 0;
  set(*c, StoreMode::kSet, "n", "18446744073709551615");
  EXPECT_EQ(*c->delta("n", true, 2, &v), DeltaResult::kOk);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(get(*c, "n"), "1                   ");  // the old length, space-padded
  set(*c, StoreMode::kSet, "d", "5");
  EXPECT_EQ(*c->delta("d", false, 9, &v), DeltaResult::kOk);
  EXPECT_EQ(v, 0u);
  set(*c, StoreMode::kSet, "t", "12a");
  EXPECT_EQ(*c->delta("t", true, 1, &v), DeltaResult::kNonNumeric);
  EXPECT_EQ(*c->delta("none", true, 1, &v), DeltaResult::kNotFound);
}

TEST_F(CacheTest, FlushAllNowAndLaterSurvivesRestart) {
  {
    auto c = open();
    set(*c, StoreMode::kSet, "a", "1");
    ASSERT_TRUE(c->flush_all(0).ok());
    EXPECT_EQ(get(*c, "a"), "<none>");
    set(*c, StoreMode::kSet, "b", "2");
    ASSERT_TRUE(c->flush_all(10).ok());
    EXPECT_EQ(get(*c, "b"), "2");
    set(*c, StoreMode::kSet, "old", "x");
  }
  auto c = open();
  EXPECT_EQ(get(*c, "b"), "2");
  now_ += 11;
  EXPECT_EQ(get(*c, "b"), "<none>");
  EXPECT_EQ(get(*c, "old"), "<none>");
  set(*c, StoreMode::kSet, "new", "y");
  EXPECT_EQ(get(*c, "new"), "y");
}

// As an exptime: a delay past 30 days is a unix time, and one passed
// flushes now.
TEST_F(CacheTest, AFlushAtAUnixTimeComesThen) {
  auto c = open();
  set(*c, StoreMode::kSet, "a", "1");
  ASSERT_TRUE(c->flush_all(now_ + 5).ok());
  EXPECT_EQ(get(*c, "a"), "1");
  now_ += 6;
  EXPECT_EQ(get(*c, "a"), "<none>");
  set(*c, StoreMode::kSet, "b", "2");
  ASSERT_TRUE(c->flush_all(now_ - 1).ok());
  EXPECT_EQ(get(*c, "b"), "<none>");
}

TEST_F(CacheTest, AFlushNowReplacesADelayedOneStillToCome) {
  auto c = open();
  ASSERT_TRUE(c->flush_all(10).ok());
  ASSERT_TRUE(c->flush_all(0).ok());
  set(*c, StoreMode::kSet, "a", "1");
  now_ += 11;
  EXPECT_EQ(get(*c, "a"), "1");
}

// Access times are in seconds: among items all used in the same second,
// a set's eviction could take the item it had just stored, and the get
// right after it missed (about 1 in 1,000 sets here).
TEST_F(CacheTest, ASetNeverEvictsTheItemItStored) {
  CacheOptions o;
  o.memory_limit = 1 << 20;
  auto c = open(o);
  const std::string v(1000, 'v');
  int missed = 0;
  for (int i = 0; i < 8000; i++) {
    const std::string k = "k" + std::to_string(i);
    ASSERT_EQ(set(*c, StoreMode::kSet, k, v), StoreResult::kStored);
    missed += get(*c, k) != v;
  }
  EXPECT_GT(c->stats().evictions, 5000u);
  EXPECT_EQ(missed, 0);
}

TEST_F(CacheTest, MemoryLimitEvictsLeastRecentlyUsedOrRefuses) {
  CacheOptions o;
  o.memory_limit = 1 << 20;
  auto c = open(o);
  const std::string v(1000, 'v');
  set(*c, StoreMode::kSet, "hot", v);
  for (int i = 0; i < 3000; i++) {
    if (i % 100 == 0) {
      now_ += 1;
      EXPECT_EQ(get(*c, "hot"), v);  // used often: kept
    }
    ASSERT_EQ(set(*c, StoreMode::kSet, "k" + std::to_string(i), v), StoreResult::kStored);
  }
  const CacheStats s = c->stats();
  EXPECT_LE(s.bytes, o.memory_limit);
  EXPECT_GT(s.evictions, 1000u);
  EXPECT_EQ(get(*c, "hot"), v);
  c.reset();
  path_ = dir_.file("no-evict.kv");
  o.evict = false;
  c = open(o);
  StoreResult last = StoreResult::kStored;
  for (int i = 0; i < 3000 && last == StoreResult::kStored; i++) {
    last = set(*c, StoreMode::kSet, "k" + std::to_string(i), v);
  }
  EXPECT_EQ(last, StoreResult::kNoMemory);
  // A set that finds no memory removes the old value, as memcached does
  // (no stale data); the other modes leave it.
  ASSERT_EQ(set(*c, StoreMode::kReplace, "k0", v + v), StoreResult::kNoMemory);
  EXPECT_EQ(get(*c, "k0"), v);
  ASSERT_EQ(set(*c, StoreMode::kSet, "k0", v + v), StoreResult::kNoMemory);
  EXPECT_EQ(get(*c, "k0"), "<none>");
}

// A restart with a smaller -m leaves the cache over its limit. Writes then
// evict about what they add (evicting all of the excess in the first write
// stalled it for seconds: a user trial), and the background thread evicts
// the rest, with no write at all.
TEST_F(CacheTest, ARestartWithASmallerLimitGetsUnderItInTheBackground) {
  const std::string v(1000, 'v');
  {
    auto c = open();
    for (int i = 0; i < 4000; i++) set(*c, StoreMode::kSet, "k" + std::to_string(i), v);
  }
  CacheOptions o;
  o.memory_limit = 512 << 10;
  o.background = false;
  {  // a write alone evicts about what it adds (a few items), not the excess
    auto c = open(o);
    ASSERT_GT(c->stats().bytes, 3 * o.memory_limit);
    ASSERT_EQ(set(*c, StoreMode::kSet, "alone", v), StoreResult::kStored);
    EXPECT_LE(c->stats().evictions, 3u);
    EXPECT_GT(c->stats().bytes, 3 * o.memory_limit);
  }
  o.background = true;
  // The background thread may be done before the first look (it was, in a
  // CI run): the evictions, not the bytes at open, show it did the work.
  auto c = open(o);
  for (int i = 0; i < 200 && c->stats().bytes > o.memory_limit; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LE(c->stats().bytes, o.memory_limit);
  EXPECT_GT(c->stats().evictions, 2000u);
  ASSERT_EQ(set(*c, StoreMode::kSet, "new", v), StoreResult::kStored);
  EXPECT_EQ(get(*c, "new"), v);
}

TEST_F(CacheTest, TheIndexIsRebuiltAfterRestartWithoutLosingConcurrentWrites) {
  Result<std::unique_ptr<Cache>> r = reopen_with_items(20000);
  ASSERT_TRUE(r.ok());
  Cache& c = **r;
  // Served while the index is rebuilt: removes and writes meanwhile count once.
  for (int i = 0; i < 1000; i++) {
    ASSERT_EQ(*c.remove("k" + std::to_string(i)), DeleteResult::kDeleted);
  }
  for (int i = 0; i < 1000; i++) set(c, StoreMode::kSet, "n" + std::to_string(i), "v");
  c.wait_for_index();
  EXPECT_EQ(c.stats().curr_items, 20000u);
  EXPECT_EQ(get(c, "k5"), "<none>");
  EXPECT_EQ(get(c, "k5000"), "v");
}

// The server learns of a failed rebuild from this call (it stops then).
TEST_F(CacheTest, TheEndOfTheRebuildIsAnnouncedOnceWhetherAskedBeforeOrAfter) {
  Result<std::unique_ptr<Cache>> r = reopen_with_items(20000);
  ASSERT_TRUE(r.ok());
  std::atomic<int> before{0}, after{0};
  (*r)->on_index_done([&] { before++; });
  (*r)->wait_for_index();
  (*r)->on_index_done(nullptr);
  EXPECT_EQ(before.load(), 1);
  (*r)->on_index_done([&] { after++; });
  (*r)->on_index_done(nullptr);
  EXPECT_EQ(after.load(), 1);
  EXPECT_TRUE((*r)->index_error().ok());
}

TEST_F(CacheTest, ConcurrentIncrementsAreAtomic) {
  auto c = open();
  set(*c, StoreMode::kSet, "n", "0");
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&] {
      uint64_t v;
      for (int i = 0; i < 500; i++) ASSERT_EQ(*c->delta("n", true, 1, &v), DeltaResult::kOk);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(get(*c, "n"), "2000");
}

// The meta state is stored with the item: after a restart a stale item is
// still stale, its recache token still taken; a client key that starts
// with a NUL byte is an item like any other, and the cache's own records
// (the CAS block) are untouched by it.
TEST_F(CacheTest, MetaStateAndBinaryKeysSurviveARestart) {
  const std::string nul_key("\0pmcached/cas", 13);
  uint64_t before = 0;
  {
    auto c = open();
    ASSERT_EQ(set(*c, StoreMode::kSet, "s", "v", 100), StoreResult::kStored);
    ASSERT_EQ(*c->invalidate("s", std::nullopt, nullptr), DeleteResult::kDeleted);
    Item it;
    MetaGet m;
    ASSERT_TRUE(*c->meta_get("s", &it, &m));
    EXPECT_TRUE(m.won);
    ASSERT_EQ(*c->store(StoreMode::kSet, nul_key, 0, 0, "bin", std::nullopt, &before),
              StoreResult::kStored);
  }
  auto c = open();
  Item it;
  MetaGet m;
  ASSERT_TRUE(*c->meta_get("s", &it, &m));
  EXPECT_EQ(it.data, "v");
  EXPECT_EQ(it.state, kStale | kTokenSent);
  EXPECT_FALSE(m.won) << "one client won the recache, before the restart";
  EXPECT_EQ(get(*c, nul_key), "bin");
  EXPECT_EQ(c->stats().curr_items, 2u) << "the rebuilt index counts the binary key";
  uint64_t after = 0;
  ASSERT_EQ(*c->store(StoreMode::kSet, "n", 0, 0, "x", std::nullopt, &after), StoreResult::kStored);
  EXPECT_GT(after, before) << "no CAS unique is handed out twice";
}

// An item as large as -I takes meta state (the state lives in the header:
// it adds no bytes the store's records would have to hold).
TEST_F(CacheTest, AnItemOfTheLargestSizeCanBeInvalidated) {
  CacheOptions o;
  o.item_max = 4096;
  auto c = open(o);
  ASSERT_EQ(set(*c, StoreMode::kSet, "big", std::string(4096, 'b')), StoreResult::kStored);
  Result<DeleteResult> r = c->invalidate("big", std::nullopt, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Item it;
  MetaGet m;
  ASSERT_TRUE(*c->meta_get("big", &it, &m));
  EXPECT_EQ(it.data.size(), 4096u);
  EXPECT_TRUE(m.won);
  EXPECT_EQ(it.state, kStale | kTokenSent);
}

// With -M, a miss that mg N or ma N would vivify past the memory limit
// stays a miss (memcached's allocation fails), and nothing is stored.
TEST_F(CacheTest, VivifyingRespectsTheMemoryLimit) {
  CacheOptions o;
  o.memory_limit = 4096;
  o.evict = false;
  auto c = open(o);
  ASSERT_EQ(set(*c, StoreMode::kSet, "fill", std::string(4000, 'f')), StoreResult::kStored);
  Item it;
  MetaGet m;
  m.vivify = true;
  EXPECT_FALSE(*c->meta_get(std::string(200, 'v'), &it, &m));
  EXPECT_FALSE(m.created);
  DeltaOptions d;
  d.vivify = true;
  uint64_t v;
  EXPECT_EQ(*c->delta(std::string(200, 'n'), true, 1, &v, d), DeltaResult::kNoMemory);
  EXPECT_EQ(c->stats().curr_items, 1u);
}

}  // namespace
}  // namespace pmcached
