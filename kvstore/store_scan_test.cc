// Ordered reads through the store: Store::scan(begin, end, limit), the
// iterator, and the upgrade of a store made before the ordered index.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "kv/check.h"
#include "kv/store.h"
#include "kvstore/backend.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/store_impl.h"
#include "libpm/sync_point.h"
#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

StoreOptions options(bool background) {
  StoreOptions o;
  o.logs = 2;
  o.log_bytes = 256 << 10;
  o.max_key_bytes = 64;
  o.max_value_bytes = 1024;
  o.initial_heap_bytes = 4 << 20;
  o.background = background;
  o.epoch_ms = 2;
  return o;
}

using Model = std::map<std::string, std::string>;
using Pairs = std::vector<std::pair<std::string, std::string>>;

std::vector<std::pair<std::string, std::string>> scan(Store& s, std::string_view begin,
                                                      std::string_view end, uint64_t limit = 0) {
  std::vector<std::pair<std::string, std::string>> out;
  Status st = s.scan(begin, end, limit, [&](std::string_view k, std::string_view v) {
    out.emplace_back(k, v);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

std::vector<std::pair<std::string, std::string>> expected(const Model& m, const std::string& begin,
                                                          const std::string& end,
                                                          uint64_t limit = 0) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = m.lower_bound(begin); it != m.end() && (end.empty() || it->first < end); ++it) {
    if (limit != 0 && out.size() == limit) break;
    out.push_back(*it);
  }
  return out;
}

std::string key_of(std::mt19937_64& rng) {
  static const char* kDirs[] = {"a/", "b/", "b/c/", "\xff", ""};
  return kDirs[rng() % 5] + std::to_string(rng() % 500);
}

class OrderedScanTest : public ::testing::TestWithParam<bool> {
 protected:
  pm::test::TempDir dir_;
  std::string path_ = dir_.file("kv.pm");
  StoreOptions opts_ = options(GetParam());
};

// Ranges and limits against a sorted model, while records sit unapplied in
// the logs, applied but uncommitted, committed, and after a reopen.
TEST_P(OrderedScanTest, RangesInKeyOrderMatchAModelAtEveryStage) {
  std::mt19937_64 rng(GetParam() ? 1 : 2);
  Model model;
  auto check = [&](Store& s, const char* stage) {
    for (int q = 0; q < 12; q++) {
      std::string begin = q == 0 ? "" : key_of(rng), end = q % 3 == 0 ? "" : key_of(rng);
      const uint64_t limit = q % 4 == 0 ? 1 + rng() % 20 : 0;
      ASSERT_EQ(scan(s, begin, end, limit), expected(model, begin, end, limit))
          << stage << " [" << begin << ", " << end << ") limit " << limit;
    }
    // Prefix scans, in order too.
    std::vector<std::pair<std::string, std::string>> b;
    ASSERT_TRUE(s.scan("b/", [&](std::string_view k, std::string_view v) {
                   b.emplace_back(k, v);
                   return true;
                 }).ok());
    ASSERT_EQ(b, expected(model, "b/", "b0")) << stage;
  };
  {
    auto s = Store::open(path_, opts_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    for (int round = 0; round < 6; round++) {
      for (int i = 0; i < 700; i++) {
        const std::string k = key_of(rng);
        if (rng() % 4 == 0) {
          Status st = (*s)->remove(k);
          ASSERT_TRUE(st.ok() || st.is_not_found()) << st.to_string();
          model.erase(k);
        } else {
          const std::string v = std::to_string(rng() % 1000);
          ASSERT_TRUE((*s)->put(k, v).ok());
          model[k] = v;
        }
      }
      check(**s, "with records in the logs");
      if (!GetParam()) {
        ASSERT_TRUE((*s)->glean(300).ok());
        check(**s, "part applied, not committed");
        ASSERT_TRUE((*s)->checkpoint().ok());
        check(**s, "committed");
      }
    }
  }
  auto s = Store::open(path_, opts_);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  check(**s, "reopened");
  ASSERT_TRUE((*s)->checkpoint().ok());
  check(**s, "reopened and committed");
  // The table and its index agree.
  s->reset();
  auto c = pm::Container::open(path_);
  ASSERT_TRUE(c.ok());
  Result<StoreCheck> rep = check_store(c->get());
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->problems.empty()) << rep->problems.front();
}

// An iterator walks batches while writers change keys ahead of it: keys come
// in order, each once, and every key no writer touches comes, with its value.
// The store is reopened first: the stable keys are read from the backend
// (the scan's prefetch pipeline for keys the frontend lacks) while the
// writer's applies and epochs change its chains.
TEST_P(OrderedScanTest, IteratorSeesStableKeysOnceInOrderBesideWriters) {
  {
    auto s = Store::open(path_, opts_);
    ASSERT_TRUE(s.ok());
    for (int i = 0; i < 3000; i++) {
      char k[16];
      std::snprintf(k, sizeof k, "k%05d", i);
      ASSERT_TRUE((*s)->put(k, i % 2 ? "stable" : "moving").ok());
    }
    ASSERT_TRUE((*s)->checkpoint().ok());
  }
  auto s = Store::open(path_, opts_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(9);
    while (!stop) {
      char k[16];
      std::snprintf(k, sizeof k, "k%05d", static_cast<int>(rng() % 1500) * 2);  // even keys only
      if (rng() % 2) {
        (void)st.remove(k);
      } else {
        (void)st.put(k, "moving");
      }
      if (!GetParam() && rng() % 64 == 0) (void)st.checkpoint();
    }
  });
  for (int pass = 0; pass < 5; pass++) {
    auto it = st.iterator("k02500");
    it->seek("k00100");
    std::string last;
    int stable = 0;
    for (; it->valid(); it->next()) {
      const std::string k(it->key());
      ASSERT_GT(k, last) << "out of order or twice";
      ASSERT_GE(k, "k00100");
      ASSERT_LT(k, "k02500");
      last = k;
      const int n = std::stoi(k.substr(1));
      if (n % 2) {
        ASSERT_EQ(it->value(), "stable") << k;
        ASSERT_EQ(n, 101 + 2 * stable) << "a stable key was skipped";
        stable++;
      }
    }
    ASSERT_TRUE(it->status().ok()) << it->status().to_string();
    EXPECT_EQ(stable, 1200);
  }
  stop = true;
  writer.join();
  // Scans do not install what they read: every pass reads them there.
  EXPECT_GE(st.stats().misses, 5 * 1200u) << "the stable keys were to be read from the backend";
}

