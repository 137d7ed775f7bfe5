#include "kvstore/ordered_index.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "kvstore/planted_bugs.h"
#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

class OrderedIndexTest : public ::testing::Test {
 protected:
  void SetUp() override { open(true); }

  void open(bool create) {
    idx_.reset();
    c_.reset();
    pm::Options o;
    o.initial_size = 1 << 20;
    o.max_size = 1ull << 30;
    o.tracker = pm::TrackerKind::kHints;  // the store's tracker: every write announced
    o.create_if_missing = create;
    auto c = pm::Container::open(dir_.file("idx.pm"), o);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    c_ = std::move(*c);
    auto* root = c_->root<IndexRoot>();
    if (root == nullptr) {
      Result<IndexRoot*> r = OrderedIndex::create(c_.get(), max_key_);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      ASSERT_TRUE(c_->set_root(*r).ok());
      root = *r;
    }
    auto idx = OrderedIndex::attach(c_.get(), root, max_key_);
    ASSERT_TRUE(idx.ok()) << idx.status().to_string();
    idx_ = std::move(*idx);
  }

  std::string thinned_leaves_take_new_keys();

  std::vector<std::string> range(std::string_view from, bool inclusive, std::string_view end,
                                 size_t max = SIZE_MAX) {
    std::vector<std::string> out;
    Status s = idx_->collect(from, inclusive, end, max, &out);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return out;
  }

  // Every key, checked, in order.
  std::vector<std::string> verified() {
    std::vector<std::string> keys, problems;
    idx_->verify([&](std::string_view k) { keys.emplace_back(k); }, &problems);
    EXPECT_TRUE(problems.empty()) << problems.front();
    return keys;
  }

  static std::vector<std::string> expected(const std::set<std::string>& m, std::string_view from,
                                           bool inclusive, std::string_view end) {
    std::vector<std::string> out;
    auto it = inclusive ? m.lower_bound(std::string(from)) : m.upper_bound(std::string(from));
    for (; it != m.end() && (end.empty() || *it < end); ++it) out.push_back(*it);
    return out;
  }

  pm::test::TempDir dir_;
  uint32_t max_key_ = 64;
  std::unique_ptr<pm::Container> c_;
  std::unique_ptr<OrderedIndex> idx_;
};

std::string random_key(std::mt19937_64& rng, size_t max) {
  std::string k(1 + rng() % max, '\0');
  for (char& ch : k) ch = static_cast<char>("ab\0\xff\x7f"[rng() % 5]);  // short alphabet: shared prefixes
  return k;
}

TEST_F(OrderedIndexTest, MatchesASortedSetThroughInsertsErasesCommitsAndAborts) {
  std::mt19937_64 rng(7);
  std::set<std::string> model, committed;
  for (int round = 0; round < 30; round++) {
    for (int i = 0; i < 600; i++) {
      const std::string k = random_key(rng, 12);
      if (rng() % 3 == 0) {
        ASSERT_TRUE(idx_->erase(k).ok());
        model.erase(k);
      } else {
        ASSERT_TRUE(idx_->insert(k).ok());
        model.insert(k);
      }
    }
    if (round % 5 == 4) {  // abort: back to the last commit
      ASSERT_TRUE(c_->abort().ok());
      model = committed;
    } else {
      ASSERT_TRUE(c_->commit().ok());
      committed = model;
    }
    ASSERT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
    ASSERT_EQ(idx_->keys(), model.size());
    for (int q = 0; q < 20; q++) {
      const std::string from = random_key(rng, 6), end = rng() % 4 ? random_key(rng, 6) : "";
      const bool incl = rng() % 2;
      ASSERT_EQ(range(from, incl, end), expected(model, from, incl, end)) << "round " << round;
      ASSERT_EQ(range(from, incl, end, 3).size(),
                std::min<size_t>(3, expected(model, from, incl, end).size()));
    }
  }
  open(false);  // reopened: what the last commit left
  EXPECT_EQ(verified(), std::vector<std::string>(committed.begin(), committed.end()));
}

