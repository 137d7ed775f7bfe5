#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "pm/container.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

// A node: a few pointer slots, each absolute, interior or self-relative
// (offset_ptr's encoding: target - &slot), then filler.
struct Graph {
  std::vector<std::byte*> nodes;
  std::vector<size_t> sizes;
  std::vector<std::vector<size_t>> edges;
};

void write_slot(Container& c, std::byte* node, int slot, uint64_t v) {
  c.will_write(node + 8 * slot, 8);
  std::memcpy(node + 8 * slot, &v, 8);
}

Graph build(Container& c, std::mt19937_64& rng, int n) {
  Graph g;
  for (int i = 0; i < n; i++) {
    size_t size = rng() % 3 == 0 ? 40000 + rng() % 100000 : 64 + rng() % 2000;
    auto* p = static_cast<std::byte*>(*c.alloc(size));
    c.will_write(p, size);
    std::memset(p, 0, size);
    g.nodes.push_back(p);
    g.sizes.push_back(size);
  }
  g.edges.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) {
    for (int s = 0; s < 4; s++) {
      if (rng() % 3 == 0) continue;
      size_t to = rng() % static_cast<size_t>(n);                               // cycles included
      std::byte* target = g.nodes[to] + (rng() % 2 ? rng() % g.sizes[to] : 0);  // interior too
      std::byte* node = g.nodes[static_cast<size_t>(i)];
      uint64_t v =
          rng() % 2 ? reinterpret_cast<uint64_t>(target)
                    : reinterpret_cast<uint64_t>(target) - reinterpret_cast<uint64_t>(node + 8 * s);
      write_slot(c, node, s, v);
      g.edges[static_cast<size_t>(i)].push_back(to);
    }
  }
  return g;
}

std::set<size_t> reachable(const Graph& g, const std::vector<size_t>& roots) {
  std::set<size_t> seen(roots.begin(), roots.end());
  std::vector<size_t> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    size_t i = stack.back();
    stack.pop_back();
    for (size_t to : g.edges[i]) {
      if (seen.insert(to).second) stack.push_back(to);
    }
  }
  return seen;
}

class ReachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.initial_size = 8 << 20;
    o.max_size = 4ull << 30;
    c_ = std::move(*Container::create(dir_.file("r.pm"), o));
  }
  test::TempDir dir_;
  std::unique_ptr<Container> c_;
};

TEST_F(ReachTest, CollectFreesExactlyTheUnreachableBlocksOfRandomGraphs) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    std::mt19937_64 rng(seed);
    Graph g = build(*c_, rng, 120);
    std::vector<size_t> roots = {rng() % 120, rng() % 120};
    ASSERT_TRUE(c_->set_root(g.nodes[roots[0]]).ok());
    ASSERT_TRUE(c_->set_root(g.nodes[roots[1]] + 8, "second").ok());  // interior root
    std::set<size_t> live = reachable(g, roots);
    Result<CollectReport> dry = c_->collect(true);
    ASSERT_TRUE(dry.ok());
    EXPECT_EQ(dry->freed_blocks, 120 - live.size()) << "seed " << seed;
    EXPECT_EQ(c_->info().blocks, 120u) << "a dry run freed something";
    Result<CollectReport> r = c_->collect();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->live_blocks, live.size());
    for (size_t i = 0; i < g.nodes.size(); i++) {
      EXPECT_EQ(c_->find_block(g.nodes[i]).ok(), live.count(i) == 1)
          << "node " << i << " seed " << seed;
    }
    CheckReport cr = c_->check();
    ASSERT_TRUE(cr.problems.empty()) << cr.problems.front();
    // Clear for the next graph.
    ASSERT_TRUE(c_->set_root(nullptr).ok());
    ASSERT_TRUE(c_->set_root(nullptr, "second").ok());
    ASSERT_TRUE(c_->collect().ok());
    ASSERT_EQ(c_->info().blocks, 0u);
  }
}

