// The version tree against a std::map model: point operations, order,
// snapshots, reopen (uncommitted work goes), growth, limits, damaged files.
// Crash states are explored by tests/crash/tree_crash_test.cc.
#include "kvstore/version_tree.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <random>
#include <thread>

#include "testutil/child.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

using pm::Result;

using Model = std::map<std::string, std::string>;

std::unique_ptr<VersionTree> make(const std::string& path, VersionTreeOptions o = {}) {
  auto t = VersionTree::create(path, o);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

std::unique_ptr<VersionTree> reopen(const std::string& path) {
  auto t = VersionTree::open(path);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

Model contents(const VersionTree& t, const VersionTree::Snapshot* s = nullptr) {
  Model m;
  std::string last;
  EXPECT_TRUE(t.scan(s, {}, {}, 0, [&](std::string_view k, std::string_view v) {
                 EXPECT_TRUE(m.empty() || std::string(k) > last) << "out of order at " << k;
                 last = k;
                 m.emplace(k, v);
                 return true;
               }).ok());
  return m;
}

std::string key_of(uint64_t i) {
  char b[32];
  snprintf(b, sizeof b, "key%010llu", static_cast<unsigned long long>(i));
  return b;
}

TEST(VersionTreeTest, PutGetDeleteAndCommitSurviveReopen) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  auto t = make(path);
  ASSERT_TRUE(t->put("b", "2").ok());
  ASSERT_TRUE(t->put("a", "1").ok());
  ASSERT_TRUE(t->put("a", "one").ok());  // in place: the epoch's own entry
  EXPECT_EQ(*t->get("a"), "one");
  EXPECT_TRUE(t->del("zz").is_not_found());
  ASSERT_TRUE(t->commit().ok());
  ASSERT_TRUE(t->del("b").ok());
  ASSERT_TRUE(t->put("c", "3").ok());
  EXPECT_TRUE(t->get("b").status().is_not_found());
  t.reset();  // no commit: the delete and "c" were never durable
  t = reopen(path);
  EXPECT_EQ(contents(*t), (Model{{"a", "one"}, {"b", "2"}}));
}

TEST(VersionTreeTest, RandomOperationsMatchAMapAcrossCommitsAndReopens) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  VersionTreeOptions o;
  o.key_max = 16;
  o.value_max = 40;
  o.initial_nodes = 4;  // grows
  auto t = make(path, o);
  Model committed, working;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 30; round++) {
    for (int i = 0; i < 800; i++) {
      const std::string k = key_of(rng() % 3000);
      if (rng() % 4 == 0) {
        const bool had = working.erase(k) > 0;
        EXPECT_EQ(t->del(k).ok(), had);
      } else {
        const std::string v(rng() % 41, static_cast<char>('a' + rng() % 26));
        ASSERT_TRUE(t->put(k, v).ok());
        working[k] = v;
      }
    }
    if (rng() % 3 != 0) {
      ASSERT_TRUE(t->commit().ok());
      committed = working;
    }
    if (rng() % 5 == 0) {
      t.reset();
      t = reopen(path);
      working = committed;
    }
    ASSERT_EQ(contents(*t), working) << "round " << round;
    for (int i = 0; i < 3000; i += 7) {  // point reads of the working state
      auto it = working.find(key_of(i));
      Result<std::string> got = t->get(key_of(i));
      ASSERT_EQ(got.ok(), it != working.end()) << key_of(i) << " round " << round;
      if (got.ok()) {
        ASSERT_EQ(*got, it->second);
      }
    }
  }
  EXPECT_GT(t->stats().height, 1u);
}