TEST_F(OrderedIndexTest, AscendingInsertsFillNodesAndLongKeysSplitDeepTrees) {
  for (int i = 0; i < 20000; i++) {
    char k[16];
    std::snprintf(k, sizeof k, "%08d", i);
    ASSERT_TRUE(idx_->insert(k).ok());
  }
  // Appends leave full nodes behind: 290 cells of 14 bytes fit a 4 KiB
  // leaf, so 69 leaves and a root (even splits would leave about 140).
  EXPECT_LE(idx_->root()->nodes, 72u);
  EXPECT_EQ(verified().size(), 20000u);
  // Keys at the limit: four to a node, so every level splits often.
  std::mt19937_64 rng(3);
  std::set<std::string> model;
  for (const std::string& k : verified()) model.insert(k);
  for (int i = 0; i < 3000; i++) {
    std::string k(max_key_, 'x');
    for (int j = 0; j < 6; j++) k[max_key_ - 1 - j] = static_cast<char>('a' + rng() % 26);
    ASSERT_TRUE(idx_->insert(k).ok());
    model.insert(k);
  }
  EXPECT_GE(idx_->root()->height, 3u);
  EXPECT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
  // Erase everything, then insert again: emptied leaves take keys again.
  for (const std::string& k : model) ASSERT_TRUE(idx_->erase(k).ok());
  EXPECT_TRUE(verified().empty());
  EXPECT_TRUE(range("", true, "").empty());
  for (const std::string& k : model) ASSERT_TRUE(idx_->insert(k).ok());
  EXPECT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
}

// A queue: keys inserted ascending, the oldest removed. Emptied leaves
// leave the tree, so it stays the size of what it holds, and a scan from
// the start reads no trail of empty leaves.
TEST_F(OrderedIndexTest, AQueueLeavesNoTrailOfEmptyLeaves) {
  auto key = [](int i) {
    char k[16];
    std::snprintf(k, sizeof k, "q%09d", i);
    return std::string(k);
  };
  constexpr int kLive = 2000;
  for (int i = 0; i < 200000; i++) {
    ASSERT_TRUE(idx_->insert(key(i)).ok());
    if (i >= kLive) {
      ASSERT_TRUE(idx_->erase(key(i - kLive)).ok());
    }
    if (i % 20000 == 0) {
      ASSERT_TRUE(c_->commit().ok());
    }
  }
  EXPECT_EQ(idx_->keys(), uint64_t{kLive});
  EXPECT_LE(idx_->root()->nodes, 20u) << "emptied leaves stayed";
  const std::vector<std::string> all = verified();
  ASSERT_EQ(all.size(), size_t{kLive});
  EXPECT_EQ(all.front(), key(200000 - kLive));
  EXPECT_EQ(range("", true, "", 1), std::vector<std::string>{key(200000 - kLive)});
  // Everything removed: one empty leaf as the root.
  for (const std::string& k : all) ASSERT_TRUE(idx_->erase(k).ok());
  EXPECT_EQ(idx_->root()->nodes, 1u);
  EXPECT_EQ(idx_->root()->height, 1u);
  EXPECT_TRUE(verified().empty());
  ASSERT_TRUE(idx_->insert("again").ok());
  EXPECT_EQ(verified(), std::vector<std::string>{"again"});
}