TEST_P(OrderedScanTest, PrefixEndsAndEmptyRanges) {
  EXPECT_EQ(Store::prefix_end("ab"), "ac");
  EXPECT_EQ(Store::prefix_end("a\xff"), "b");
  EXPECT_EQ(Store::prefix_end("\xff\xff"), "");
  EXPECT_EQ(Store::prefix_end(""), "");
  auto s = Store::open(path_, opts_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->put("a", "1").ok());
  ASSERT_TRUE((*s)->put("\xff\xff", "2").ok());
  EXPECT_TRUE(scan(**s, "b", "b").empty());
  EXPECT_TRUE(scan(**s, "c", "b").empty());
  EXPECT_EQ(scan(**s, "\xff", ""), (std::vector<std::pair<std::string, std::string>>{{"\xff\xff", "2"}}));
  auto it = (*s)->iterator();
  EXPECT_FALSE(it->valid());  // not positioned yet
  it->seek("");
  ASSERT_TRUE(it->valid());
  EXPECT_EQ(it->key(), "a");
  it->next();
  ASSERT_TRUE(it->valid());
  EXPECT_EQ(it->key(), "\xff\xff");
  it->next();
  EXPECT_FALSE(it->valid());
  EXPECT_TRUE(it->status().ok());
}

// Keys unapplied in the logs come to a reader in batches (256 at a time);
// records applied and committed between two batches move their keys from
// the logs to the index, behind the reader or ahead of it. Every key is
// still seen once, in order.
TEST(OrderedScanPendingTest, KeysAppliedBetweenPendingBatchesAreSeenOnce) {
  pm::test::TempDir dir;
  StoreOptions o = options(false);
  o.log_bytes = 1 << 20;
  auto s = Store::open(dir.file("kv.pm"), o);
  ASSERT_TRUE(s.ok());
  Model m;
  for (int i = 0; i < 1500; i++) {
    char k[16];
    std::snprintf(k, sizeof k, "k%05d", (i * 7919) % 1500);  // logged out of key order
    m[k] = std::to_string(i);
    ASSERT_TRUE((*s)->put(k, m[k]).ok());
  }
  auto it = (*s)->iterator();
  std::vector<std::pair<std::string, std::string>> seen;
  for (it->seek(""); it->valid(); it->next()) {
    seen.emplace_back(it->key(), it->value());
    if (seen.size() % 37 == 0) {  // apply some records and commit them
      ASSERT_TRUE((*s)->glean(60).ok());
      ASSERT_TRUE((*s)->advance_epoch().ok());
    }
  }
  ASSERT_TRUE(it->status().ok()) << it->status().to_string();
  EXPECT_EQ(seen, expected(m, "", ""));
  EXPECT_EQ(scan(**s, "k00700", "", 300), expected(m, "k00700", "", 300));
}