TEST_F(ReachTest, CollectedBlocksComeBackAfterAbortOrCrashUntilCommit) {
  std::mt19937_64 rng(3);
  Graph g = build(*c_, rng, 50);
  ASSERT_TRUE(c_->set_root(g.nodes[0]).ok());
  ASSERT_TRUE(c_->commit().ok());
  const uint64_t before = c_->info().blocks;
  ASSERT_TRUE(c_->collect().ok());
  const uint64_t after = c_->info().blocks;
  ASSERT_LT(after, before);
  ASSERT_TRUE(c_->abort().ok());
  EXPECT_EQ(c_->info().blocks, before);
  ASSERT_TRUE(c_->collect().ok());
  c_.reset();  // a crash before commit: the collection never happened
  c_ = std::move(*Container::open(dir_.file("r.pm")));
  EXPECT_EQ(c_->info().blocks, before);
  ASSERT_TRUE(c_->collect().ok());
  ASSERT_TRUE(c_->commit().ok());
  c_.reset();
  c_ = std::move(*Container::open(dir_.file("r.pm")));
  EXPECT_EQ(c_->info().blocks, after);
  EXPECT_TRUE(c_->check().problems.empty());
}

// 8-byte objects sit two to a 16-byte line; each is marked (and scanned) on
// its own, so the second of a pair still keeps its successor alive.
TEST_F(ReachTest, AdjacentEightByteObjectsAreMarkedOneByOne) {
  std::vector<void**> list;
  for (int i = 0; i < 64; i++) list.push_back(static_cast<void**>(*c_->alloc(8)));
  for (size_t i = 0; i + 1 < list.size(); i++) {
    c_->will_write(list[i], 8);
    *list[i] = list[i + 1];
  }
  c_->will_write(list.back(), 8);
  *list.back() = nullptr;
  ASSERT_EQ(reinterpret_cast<std::byte*>(list[1]) - reinterpret_cast<std::byte*>(list[0]), 8);
  ASSERT_TRUE(c_->set_root(list[0]).ok());
  Result<CollectReport> r = c_->collect();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->freed_blocks, 0u);
  EXPECT_EQ(r->live_blocks, list.size());
}

struct Holder {
  void* heap_ptr;
  uint64_t plain;
  int* stack_ptr;
  Holder* next;  // inside the container: fine
};

TEST_F(ReachTest, CheckNamesPointersThatEscapeTheContainer) {
  int on_stack = 0;
  auto* on_heap = new int(5);
  Holder* a = *c_->make<Holder>(Holder{nullptr, 42, nullptr, nullptr});
  Holder* b = *c_->make<Holder>(Holder{on_heap, 7, &on_stack, a});
  Holder* unreachable = *c_->make<Holder>(Holder{on_heap, 0, nullptr, nullptr});
  (void)unreachable;
  ASSERT_TRUE(c_->set_root(b).ok());
  CheckReport r = c_->check();
  ASSERT_EQ(r.escaping.size(), 2u);
  EXPECT_EQ(r.escaping[0].object, reinterpret_cast<uint64_t>(b));
  std::set<uint64_t> offsets = {r.escaping[0].offset, r.escaping[1].offset};
  EXPECT_EQ(offsets, (std::set<uint64_t>{offsetof(Holder, heap_ptr), offsetof(Holder, stack_ptr)}));
  for (const EscapingPointer& e : r.escaping) {
    EXPECT_TRUE(e.target == reinterpret_cast<uint64_t>(on_heap) ||
                e.target == reinterpret_cast<uint64_t>(&on_stack));
    EXPECT_FALSE(e.where.empty());
    // Named as /proc/self/maps names the mapping (gtest runs tests on the
    // main thread, whose stack is "[stack]").
    if (e.target == reinterpret_cast<uint64_t>(&on_stack)) {
      EXPECT_EQ(e.where, "[stack]");
    }
  }
  delete on_heap;
}