TEST_F(OrderedIndexTest, AFullHeapRefusesAnInsertAndChangesNothing) {
  // Ballast fills the heap (at most 1 GiB) down to the last node-sized
  // block; then inserts fill the leaves until a split finds no room.
  for (size_t n : {size_t{16} << 20, size_t{1} << 20, size_t{64} << 10, size_t{4} << 10}) {
    while (c_->alloc(n, pm::AllocKind::kData).ok()) {
    }
  }
  std::set<std::string> model;
  Status s;
  std::mt19937_64 rng(5);
  for (int i = 0; s.ok(); i++) {
    std::string k(max_key_, 'k');
    for (int j = 0; j < 8; j++) k[j] = static_cast<char>('a' + rng() % 26);
    s = idx_->insert(k);
    if (s.ok()) model.insert(k);
    ASSERT_LT(i, 1000000);
  }
  EXPECT_EQ(s.code(), pm::Code::kNoSpace) << s.to_string();
  EXPECT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
  EXPECT_EQ(idx_->keys(), model.size());
  // Erasing still works (it never allocates), and a key erased leaves room
  // for itself: inserted again, it needs no new node.
  std::vector<std::string> erased;
  for (auto it = model.begin(); it != model.end();) {
    ASSERT_TRUE(idx_->erase(*it).ok());
    erased.push_back(*it);
    it = model.erase(it);
    if (it != model.end()) ++it;
  }
  ASSERT_TRUE(c_->commit().ok());
  EXPECT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
  for (const std::string& k : erased) ASSERT_TRUE(idx_->insert(k).ok()) << k;
  model.insert(erased.begin(), erased.end());
  EXPECT_EQ(verified(), std::vector<std::string>(model.begin(), model.end()));
}

// Removes of every other key leave leaves half full, and the bytes they
// free never make a free node: on a full heap no new key went in, however
// many were removed (a full disk of small values, in a user trial). Two or
// three neighbouring leaves that fit one node fewer are now packed, and
// give the split its node. Returns the first problem ("" if none).
std::string OrderedIndexTest::thinned_leaves_take_new_keys() {
  std::vector<void*> last;  // room for a few dozen nodes, then none
  for (size_t n : {size_t{16} << 20, size_t{1} << 20, size_t{64} << 10, size_t{4} << 10}) {
    for (Result<void*> m = c_->alloc(n, pm::AllocKind::kData); m.ok();
         m = c_->alloc(n, pm::AllocKind::kData)) {
      if (n == 4096) last.push_back(*m);
    }
  }
  if (last.size() <= 40) return "ballast left too little room";
  for (size_t i = last.size() - 40; i < last.size(); i++) {
    if (!c_->free(last[i]).ok()) return "free";
  }
  if (!c_->commit().ok()) return "commit";
  auto key = [](int i) {
    char b[16];
    std::snprintf(b, sizeof b, "k%08d", i);
    return std::string(b);
  };
  std::set<std::string> model;
  int next = 0;
  for (Status s; s.ok(); next++) {
    s = idx_->insert(key(next));
    if (s.ok()) model.insert(key(next));
    if (!s.ok() && s.code() != pm::Code::kNoSpace) return "fill: " + s.to_string();
  }
  if (model.size() < 1000) return "filled only " + std::to_string(model.size());
  if (!c_->commit().ok()) return "commit";
  const uint64_t nodes = idx_->root()->nodes;
  for (int i = 0; i < next; i += 2) {
    if (!idx_->erase(key(i)).ok()) return "erase";
    model.erase(key(i));
  }
  if (!c_->commit().ok()) return "commit";
  // New keys past the last: half as many as were removed need about a
  // quarter of the nodes, which packing the thinned leaves gives.
  const int more = static_cast<int>(model.size() / 2);
  for (int i = 0; i < more; i++, next++) {
    if (Status s = idx_->insert(key(next)); !s.ok()) {
      return "new key " + std::to_string(i) + " of " + std::to_string(more) + ": " + s.to_string();
    }
    model.insert(key(next));
  }
  std::vector<std::string> keys, problems;
  idx_->verify([&](std::string_view k) { keys.emplace_back(k); }, &problems);
  if (!problems.empty()) return "verify: " + problems.front();
  if (keys != std::vector<std::string>(model.begin(), model.end())) return "keys differ";
  if (idx_->keys() != model.size()) return "key count";
  if (idx_->root()->nodes > nodes) return "more nodes than before the removes";
  if (!c_->commit().ok()) return "commit";
  open(false);
  if (verified() != std::vector<std::string>(model.begin(), model.end())) return "after a reopen";
  return "";
}