// A put over a key whose first put is not applied yet is not logged as
// one the index holds: once a gleaner collapses the first record, the
// second is the only place a scan can learn of the key.
bool scan_sees_overwrite_of_unapplied_key(const std::string& path) {
  auto s = Store::open(path, options(false));
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE((*s)->put("k", "1").ok());
  EXPECT_TRUE((*s)->put("k", "2").ok());
  EXPECT_TRUE((*s)->glean(1).ok());  // the first record: collapsed
  return scan(**s, "", "") == Pairs{{"k", "2"}};
}

TEST(OrderedScanPendingTest, AnOverwriteOfAKeyNotYetAppliedIsSeen) {
  pm::test::TempDir dir;
  EXPECT_TRUE(scan_sees_overwrite_of_unapplied_key(dir.file("kv.pm")));
}

// run(path) with a planted bug switched on.
bool with_bug(bool* bug, bool (*run)(const std::string&)) {
  pm::test::TempDir dir;
  *bug = true;
  const bool seen = run(dir.file("kv.pm"));
  *bug = false;
  return seen;
}

TEST(OrderedScanPlantedBugTest, AnOverwriteTakenForIndexedBeforeItsKeyIsHidesIt) {
  EXPECT_FALSE(with_bug(&g_kv_planted_bugs.index_flag_ignores_applied,
                        scan_sees_overwrite_of_unapplied_key));
}

// A session killed after a put was applied (not committed) and the key
// overwritten: the overwrite's record says the key is indexed, which the
// crash made false. The next session must take the key from that record.
bool scan_after_crash_sees_key_applied_uncommitted(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto s = Store::open(path, options(false));
    bool ok = s.ok() && (*s)->put("k", "1").ok() && (*s)->glean(1).ok() &&
              (*s)->put("k", "2").ok();
    ::_exit(ok ? 0 : 1);  // no close: as a crash
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto s = Store::open(path, options(false));
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return false;
  EXPECT_TRUE((*s)->glean(1).ok());  // the first record: collapsed
  return scan(**s, "", "") == Pairs{{"k", "2"}};
}

TEST(OrderedScanPendingTest, AKeyAppliedButNotCommittedBeforeACrashIsSeen) {
  pm::test::TempDir dir;
  EXPECT_TRUE(scan_after_crash_sees_key_applied_uncommitted(dir.file("kv.pm")));
}

TEST(OrderedScanPlantedBugTest, TrustingAnEarlierSessionsIndexFlagsHidesAKey) {
  EXPECT_FALSE(with_bug(&g_kv_planted_bugs.index_flag_of_any_session,
                        scan_after_crash_sees_key_applied_uncommitted));
}