// Routing compares keys by their first 8 bytes first (a DRAM prefix per
// inner entry and per leaf position) and scans skip the search after their
// first leaf: keys of every length, with zero bytes and shared prefixes,
// must list in order from any point, with and without an end, in the
// working tree, a snapshot, and after a reopen rebuilt the prefixes.
TEST(VersionTreeTest, KeysOfAnyBytesAndLengthsRouteAndScanInOrder) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  VersionTreeOptions o;
  o.key_max = 255;
  o.value_max = 8;
  o.fanout = 12;  // a deep tree: several inner levels
  auto t = make(path, o);
  Model m;
  std::mt19937_64 rng(11);
  auto random_key = [&] {
    const int shape = static_cast<int>(rng() % 4);
    std::string k(1 + rng() % (shape == 3 ? 255 : 12), '\0');
    for (size_t i = 0; i < k.size(); i++) {
      // 0: any byte; 1: "abcdefgh" then 0..2; 2: bytes 0..2; 3: long, 250 shared bytes
      k[i] = shape == 1 && i < 8     ? "abcdefgh"[i]
             : shape == 3 && i < 250 ? 'x'
                                     : static_cast<char>(rng() % (shape == 0 ? 256 : 3));
    }
    return k;
  };
  auto update = [&](int n) {
    for (int i = 0; i < n; i++) {
      const std::string k = random_key();
      if (rng() % 5 == 0) {
        EXPECT_EQ(t->del(k).ok(), m.erase(k) > 0);
      } else {
        ASSERT_TRUE(t->put(k, std::to_string(i)).ok());
        m[k] = std::to_string(i);
      }
      if (i % 1000 == 999) {
        ASSERT_TRUE(t->commit().ok());
      }
    }
    ASSERT_TRUE(t->commit().ok());
  };
  auto check = [&](const Model& want_all, const VersionTree::Snapshot* snap, const char* what) {
    ASSERT_EQ(contents(*t, snap), want_all) << what;
    for (int i = 0; i < 200; i++) {
      const std::string from = random_key();
      const std::string end = rng() % 2 ? std::string() : random_key();
      std::vector<std::string> got, want;
      ASSERT_TRUE(t->scan(snap, from, end, 50, [&](std::string_view k, auto) {
                     got.emplace_back(k);
                     return true;
                   }).ok());
      for (auto it = want_all.lower_bound(from);
           it != want_all.end() && want.size() < 50 && (end.empty() || it->first < end); ++it) {
        want.push_back(it->first);
      }
      ASSERT_EQ(got, want) << what << ", scan " << i;
    }
  };
  update(6000);
  ASSERT_GT(t->stats().height, 2u);
  check(m, nullptr, "working tree");
  const Model before = m;
  {
    const VersionTree::Snapshot snap = t->snapshot();
    update(3000);  // splits the snapshot's leaves
    check(m, nullptr, "working tree after more writes");
    check(before, &snap, "snapshot");
  }
  t.reset();
  t = reopen(path);
  check(m, nullptr, "reopened");
  update(2000);
  check(m, nullptr, "written after reopen");
}

// A fork()ed child shares the tree's mapping: a put would write the
// parent's file at once. Its writes are refused, naming fork().
TEST(VersionTreeTest, AForkedChildCannotChangeItsParentsTree) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  auto t = make(path);
  ASSERT_TRUE(t->put("a", "1").ok());
  ASSERT_TRUE(t->commit().ok());
  const int code = pm::test::exit_code_in_child([&] {
    const pm::Status s = t->put("a", "child");
    if (s.code() != pm::Code::kInvalidArgument) return 2;
    if (s.message().find("fork()") == std::string::npos) return 3;
    if (t->del("a").ok() || t->commit().ok()) return 4;
    return 0;
  });
  ASSERT_EQ(code, 0) << "the step that went wrong";
  EXPECT_EQ(*t->get("a"), "1");
  ASSERT_TRUE(t->put("b", "2").ok());
  ASSERT_TRUE(t->commit().ok());
  t.reset();
  t = reopen(path);
  EXPECT_EQ(contents(*t), (Model{{"a", "1"}, {"b", "2"}}));
}

TEST(VersionTreeTest, ScansRespectBoundsLimitsAndIteratorBatches) {
  pm::test::TempDir dir;
  auto t = make(dir.file("t.tree"));
  for (int i = 0; i < 2000; i += 2) ASSERT_TRUE(t->put(key_of(i), std::to_string(i)).ok());
  ASSERT_TRUE(t->commit().ok());
  std::vector<std::string> got;
  ASSERT_TRUE(t->scan(nullptr, key_of(101), key_of(111), 0, [&](std::string_view k, auto) {
                 got.emplace_back(k);
                 return true;
               }).ok());
  EXPECT_EQ(got, (std::vector<std::string>{key_of(102), key_of(104), key_of(106), key_of(108),
                                           key_of(110)}));
  got.clear();
  ASSERT_TRUE(t->scan(nullptr, key_of(500), {}, 3, [&](std::string_view k, auto) {
                 got.emplace_back(k);
                 return true;
               }).ok());
  EXPECT_EQ(got, (std::vector<std::string>{key_of(500), key_of(502), key_of(504)}));

  VersionTree::Snapshot s = t->snapshot();
  VersionTreeIterator it(*t, &s, key_of(1500), 7);
  int n = 0;
  for (it.seek(key_of(1000)); it.valid(); it.next(), n++) {
    ASSERT_EQ(it.key(), key_of(1000 + 2 * n));
    ASSERT_EQ(it.value(), std::to_string(1000 + 2 * n));
  }
  EXPECT_TRUE(it.status().ok());
  EXPECT_EQ(n, 250);
}