TEST_F(OrderedIndexTest, OnAFullHeapLeavesThatRemovesThinnedOutArePackedToMakeRoomForNewKeys) {
  EXPECT_EQ(thinned_leaves_take_new_keys(), "");
}

TEST_F(OrderedIndexTest, PlantedBugAPackThatLeavesTheFreedLeafLinkedIsCaught) {
  g_kv_planted_bugs.index_merge_keeps_cell = true;
  const std::string problem = thinned_leaves_take_new_keys();
  g_kv_planted_bugs.index_merge_keeps_cell = false;
  EXPECT_NE(problem, "");
}

TEST_F(OrderedIndexTest, DamagedNodesAreCorruptionNotACrash) {
  for (int i = 0; i < 3000; i++) ASSERT_TRUE(idx_->insert("key" + std::to_string(i)).ok());
  ASSERT_TRUE(c_->commit().ok());
  std::mt19937_64 rng(11);
  // Scribble over a random stretch of the root node, read, restore.
  char* root = reinterpret_cast<char*>(idx_->root()->root);
  const uint32_t bytes = idx_->root()->node_bytes;
  int refused = 0;
  for (int t = 0; t < 200; t++) {
    const size_t at = rng() % bytes, n = 1 + rng() % 16;
    c_->will_write(root, bytes);
    for (size_t i = at; i < std::min<size_t>(bytes, at + n); i++) root[i] = static_cast<char>(rng());
    std::vector<std::string> out, problems;
    Status s = idx_->collect("", true, "", SIZE_MAX, &out);
    idx_->verify([](std::string_view) {}, &problems);
    refused += !s.ok();
    if (!s.ok()) {
      EXPECT_EQ(s.code(), pm::Code::kCorruption) << s.to_string();
    }
    (void)idx_->insert("new");  // may fail; must not crash
    (void)idx_->erase("key7");
    ASSERT_TRUE(c_->abort().ok());  // the committed tree again
    ASSERT_EQ(verified().size(), 3000u);
  }
  EXPECT_GT(refused, 0);
  // Slots that all point at one cell, and inflated dead bytes: the header
  // checks pass, but a rewrite of such a node would run past it. Inserts
  // that would rewrite it are refused.
  std::vector<std::string> keys = verified();
  auto* leaf = reinterpret_cast<uint32_t*>(idx_->root()->root);
  for (int h = 1; h < static_cast<int>(idx_->root()->height); h++) {
    leaf = reinterpret_cast<uint32_t*>(*reinterpret_cast<uint64_t*>(leaf + 6));  // `first`
  }
  c_->will_write(leaf, bytes);
  const uint32_t n = leaf[2];
  for (uint32_t i = 1; i < n; i++) leaf[8 + i] = leaf[8];  // every slot at cell 0
  for (int i = 0; i < 400; i++) {
    const Status s = idx_->insert("key0" + std::to_string(i) + "x");
    if (!s.ok()) {
      EXPECT_EQ(s.code(), pm::Code::kCorruption) << s.to_string();
    }
  }
  std::vector<std::string> problems;
  idx_->verify([](std::string_view) {}, &problems);
  EXPECT_FALSE(problems.empty());
  ASSERT_TRUE(c_->abort().ok());
  c_->will_write(leaf, bytes);
  leaf[4] = bytes;  // dead: the whole node
  bool refused_rewrite = false;
  for (int i = 0; i < 400 && !refused_rewrite; i++) {
    const Status s = idx_->insert("key0" + std::to_string(i) + "y");
    refused_rewrite = s.code() == pm::Code::kCorruption;
  }
  EXPECT_TRUE(refused_rewrite);
  ASSERT_TRUE(c_->abort().ok());
  EXPECT_EQ(verified(), keys);
  // A root pointing outside the heap.
  c_->will_write(&idx_->root()->root, 8);
  const_cast<IndexRoot*>(idx_->root())->root = 16;
  std::vector<std::string> out;
  EXPECT_EQ(idx_->collect("", true, "", 10, &out).code(), pm::Code::kCorruption);
}

}  // namespace
}  // namespace kv