// A thread keeps its scan's buffers for the next scan: a scan started from
// inside a scan's callback, and scans of another store in between, must
// each see their own range, whole.
TEST_P(OrderedScanTest, NestedScansAndScansOfTwoStoresKeepTheirOwnRanges) {
  auto s = Store::open(path_, opts_);
  auto t = Store::open(dir_.file("other.pm"), opts_);
  ASSERT_TRUE(s.ok() && t.ok());
  Model ms, mt;
  for (int i = 0; i < 600; i++) {  // more than one batch of 256
    const std::string k = "k" + std::to_string(1000 + i);
    ms[k] = "s" + std::to_string(i);
    mt[k] = "t" + std::to_string(i);
    ASSERT_TRUE((*s)->put(k, ms[k]).ok());
    ASSERT_TRUE((*t)->put(k, mt[k]).ok());
  }
  ASSERT_TRUE((*s)->checkpoint().ok());  // half applied, half in the logs
  std::vector<std::pair<std::string, std::string>> outer, inner_last;
  Status st = (*s)->scan("k1100", "k1400", 0, [&](std::string_view k, std::string_view v) {
    outer.emplace_back(k, v);
    if (outer.size() % 100 == 1) {
      inner_last = scan(**t, std::string(k), "");  // nested, another store
      EXPECT_EQ(scan(**s, "k1000", "k1010"), expected(ms, "k1000", "k1010"));  // nested, same
    }
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(outer, expected(ms, "k1100", "k1400"));
  EXPECT_EQ(inner_last, expected(mt, "k1300", ""));  // the 201st key of the outer range
  EXPECT_EQ(scan(**t, "k1590", "", 5), expected(mt, "k1590", "", 5));  // kept buffers, new store
  EXPECT_EQ(scan(**s, "", "k1003"), expected(ms, "", "k1003"));
}

INSTANTIATE_TEST_SUITE_P(Modes, OrderedScanTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Background" : "Manual"; });

// A store made before the index (format 2: the root without it) is
// upgraded at its first writable open; a read-only open of it still lists
// in order, without the index.
TEST(OrderedScanUpgradeTest, AnOlderStoreGetsItsIndexAtTheFirstWritableOpen) {
  pm::test::TempDir dir;
  const std::string path = dir.file("old.pm");
  StoreOptions o = options(false);
  Model model;
  {
    auto s = Store::open(path, o);
    ASSERT_TRUE(s.ok());
    for (int i = 0; i < 2000; i++) {
      const std::string k = "key" + std::to_string(i * 7919 % 2000);
      ASSERT_TRUE((*s)->put(k, std::to_string(i)).ok());
      model[k] = std::to_string(i);
    }
    ASSERT_TRUE((*s)->checkpoint().ok());
    ASSERT_TRUE((*s)->put("key5", "in the log").ok());  // replayed at open
    model["key5"] = "in the log";
    ASSERT_TRUE((*s)->remove("key6").ok());
    model.erase("key6");
  }
  {  // back to format 2: a root that knows no index
    auto c = pm::Container::open(path, container_options(o));
    ASSERT_TRUE(c.ok());
    auto* r = (*c)->root<BackendRoot>();
    (*c)->will_write(r, sizeof *r);
    r->version = 2;
    r->index = 0;
    ASSERT_TRUE((*c)->commit().ok());
  }
  {
    StoreOptions ro = o;
    ro.read_only = true;
    auto s = Store::open(path, ro);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(scan(**s, "key1", "key2"), expected(model, "key1", "key2"));
  }
  {
    auto s = Store::open(path, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(scan(**s, "", ""), expected(model, "", ""));
  }
  auto c = pm::Container::open(path);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->root<BackendRoot>()->version, kBackendVersion);
  Result<StoreCheck> rep = check_store(c->get());
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->problems.empty()) << rep->problems.front();
}

// A store created without the index (StoreOptions::ordered = false) scans
// in order all the same (by reading and sorting its range), checks clean,
// and stays without one across reopens.
TEST(OrderedScanUnorderedTest, AStoreWithoutTheIndexScansInOrderBySorting) {
  pm::test::TempDir dir;
  const std::string path = dir.file("hash.pm");
  StoreOptions o = options(false);
  o.ordered = false;
  Model model;
  for (int session = 0; session < 2; session++) {
    // Created without the index; reopened with ordered = true, which only
    // create reads.
    auto s = Store::open(path, session == 0 ? o : options(false));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_FALSE((*s)->stats().ordered);
    for (int i = 0; i < 500; i++) {
      const std::string k = "k" + std::to_string(i * 37 % 500);
      ASSERT_TRUE((*s)->put(k, std::to_string(session)).ok());
      model[k] = std::to_string(session);
    }
    ASSERT_TRUE((*s)->glean(100).ok());
    EXPECT_EQ(scan(**s, "k1", "k3"), expected(model, "k1", "k3"));
    EXPECT_EQ(scan(**s, "", "", 7), expected(model, "", "", 7));
    ASSERT_TRUE((*s)->checkpoint().ok());
  }
  auto c = pm::Container::open(path);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->root<BackendRoot>()->index, 0u);
  Result<StoreCheck> rep = check_store(c->get());
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->problems.empty()) << rep->problems.front();
}