// Bytes that merely look like addresses in the usual heap/stack ranges, but
// are not in a mapping of this process, are not escaping pointers here
// (they would be for pm check, which reads another process's file).
TEST_F(ReachTest, StaleBytesInUnmappedRangesAreNotEscapesInProcess) {
  auto* p = static_cast<uint64_t*>(*c_->alloc(64));
  c_->will_write(p, 64);
  for (int i = 0; i < 8; i++) p[i] = 0x00007f0000646c6full + static_cast<uint64_t>(i);
  ASSERT_TRUE(c_->set_root(p).ok());
  EXPECT_TRUE(c_->check().escaping.empty());
  EXPECT_EQ(c_->check(/*foreign_writer=*/true).escaping.size(), 8u);
}

// A data block is kept while reachable, but words in it keep nothing alive:
// a block reached only through it is freed, one also reached from an object
// block is kept. A data block reached from nowhere is freed as well.
TEST_F(ReachTest, CollectKeepsReachableDataBlocksButDoesNotTraceThem) {
  auto** root = static_cast<void**>(*c_->alloc(16));
  auto** data = static_cast<void**>(*c_->alloc(64, AllocKind::kData));
  auto** big_data = static_cast<void**>(*c_->alloc(100000, AllocKind::kData));
  void* only_via_data = *c_->alloc(48);
  void* only_via_big_data = *c_->alloc(48);
  void* also_via_root = *c_->alloc(48);
  void* unreachable_data = *c_->alloc(64, AllocKind::kData);
  (void)unreachable_data;
  c_->will_write(root, 16);
  root[0] = data;
  root[1] = big_data;
  c_->will_write(data, 64);
  std::memset(data, 0, 64);
  data[0] = only_via_data;
  data[1] = also_via_root;
  c_->will_write(big_data, 100000);
  std::memset(big_data, 0, 100000);
  big_data[4000] = only_via_big_data;
  // Self-relative (offset_ptr) encoding, too.
  big_data[5000] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(only_via_big_data) -
                                           reinterpret_cast<uintptr_t>(&big_data[5000]));
  auto** keeper = static_cast<void**>(*c_->alloc(8));
  c_->will_write(keeper, 8);
  *keeper = also_via_root;
  ASSERT_TRUE(c_->set_root(root).ok());
  ASSERT_TRUE(c_->set_root(keeper, "keeper").ok());
  // The kinds are in the file: collect after reopening.
  ASSERT_TRUE(c_->commit().ok());
  c_.reset();
  c_ = std::move(*Container::open(dir_.file("r.pm")));
  Result<CollectReport> r = c_->collect();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->live_blocks, 5u);  // root, data, big_data, keeper, also_via_root
  EXPECT_EQ(r->freed_blocks, 3u);
  EXPECT_TRUE(c_->find_block(data).ok());
  EXPECT_TRUE(c_->find_block(big_data).ok());
  EXPECT_TRUE(c_->find_block(also_via_root).ok());
  EXPECT_FALSE(c_->find_block(only_via_data).ok());
  EXPECT_FALSE(c_->find_block(only_via_big_data).ok());
  EXPECT_FALSE(c_->find_block(unreachable_data).ok());
  EXPECT_TRUE(c_->check().problems.empty());
}

// Escaping pointers are looked for in object blocks only: the same words in
// a reachable data block are values.
TEST_F(ReachTest, CheckDoesNotScanDataBlocks) {
  int on_stack = 0;
  auto* on_heap = new int(5);
  auto** root = static_cast<void**>(*c_->alloc(16));
  c_->will_write(root, 16);
  root[1] = nullptr;
  for (AllocKind k : {AllocKind::kData, AllocKind::kObject}) {
    for (uint64_t n : {uint64_t{64}, uint64_t{40000}}) {
      auto** block = static_cast<void**>(*c_->alloc(n, k));
      c_->will_write(block, n);
      std::memset(block, 0, n);
      block[0] = on_heap;
      block[n / 8 - 1] = &on_stack;
      c_->will_write(root, 16);
      root[0] = block;
      ASSERT_TRUE(c_->set_root(root).ok());
      CheckReport r = c_->check();
      EXPECT_EQ(r.reachable_blocks, 2u);
      EXPECT_EQ(r.escaping.size(), k == AllocKind::kData ? 0u : 2u) << n;
    }
  }
  delete on_heap;
}