TEST(VersionTreeTest, ASnapshotKeepsItsVersionThroughLaterSplitsAndCommits) {
  pm::test::TempDir dir;
  VersionTreeOptions o;
  o.initial_nodes = 4;
  auto t = make(dir.file("t.tree"), o);
  Model before;
  for (int i = 0; i < 500; i++) {
    ASSERT_TRUE(t->put(key_of(i), "old").ok());
    before[key_of(i)] = "old";
  }
  ASSERT_TRUE(t->commit().ok());
  VersionTree::Snapshot s = t->snapshot();
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 3000; i++) {
      if (i % 3 == 0) (void)t->del(key_of(i % 500));
      ASSERT_TRUE(t->put(key_of(i), "new" + std::to_string(round)).ok());
    }
    ASSERT_TRUE(t->commit().ok());
  }
  EXPECT_EQ(contents(*t, &s), before);
  EXPECT_EQ(*t->get(key_of(42), s), "old");
  const uint64_t retired = t->stats().retired_nodes;
  EXPECT_GT(retired, 0u);  // held for the snapshot
  s = VersionTree::Snapshot();
  ASSERT_TRUE(t->put("x", "y").ok());
  ASSERT_TRUE(t->commit().ok());
  EXPECT_EQ(t->stats().retired_nodes, 0u);
}

TEST(VersionTreeTest, ReadersRunBesideAWriter) {
  pm::test::TempDir dir;
  auto t = make(dir.file("t.tree"));
  for (int i = 0; i < 1000; i++) ASSERT_TRUE(t->put(key_of(i), "v0").ok());
  ASSERT_TRUE(t->commit().ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop) {
      VersionTree::Snapshot s = t->snapshot();
      // Every committed version holds 1000 keys, all with one value.
      Model m = contents(*t, &s);
      if (m.size() != 1000 || m.begin()->second != m.rbegin()->second) bad++;
    }
  });
  for (int v = 1; v < 15; v++) {
    for (int i = 0; i < 1000; i++) ASSERT_TRUE(t->put(key_of(i), "v" + std::to_string(v)).ok());
    ASSERT_TRUE(t->commit().ok());
  }
  stop = true;
  reader.join();
  EXPECT_EQ(bad, 0);
}

TEST(VersionTreeTest, LimitsAndMisuseGetClearErrors) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  VersionTreeOptions o;
  o.key_max = 8;
  o.value_max = 16;
  auto t = make(path, o);
  EXPECT_EQ(t->put("123456789", "v").code(), pm::Code::kInvalidArgument);
  EXPECT_EQ(t->put("", "v").code(), pm::Code::kInvalidArgument);
  EXPECT_EQ(t->put("k", std::string(17, 'v')).code(), pm::Code::kInvalidArgument);
  EXPECT_EQ(VersionTree::open(path).status().code(), pm::Code::kBusy);
  EXPECT_EQ(VersionTree::create(path, o).status().code(), pm::Code::kInvalidArgument);
  o.value_max = 4000;
  EXPECT_EQ(VersionTree::create(dir.file("big.tree"), o).status().code(),
            pm::Code::kInvalidArgument);
}

// Damage at each place the format relies on: a clear error, never a crash.
TEST(VersionTreeTest, DamagedFilesAreRefusedWithTheCause) {
  pm::test::TempDir dir;
  const std::string path = dir.file("t.tree");
  {
    auto t = make(path);
    for (int i = 0; i < 3000; i++) ASSERT_TRUE(t->put(key_of(i), "value").ok());
    ASSERT_TRUE(t->commit().ok());
  }
  std::string good;
  {
    FILE* f = fopen(path.c_str(), "rb");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) good.append(buf, n);
    fclose(f);
  }
  auto with = [&](const std::function<void(std::string&)>& damage) {
    std::string bytes = good;
    damage(bytes);
    const std::string p = dir.file("damaged.tree");
    unlink(p.c_str());
    FILE* f = fopen(p.c_str(), "wb");
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
    return VersionTree::open(p).status();
  };
  auto put64 = [](std::string& b, size_t off, uint64_t v) { memcpy(&b[off], &v, 8); };
  EXPECT_TRUE(with([](std::string& b) { b[0] = 'X'; }).is_corruption());
  EXPECT_TRUE(with([](std::string& b) { b[12] ^= 1; }).is_corruption());  // checksum
  EXPECT_TRUE(with([](std::string& b) { b.resize(b.size() - 100); }).is_corruption());
  EXPECT_TRUE(with([&](std::string& b) { put64(b, 64, 1u << 30); put64(b, 72, 1u << 30); })
                  .is_corruption());  // root
  auto root_of = [](const std::string& b) {
    uint64_t root;
    memcpy(&root, &b[64 + 8 * (b[128] & 1)], 8);
    return root;
  };
  EXPECT_TRUE(with([&](std::string& b) { b[root_of(b) * 4096 + 1] ^= 0x55; }).is_corruption());
  // A child pointer of the root aimed at the root itself (a cycle).
  EXPECT_TRUE(with([&](std::string& b) {
                const uint64_t root = root_of(b);
                for (size_t s = 0; s < 64; s++) {
                  const size_t off = root * 4096 + 64 + s * 64;
                  uint64_t start;
                  memcpy(&start, &b[off], 8);
                  if (start != 0) put64(b, off + 16, root);
                }
              }).is_corruption());
  EXPECT_TRUE(with([](std::string&) {}).ok());
}

}  // namespace
}  // namespace kv