// The planted bug the crash harness must catch, seen here directly: a key
// put again after its removal is applied is missing from scans and from
// the index that pm check compares with the table.
TEST(OrderedScanPlantedBugTest, ARevivedKeyLeftOutOfTheIndexIsSeen) {
  pm::test::TempDir dir;
  const std::string path = dir.file("bug.pm");
  g_kv_planted_bugs.index_misses_revived_key = true;
  {
    auto s = Store::open(path, options(false));
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->put("k", "1").ok());
    ASSERT_TRUE((*s)->checkpoint().ok());
    ASSERT_TRUE((*s)->remove("k").ok());
    ASSERT_TRUE((*s)->glean(10).ok());  // a ghost now (an epoch would purge it)
    ASSERT_TRUE((*s)->put("k", "2").ok());
    ASSERT_TRUE((*s)->checkpoint().ok());
  }
  g_kv_planted_bugs.index_misses_revived_key = false;
  auto c = pm::Container::open(path);
  ASSERT_TRUE(c.ok());
  Result<StoreCheck> rep = check_store(c->get());
  ASSERT_TRUE(rep.ok());
  ASSERT_FALSE(rep->problems.empty());
  EXPECT_NE(rep->problems.front().find("not in the index"), std::string::npos)
      << rep->problems.front();
}

// An iterator reads the store as of its seek: overwrites, removes and new
// keys made after it, applied and committed while it is open, do not show
// in the batches it reads later; the next seek sees them; closing it drops
// what was kept. The keys are read from the backend only (the store
// reopened), so what an update keeps comes from there. Returns what the
// iterator read across the updates; *kept: StoreStats::snapshot_versions
// after them.

std::string key3(int i) {
  char k[8];
  std::snprintf(k, sizeof k, "k%03d", i);
  return k;
}

Pairs read_across_updates(const std::string& path, uint64_t* kept) {
  {
    auto s = Store::open(path, options(false));
    EXPECT_TRUE(s.ok());
    for (int i = 0; i < 300; i++) EXPECT_TRUE((*s)->put(key3(i), "1").ok());
    EXPECT_TRUE((*s)->checkpoint().ok());
  }
  auto s = Store::open(path, options(false));
  EXPECT_TRUE(s.ok());
  Store& st = **s;
  Pairs got;
  {
    auto it = st.iterator();
    it->seek("");
    EXPECT_TRUE(it->valid());
    got.emplace_back(it->key(), it->value());
    EXPECT_EQ(st.stats().snapshots_open, 1u);
    // Past the iterator's first batch of 128.
    EXPECT_TRUE(st.put(key3(200), "2").ok());
    EXPECT_TRUE(st.remove(key3(250)).ok());
    EXPECT_TRUE(st.put(key3(250) + "a", "2").ok());
    auto txn = st.begin();
    EXPECT_TRUE(txn->remove(key3(260)).ok());
    EXPECT_TRUE(txn->put(key3(260) + "a", "2").ok());
    EXPECT_TRUE(txn->commit().ok());
    EXPECT_TRUE(st.checkpoint().ok());  // 250 and 260 leave the index
    *kept = st.stats().snapshot_versions;
    for (it->next(); it->valid(); it->next()) got.emplace_back(it->key(), it->value());
    EXPECT_TRUE(it->status().ok()) << it->status().to_string();
    it->seek(key3(199));
    Pairs now;
    for (; it->valid() && now.size() < 4; it->next()) now.emplace_back(it->key(), it->value());
    EXPECT_EQ(now, (Pairs{{key3(199), "1"}, {key3(200), "2"}, {key3(201), "1"}, {key3(202), "1"}}));
    it->seek(key3(250));
    EXPECT_TRUE(it->valid() && it->key() == key3(250) + "a");
  }
  EXPECT_EQ(st.stats().snapshots_open, 0u);
  EXPECT_EQ(st.stats().snapshot_versions, 0u);
  return got;
}