// What `pm kv load` of the value "abcdeU" left in a store: the value's bytes
// and its padding read as 0x556564636261, an address in the range where
// PIE programs' heaps are (which pm check counts for files written by other
// processes). In a data block it is a value.
TEST_F(ReachTest, ValueThatLooksLikeAHeapAddressInADataBlockIsNotReported) {
  auto** root = static_cast<void**>(*c_->alloc(8));
  for (AllocKind k : {AllocKind::kObject, AllocKind::kData}) {
    auto* entry = static_cast<char*>(*c_->alloc(40, k));
    c_->will_write(entry, 40);
    std::memset(entry, 0, 40);
    std::memcpy(entry + 24, "12345678abcdeU", 14);  // key, then value, then padding
    uint64_t word;
    std::memcpy(&word, entry + 32, 8);
    ASSERT_EQ(word, 0x556564636261ull);
    c_->will_write(root, 8);
    *root = entry;
    ASSERT_TRUE(c_->set_root(root).ok());
    CheckReport r = c_->check(/*foreign_writer=*/true);
    EXPECT_TRUE(r.problems.empty());
    if (k == AllocKind::kObject) {
      ASSERT_EQ(r.escaping.size(), 1u);
      EXPECT_EQ(r.escaping[0].target, 0x556564636261ull);
    } else {
      EXPECT_TRUE(r.escaping.empty()) << r.escaping[0].where;
    }
  }
}

TEST_F(ReachTest, DebugOptionAcceptsAddressLikeValuesInDataBlocks) {
  c_.reset();
  Options o;
  o.check_escapes_at_commit = true;
  c_ = std::move(*Container::open(dir_.file("r.pm"), o));
  int on_stack = 0;
  auto** values = static_cast<int**>(*c_->alloc(16, AllocKind::kData));
  c_->will_write(values, 16);
  values[0] = &on_stack;  // a real stack address, stored as a value
  values[1] = nullptr;
  ASSERT_TRUE(c_->set_root(values).ok());
  Status s = c_->commit();
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// A self-relative offset (offset_ptr) to an object 10 MiB below it is
// 0xffffffffff6.., which x86-64 Linux maps as [vsyscall]: it points into
// the container, not out of it.
TEST_F(ReachTest, OffsetPointersIntoTheContainerAreNotEscapes) {
  constexpr size_t kSize = 11 << 20;
  auto* block = static_cast<std::byte*>(*c_->alloc(kSize));
  c_->will_write(block, 8);
  std::memset(block, 0, 8);
  std::byte* word = block + 0xa00000 - 8;
  c_->will_write(word, 8);
  uint64_t v = reinterpret_cast<uintptr_t>(block) - reinterpret_cast<uintptr_t>(word);
  std::memcpy(word, &v, 8);
  ASSERT_EQ(v >> 24, 0xffffffffffull);
  ASSERT_TRUE(c_->set_root(block).ok());
  CheckReport r = c_->check(/*foreign_writer=*/true);
  EXPECT_TRUE(r.escaping.empty()) << r.escaping[0].where;
}

TEST_F(ReachTest, DebugOptionRefusesCommitsWithEscapingPointers) {
  c_.reset();
  Options o;
  o.check_escapes_at_commit = true;
  c_ = std::move(*Container::open(dir_.file("r.pm"), o));
  auto* on_heap = new int(5);
  Holder* h = *c_->make<Holder>(Holder{on_heap, 1, nullptr, nullptr});
  ASSERT_TRUE(c_->set_root(h).ok());
  Status s = c_->commit();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("offset 0"), std::string::npos) << s.message();
  c_->will_write(&h->heap_ptr, 8);
  h->heap_ptr = nullptr;
  EXPECT_TRUE(c_->commit().ok());
  delete on_heap;
}

}  // namespace
}  // namespace pm
