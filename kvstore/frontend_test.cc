#include "kvstore/frontend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace kv {
namespace {

void set(Frontend& f, const std::string& k, const std::string& v, uint64_t seq) {
  uint64_t h = hash_key(k);
  Frontend::Locked lk(&f, h);
  lk.replace(lk.find(k, h), Item::make(h, seq, 0, k, v, false));
}

bool get(const Frontend& f, const std::string& k, std::string* v) {
  Reclaimer::Guard g;
  return f.read(k, hash_key(k), [&](const Item& it) { v->assign(it.value()); });
}

TEST(FrontendTest, ReplaceFindEraseAndForEach) {
  Frontend f(16);
  for (int i = 0; i < 5000; i++) set(f, "k" + std::to_string(i), "v" + std::to_string(i), i + 1);
  set(f, "k7", "seven", 9999);
  EXPECT_EQ(f.items(), 5000u);
  std::string v;
  ASSERT_TRUE(get(f, "k7", &v));
  EXPECT_EQ(v, "seven");
  EXPECT_FALSE(get(f, "nope", &v));
  {
    uint64_t h = hash_key("k8");
    Frontend::Locked lk(&f, h);
    lk.erase(lk.find("k8", h));
  }
  EXPECT_FALSE(get(f, "k8", &v));
  uint64_t n = 0;
  f.for_each([&](const Item&) { n++; });
  EXPECT_EQ(n, 4999u);
}

// Readers and writers keep going while the table doubles several times;
// every reader sees either nothing (not inserted yet) or a value that was
// written for that key, and every key is there at the end.
TEST(FrontendTest, GrowsWhileReadersAndWritersRun) {
  Frontend f(16);
  constexpr int kKeys = 40000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0};
  std::thread reader([&] {
    std::string v;
    for (uint64_t i = 0; !done.load(); i++) {
      std::string k = "key" + std::to_string(i % kKeys);
      if (get(f, k, &v) && v.rfind(k + "=", 0) != 0) bad++;
    }
  });
  std::thread grower([&] {
    while (!done.load()) {
      if (f.wants_growth()) f.grow();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; t++) {
    writers.emplace_back([&, t] {
      for (int r = 0; r < 2; r++) {
        for (int i = t; i < kKeys; i += 2) {
          std::string k = "key" + std::to_string(i);
          set(f, k, k + "=" + std::to_string(r), r + 1);
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  grower.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(f.items(), static_cast<uint64_t>(kKeys));
  EXPECT_GE(f.buckets(), 4096u);  // doubled at least twice meanwhile (from 1024)
  std::string v;
  for (int i = 0; i < kKeys; i++) {
    std::string k = "key" + std::to_string(i);
    ASSERT_TRUE(get(f, k, &v)) << k;
    EXPECT_EQ(v, k + "=1");
  }
}

TEST(FrontendTest, EvictTakesOnlyCleanItems) {
  Frontend f(16);
  for (int i = 0; i < 1000; i++) set(f, "k" + std::to_string(i), std::string(100, 'x'), i + 1);
  uint64_t freed = f.evict(UINT64_MAX, [](const Item& it) { return it.seq % 2 == 0; });
  EXPECT_EQ(f.items(), 500u);
  EXPECT_GT(freed, 500u * 100);
  std::string v;
  EXPECT_TRUE(get(f, "k0", &v));   // seq 1: not clean
  EXPECT_FALSE(get(f, "k1", &v));  // seq 2: evicted
}

// Far more items than slots: long overflow chains, erased from and
// replaced in every position, stay consistent.
TEST(FrontendTest, OverflowChainsSurviveEraseAndReplace) {
  Frontend f(16);  // 1024 buckets, never grown here: about 20 items each
  constexpr int kKeys = 20000;
  for (int i = 0; i < kKeys; i++) set(f, "k" + std::to_string(i), "v", i + 1);
  for (int i = 0; i < kKeys; i += 2) {
    const std::string k = "k" + std::to_string(i);
    const uint64_t h = hash_key(k);
    Frontend::Locked lk(&f, h);
    lk.erase(lk.find(k, h));
  }
  for (int i = 1; i < kKeys; i += 4) set(f, "k" + std::to_string(i), std::string(200, 'y'), 1);
  EXPECT_EQ(f.items(), uint64_t{kKeys / 2});
  std::string v;
  for (int i = 0; i < kKeys; i++) {
    const bool there = get(f, "k" + std::to_string(i), &v);
    ASSERT_EQ(there, i % 2 == 1) << i;
    if (there) {
      EXPECT_EQ(v, i % 4 == 1 ? std::string(200, 'y') : "v") << i;
    }
  }
  uint64_t n = 0;
  f.for_each([&](const Item&) { n++; });
  EXPECT_EQ(n, uint64_t{kKeys / 2});
  ASSERT_TRUE(f.grow());
  for (int i = 1; i < kKeys; i += 2) ASSERT_TRUE(get(f, "k" + std::to_string(i), &v)) << i;
}

// Hashes that collide in their low bits put thousands of items in one
// bucket, more than grow() keeps room for: the split walks the bucket
// instead of allocating, and keeps every item findable.
TEST(FrontendTest, GrowSplitsABucketOfMoreItemsThanItsBuffer) {
  Frontend f(16);
  constexpr uint64_t kKeys = 5000;
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < kKeys; i++) {
    const std::string k = "k" + std::to_string(i);
    const uint64_t h = (hash_key(k) & ~uint64_t{0xFFFFF}) | 0x12345;  // one bucket
    Frontend::Locked lk(&f, h);
    lk.replace(lk.find(k, h), Item::make(h, i + 1, 0, k, "v" + std::to_string(i), false));
    keys.push_back(k);
  }
  ASSERT_TRUE(f.grow());
  ASSERT_TRUE(f.grow());
  Reclaimer::Guard g;
  for (uint64_t i = 0; i < kKeys; i++) {
    const uint64_t h = (hash_key(keys[i]) & ~uint64_t{0xFFFFF}) | 0x12345;
    std::string v;
    ASSERT_TRUE(f.read(keys[i], h, [&](const Item& it) { v.assign(it.value()); })) << i;
    EXPECT_EQ(v, "v" + std::to_string(i));
  }
  uint64_t n = 0;
  f.for_each([&](const Item&) { n++; });
  EXPECT_EQ(n, kKeys);
}

// A value that fits the item overwrites it in place; a longer one gets a
// new item. Either way the new version is not applied yet.
TEST(FrontendTest, InstallOverwritesInPlaceWhenTheValueFits) {
  Frontend f(16);
  const uint64_t h = hash_key("k");
  Frontend::Locked lk(&f, h);
  Item* a = lk.install(nullptr, h, 1, 10, "k", std::string(100, 'a'), false);
  a->mark_applied(10, 1);
  EXPECT_EQ(a->applied_epoch.load(), 1u);
  Item* b = lk.install(a, h, 2, 20, "k", std::string(90, 'b'), false);
#if !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(a, b);
#endif
  EXPECT_EQ(b->value(), std::string(90, 'b'));
  EXPECT_EQ(b->applied_epoch.load(), 0u);
  b->mark_applied(10, 1);  // the old version's apply finishing late: no mark
  EXPECT_EQ(b->applied_epoch.load(), 0u);
  Item* c = lk.install(b, h, 3, 30, "k", std::string(1000, 'c'), false);
  EXPECT_NE(b, c);
  EXPECT_EQ(lk.find("k", h), c);
  EXPECT_EQ(c->value(), std::string(1000, 'c'));
  EXPECT_EQ(f.items(), 1u);
  EXPECT_EQ(f.bytes(), c->bytes());
}

}  // namespace
}  // namespace kv