Pairs as_before() {
  Pairs all;
  for (int i = 0; i < 300; i++) all.emplace_back(key3(i), "1");
  return all;
}

TEST(OrderedScanSnapshotTest, AnIteratorReadsTheStoreAsOfItsSeek) {
  pm::test::TempDir dir;
  uint64_t kept = 0;
  EXPECT_EQ(read_across_updates(dir.file("snap.pm"), &kept), as_before());
  EXPECT_EQ(kept, 5u);  // one version per key updated
}

TEST(OrderedScanPlantedBugTest, UpdatesThatKeepNothingShowInAnOpenIterator) {
  pm::test::TempDir dir;
  g_kv_planted_bugs.snapshot_keeps_nothing = true;
  uint64_t kept = 0;
  const Pairs got = read_across_updates(dir.file("bug.pm"), &kept);
  g_kv_planted_bugs.snapshot_keeps_nothing = false;
  EXPECT_NE(got, as_before());
}

// Versions only a closed snapshot needed are dropped when it closes, while
// a younger one stays open; an iterator that has read to its end holds no
// snapshot.
TEST(OrderedScanSnapshotTest, WhatOnlyAClosedSnapshotNeededIsDropped) {
  pm::test::TempDir dir;
  auto s = Store::open(dir.file("snap.pm"), options(false));
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  auto put_all = [&](const char* v) {
    for (int i = 0; i < 300; i++) ASSERT_TRUE(st.put(key3(i), v).ok());
  };
  put_all("1");
  auto older = st.iterator();
  older->seek("");
  put_all("2");
  auto younger = st.iterator();
  younger->seek("");
  put_all("3");
  EXPECT_EQ(st.stats().snapshots_open, 2u);
  EXPECT_EQ(st.stats().snapshot_versions, 600u);
  older.reset();
  EXPECT_EQ(st.stats().snapshot_versions, 300u);
  int n = 0;
  for (; younger->valid(); younger->next(), n++) ASSERT_EQ(younger->value(), "2");
  EXPECT_EQ(n, 300);
  EXPECT_EQ(st.stats().snapshots_open, 0u) << "an iterator at its end holds its snapshot";
  EXPECT_EQ(st.stats().snapshot_versions, 0u);
}

// A snapshot keeps only the keys it reads: [seek key, end) of an iterator,
// [begin, end) of a scan. Updates outside every open range keep nothing
// (from the frontend, or read from the backend), and what is inside still
// reads as of the snapshot.
TEST(OrderedScanSnapshotTest, UpdatesKeepOnlyKeysAnOpenSnapshotReads) {
  pm::test::TempDir dir;
  StoreOptions o = options(false);
  o.dram_budget_bytes = 1;  // items evicted once applied: old versions come from the backend
  auto s = Store::open(dir.file("snap.pm"), o);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  for (int i = 0; i < 300; i++) ASSERT_TRUE(st.put(key3(i), "1").ok());
  ASSERT_TRUE(st.checkpoint().ok());
  auto it = st.iterator(key3(290));  // reads [100, 290), more than its first batch
  it->seek(key3(100));
  ASSERT_TRUE(it->valid());
  for (int i = 0; i < 300; i += 10) ASSERT_TRUE(st.put(key3(i), "2").ok());
  ASSERT_TRUE(st.remove(key3(150)).ok());
  EXPECT_EQ(st.stats().snapshot_versions, 19u) << "keys 100, 110, ..., 280 only";
  Pairs got;
  for (; it->valid(); it->next()) got.emplace_back(it->key(), it->value());
  ASSERT_TRUE(it->status().ok());
  ASSERT_EQ(got.size(), 190u);
  for (const auto& [k, v] : got) EXPECT_EQ(v, "1") << k;
  EXPECT_EQ(st.stats().snapshot_versions, 0u);
  // A scan's range: [begin, end), or to the last key without an end. Its
  // first batch (256 keys) is not its last: the snapshot is open.
  Status sc = st.scan(key3(10), "", 0, [&](std::string_view, std::string_view) {
    EXPECT_TRUE(st.put(key3(5), "3").ok());    // below the scan: nothing kept
    EXPECT_TRUE(st.put(key3(299), "3").ok());  // read by the scan: kept
    EXPECT_EQ(st.stats().snapshot_versions, 1u);
    return false;
  });
  EXPECT_TRUE(sc.ok()) << sc.to_string();
  // Its last batch is read before fn sees it: the snapshot is closed.
  sc = st.scan(key3(290), "", 0, [&](std::string_view, std::string_view) {
    EXPECT_EQ(st.stats().snapshots_open, 0u);
    return true;
  });
  EXPECT_TRUE(sc.ok()) << sc.to_string();
}

// Only the version a snapshot sees is kept: overwrites of a version written
// after every open snapshot keep nothing (they kept every value, DRAM
// growing with the updates made while one iterator stayed open).
TEST(OrderedScanSnapshotTest, OverwritesUnderAnOpenSnapshotKeepOneVersionPerKey) {
  pm::test::TempDir dir;
  auto s = Store::open(dir.file("snap.pm"), options(false));
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  for (int i = 0; i < 300; i++) ASSERT_TRUE(st.put(key3(i), "old").ok());
  auto it = st.iterator();
  it->seek("");
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 300; i++) ASSERT_TRUE(st.put(key3(i), std::to_string(round)).ok());
    if (round % 2 == 1) {
      ASSERT_TRUE(st.remove(key3(round)).ok());
    }
  }
  EXPECT_EQ(st.stats().snapshot_versions, 300u);
  int n = 0;
  for (; it->valid(); it->next(), n++) ASSERT_EQ(it->value(), "old");
  EXPECT_EQ(n, 300);
}

// An update that has taken its number but not logged its record yet when a
// scan opens its snapshot is in the snapshot: the scan waits for it. The
// update is held at its last sync point before logging until the scan
// either returns or waits for its log's writer lock.
std::atomic<int> g_held_stage{0};  // 1: an update is held; 2: released

void hold_update_before_logging(const char* name, pm::sync_point::Kind kind) {
  const std::string_view n(name);
  if (n == "kv.snapshot.wait_writer" && kind == pm::sync_point::Kind::kBlocked) {
    g_held_stage = 2;  // the scan waits for the update: let it go
    return;
  }
  int idle = 0;
  if (n != "kv.update.logging" || !g_held_stage.compare_exchange_strong(idle, 1)) return;
  for (int i = 0; i < 30000 && g_held_stage.load() != 2; i++) {  // 30 s: a hang, not a wait
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool scan_sees_update_in_flight(const std::string& path) {
  auto s = Store::open(path, options(false));
  EXPECT_TRUE(s.ok());
  Store& st = **s;
  EXPECT_TRUE(st.put("a", "1").ok());
  g_held_stage = 0;
  pm::sync_point::g_hook.store(&hold_update_before_logging);
  std::thread writer([&] { EXPECT_TRUE(st.put("b", "1").ok()); });
  while (g_held_stage.load() != 1) std::this_thread::yield();
  const Pairs got = scan(st, "", "");
  g_held_stage = 2;
  writer.join();
  pm::sync_point::g_hook.store(nullptr);
  return got == Pairs{{"a", "1"}, {"b", "1"}};
}

TEST(OrderedScanSnapshotTest, AnUpdateNumberedBeforeTheSnapshotIsInIt) {
  pm::test::TempDir dir;
  EXPECT_TRUE(scan_sees_update_in_flight(dir.file("snap.pm")));
}

TEST(OrderedScanPlantedBugTest, ASnapshotThatDoesNotWaitForUpdatesInFlightMissesThem) {
  pm::test::TempDir dir;
  g_kv_planted_bugs.snapshot_skips_in_flight = true;
  const bool seen = scan_sees_update_in_flight(dir.file("bug.pm"));
  g_kv_planted_bugs.snapshot_skips_in_flight = false;
  EXPECT_FALSE(seen);
}

// Transfers between accounts and renames of accounts, in transactions, by
// two writers, while scans and iterators check the invariants every
// snapshot keeps: as many accounts, the same total. With a DRAM budget of
// a few items, what updates keep is read from the backend too.
TEST_P(OrderedScanTest, ScansReadASnapshotBesideTransactions) {
  constexpr int kAccounts = 200, kStart = 100;
  opts_.dram_budget_bytes = 16 << 10;
  auto s = Store::open(path_, opts_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  auto name = [](int i, int gen) {
    char k[32];
    std::snprintf(k, sizeof k, "acct/%04d/%d", i, gen);
    return std::string(k);
  };
  for (int i = 0; i < kAccounts; i++) ASSERT_TRUE(st.put(name(i, 0), std::to_string(kStart)).ok());
  ASSERT_TRUE(st.put("other", "x").ok());
  ASSERT_TRUE(st.checkpoint().ok());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> kept_seen{0};
  auto writer = [&](int w) {
    // Writer w owns the accounts i with i % 2 == w: it knows their state.
    std::vector<int> value(kAccounts, kStart), gen(kAccounts, 0);
    std::mt19937_64 rng(w + 1);
    while (!stop) {
      const int i = 2 * static_cast<int>(rng() % (kAccounts / 2)) + w;
      const int j = 2 * static_cast<int>(rng() % (kAccounts / 2)) + w;
      auto txn = st.begin();
      if (i != j) {
        const int d = static_cast<int>(rng() % 7) - 3;
        value[i] -= d;
        value[j] += d;
        EXPECT_TRUE(txn->put(name(i, gen[i]), std::to_string(value[i])).ok());
        EXPECT_TRUE(txn->put(name(j, gen[j]), std::to_string(value[j])).ok());
      } else {  // a rename: one key leaves, another comes
        EXPECT_TRUE(txn->remove(name(i, gen[i])).ok());
        gen[i]++;
        EXPECT_TRUE(txn->put(name(i, gen[i]), std::to_string(value[i])).ok());
      }
      Status c = txn->commit();
      ASSERT_TRUE(c.ok()) << c.to_string();
      if (!GetParam() && rng() % 32 == 0) {
        ASSERT_TRUE(st.checkpoint().ok());
      }
      kept_seen = std::max<uint64_t>(kept_seen, st.stats().snapshot_versions);
    }
  };
  std::thread w0(writer, 0), w1(writer, 1);
  auto check = [&](const Pairs& got, int pass) {
    ASSERT_EQ(got.size(), static_cast<size_t>(kAccounts)) << "pass " << pass;
    long sum = 0;
    for (size_t k = 0; k < got.size(); k++) {
      if (k > 0) {
        ASSERT_LT(got[k - 1].first, got[k].first);
      }
      ASSERT_EQ(std::stoi(got[k].first.substr(5, 4)), static_cast<int>(k)) << got[k].first;
      sum += std::stol(got[k].second);
    }
    ASSERT_EQ(sum, long{kAccounts} * kStart) << "pass " << pass;
  };
  for (int pass = 0; pass < 60; pass++) {
    check(scan(st, "acct/", Store::prefix_end("acct/")), pass);
    // An iterator read slowly, a few keys at a time, so that the writers
    // change what it has not read yet.
    auto it = st.iterator(Store::prefix_end("acct/"));
    it->seek("acct/");
    Pairs got;
    for (; it->valid(); it->next()) {
      got.emplace_back(it->key(), it->value());
      if (got.size() % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_TRUE(it->status().ok()) << it->status().to_string();
    check(got, pass);
  }
  stop = true;
  w0.join();
  w1.join();
  EXPECT_GT(kept_seen.load(), 0u) << "no update ran beside an open snapshot";
  EXPECT_EQ(st.stats().snapshots_open, 0u);
  EXPECT_EQ(st.stats().snapshot_versions, 0u);
}

}  // namespace
}  // namespace kv
