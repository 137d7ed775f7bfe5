#include "pm/container.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <setjmp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "libpm/container_impl.h"
#include "libpm/journal.h"
#include "libpm/planted_bugs.h"
#include "libpm/sync_point.h"
#include "libpm/superblock.h"
#include "testutil/child.h"
#include "testutil/container_util.h"
#include "testutil/small_fs.h"
#include "testutil/temp_dir.h"

namespace pm {
namespace {

struct Node {
  Node* next;
  uint64_t value;
};

using test::must;
using test::small;

// Writes through will_write so that the test means the same for all trackers.
template <typename T>
void put(Container& c, T* p, T v) {
  c.will_write(p, sizeof v);
  *p = v;
}

Node* push(Container& c, Node* head, uint64_t v) {
  Result<Node*> n = c.make<Node>(Node{head, v});
  EXPECT_TRUE(n.ok()) << n.status().to_string();
  return *n;
}

std::vector<uint64_t> values(Node* n) {
  std::vector<uint64_t> v;
  for (; n != nullptr; n = n->next) v.push_back(n->value);
  return v;
}

class ContainerTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
  std::string path_ = dir_.file("c.pm");
};

TEST_F(ContainerTest, CommittedLinkedListSurvivesReopenWithRawPointers) {
  {
    auto c = must(Container::create(path_, small()));
    Node* head = nullptr;
    for (uint64_t i = 0; i < 100; i++) head = push(*c, head, i);
    ASSERT_TRUE(c->set_root(head).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  std::vector<uint64_t> v = values(c->root<Node>());
  ASSERT_EQ(v.size(), 100u);
  EXPECT_EQ(v.front(), 99u);
  EXPECT_EQ(v.back(), 0u);
  EXPECT_TRUE(c->check().problems.empty());
}

// Fresh bytes (journal.h): a new block in space the committed heap did not
// use goes home once, without the journal; rewriting a committed block, or
// space freed in the same commit, goes through the journal as before.
TEST_F(ContainerTest, ANewBlockGoesHomeWithoutTheJournal) {
  constexpr uint64_t kBig = 1 << 20;
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->commit().ok());
    const ContainerInfo before = c->info();
    Result<void*> a = c->alloc(kBig);
    ASSERT_TRUE(a.ok());
    c->will_write(*a, kBig);
    std::memset(*a, 'a', kBig);
    ASSERT_TRUE(c->set_root(*a).ok());
    ASSERT_TRUE(c->commit().ok());
    const ContainerInfo fresh = c->info();
    EXPECT_GE(fresh.fresh_bytes - before.fresh_bytes, kBig);
    EXPECT_LT(fresh.journaled_bytes - before.journaled_bytes, 64u << 10);
    // Rewritten: committed bytes, so journaled.
    c->will_write(*a, kBig);
    std::memset(*a, 'b', kBig);
    ASSERT_TRUE(c->commit().ok());
    const ContainerInfo rewritten = c->info();
    EXPECT_EQ(rewritten.fresh_bytes, fresh.fresh_bytes);
    EXPECT_GE(rewritten.journaled_bytes - fresh.journaled_bytes, kBig);
    // Freed: its pages are not allocated again before the commit that
    // frees them (the committed heap still uses them: written over, they
    // would go through the journal), so a new block is fresh elsewhere...
    ASSERT_TRUE(c->free(*a).ok());
    Result<void*> b = c->alloc(kBig);
    ASSERT_TRUE(b.ok());
    EXPECT_NE(*b, *a);
    c->will_write(*b, kBig);
    std::memset(*b, 'c', kBig);
    ASSERT_TRUE(c->set_root(*b).ok());
    ASSERT_TRUE(c->commit().ok());
    const ContainerInfo elsewhere = c->info();
    EXPECT_GE(elsewhere.fresh_bytes - rewritten.fresh_bytes, kBig);
    EXPECT_LT(elsewhere.journaled_bytes - rewritten.journaled_bytes, 64u << 10);
    // ... and after it they are free in the committed state: fresh too.
    Result<void*> d = c->alloc(kBig);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, *a);
    c->will_write(*d, kBig);
    std::memset(*d, 'd', kBig);
    ASSERT_TRUE(c->set_root(*d, "d").ok());
    ASSERT_TRUE(c->commit().ok());
    const ContainerInfo reused = c->info();
    EXPECT_GE(reused.fresh_bytes - elsewhere.fresh_bytes, kBig);
    EXPECT_LT(reused.journaled_bytes - elsewhere.journaled_bytes, 64u << 10);
  }
  auto c = must(Container::open(path_));
  auto* p = c->root<char>();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::string(p, kBig), std::string(kBig, 'c'));
  auto* q = static_cast<char*>(c->root("d"));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(std::string(q, kBig), std::string(kBig, 'd'));
  EXPECT_TRUE(c->check().problems.empty());
}

// A user trial on a mount: after files were removed on a full disk, a file
// larger than any before it never went in. Its commit needed more journal
// room than the file had past the heap (what the largest commit so far
// left), and frees make heap space, not disk space. A new block needs no
// journal room now: it goes home before the commit point.
TEST_F(ContainerTest, OnAFullDiskANewBlockLargerThanAnyCommitSoFarGoesIn) {
  const std::string d = dir_.file("small");
  test::SmallFs fs(d);
  if (!fs.ok()) GTEST_SKIP() << "mount(2) of a tmpfs is not allowed here";
  const std::string path = d + "/c.pm";
  constexpr uint64_t kBlock = 64 << 10, kBig = 2 << 20;
  std::vector<void*> blocks;
  {
    auto c = must(Container::create(path, small()));
    ASSERT_NE(c, nullptr);
    Status full;
    while (full.ok()) {  // a commit per block, until the disk is full
      Result<void*> p = c->alloc(kBlock);
      if (!p.ok()) {
        full = p.status();
        break;
      }
      c->will_write(*p, kBlock);
      std::memset(*p, 'x', kBlock);
      full = c->commit();
      if (full.ok()) blocks.push_back(*p);
    }
    ASSERT_EQ(full.code(), Code::kNoSpace) << full.to_string();
    ASSERT_GT(blocks.size(), 40u);
    ASSERT_TRUE(c->abort().ok());
    while (blocks.size() > 5) {
      ASSERT_TRUE(c->free(blocks.back()).ok());
      blocks.pop_back();
    }
    ASSERT_TRUE(c->commit().ok());
    Result<void*> big = c->alloc(kBig);
    ASSERT_TRUE(big.ok()) << big.status().to_string();
    c->will_write(*big, kBig);
    std::memset(*big, 'B', kBig);
    ASSERT_TRUE(c->set_root(*big).ok());
    Status s = c->commit();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  auto c = must(Container::open(path));
  ASSERT_NE(c, nullptr);
  auto* p = c->root<char>();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::string(p, kBig), std::string(kBig, 'B'));
  for (void* b : blocks) EXPECT_EQ(static_cast<char*>(b)[kBlock - 1], 'x');
  EXPECT_TRUE(c->check().problems.empty());
}

// shrink() gives a page run's pages past the size it keeps back to the heap
// (allocated again after the commit), keeps its first bytes, and leaves
// small blocks as they are; the heap stays consistent across a reopen.
TEST_F(ContainerTest, ShrinkGivesATailOfPagesBackAfterTheCommit) {
  constexpr uint64_t kBig = 1 << 20;
  char* p = nullptr;
  {
    auto c = must(Container::create(path_, small()));
    Result<void*> a = c->alloc(kBig);
    ASSERT_TRUE(a.ok());
    p = static_cast<char*>(*a);
    c->will_write(p, kBig);
    std::memset(p, 's', kBig);
    ASSERT_TRUE(c->set_root(p).ok());
    ASSERT_TRUE(c->commit().ok());
    const uint64_t used = c->info().used_bytes;
    EXPECT_EQ(c->shrink(p + 8, 100).code(), Code::kInvalidArgument);
    ASSERT_TRUE(c->shrink(p, 100).ok());
    EXPECT_EQ(c->info().used_bytes, used - (kBig - 4096));
    Result<BlockInfo> bi = c->find_block(p);
    ASSERT_TRUE(bi.ok());
    EXPECT_EQ(bi->size, 4096u);
    EXPECT_FALSE(c->find_block(p + 4096).ok());
    Result<void*> small_block = c->alloc(64);
    ASSERT_TRUE(small_block.ok());
    EXPECT_TRUE(c->shrink(*small_block, 8).ok());  // left as it is
    EXPECT_EQ(c->find_block(*small_block)->size, 64u);
    ASSERT_TRUE(c->commit().ok());
    Result<void*> tail = c->alloc(kBig - 4096);  // the pages given back
    ASSERT_TRUE(tail.ok());
    EXPECT_EQ(*tail, p + 4096);
    EXPECT_TRUE(c->check().problems.empty());
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  EXPECT_EQ(c->root<char>(), p);
  // The first 100 bytes kept; the rest of the page zeroed (an object's
  // stale bytes would read as pointers to collect()).
  EXPECT_TRUE(std::string(p, 100) == std::string(100, 's'));
  EXPECT_TRUE(std::string(p + 100, 4096 - 100) == std::string(4096 - 100, '\0'));
  EXPECT_TRUE(c->check().problems.empty());
}

TEST_F(ContainerTest, RawRegionIsWrittenDirectlyAndIgnoredByCommitAndAbort) {
  Options o = small();
  o.raw_bytes = 10000;  // rounds up to 12 KiB
  std::vector<char> a(300, 'a'), got(300);
  {
    auto c = must(Container::create(path_, o));
    ASSERT_EQ(c->raw().size(), 12288u);
    Node* head = push(*c, nullptr, 5);
    ASSERT_TRUE(c->set_root(head).ok());
    ASSERT_TRUE(c->commit().ok());
    ASSERT_TRUE(c->raw().write(12288 - 300, a.data(), a.size()).ok());
    ASSERT_TRUE(c->raw().persist(12288 - 300, 300).ok());
    ASSERT_TRUE(c->abort().ok());  // not journaled: abort leaves it
    ASSERT_TRUE(c->raw().read(12288 - 300, got.data(), got.size()).ok());
    EXPECT_EQ(got, a);
    // Out of range: a clear error, nothing written.
    Status s = c->raw().write(12288 - 10, a.data(), 11);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("raw region"), std::string::npos) << s.to_string();
    EXPECT_FALSE(c->raw().read(1ull << 62, got.data(), 1).ok());
    // Growth remaps the home view; the raw region stays readable.
    ASSERT_TRUE(c->reserve(64 << 20).ok());
    ASSERT_TRUE(c->alloc(32 << 20).ok());
    ASSERT_TRUE(c->commit().ok());
    ASSERT_TRUE(c->raw().read(12288 - 300, got.data(), got.size()).ok());
    EXPECT_EQ(got, a);
  }
  auto c = must(Container::open(path_));
  ASSERT_TRUE(c != nullptr);
  EXPECT_EQ(c->info().raw_bytes, 12288u);
  EXPECT_EQ(values(c->root<Node>()), std::vector<uint64_t>{5});
  ASSERT_TRUE(c->raw().read(12288 - 300, got.data(), got.size()).ok());
  EXPECT_EQ(got, a);
  EXPECT_TRUE(c->check().problems.empty());
}

// Raw-region writers keep going while commits grow the file (a larger journal,
// a larger heap): both remap the home view, so they must exclude raw access.
TEST_F(ContainerTest, RawWritesRunWhileCommitsGrowTheFile) {
  Options o = small();
  o.raw_bytes = 64 << 10;
  auto c = must(Container::create(path_, o));
  ASSERT_TRUE(c != nullptr);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread writer([&] {
    std::vector<char> v(4096), got(4096);
    for (uint64_t i = 0; !done.load(); i++) {
      std::fill(v.begin(), v.end(), static_cast<char>(i));
      const uint64_t off = (i % 16) * 4096;
      if (!c->raw().write(off, v.data(), v.size()).ok() || !c->raw().persist(off, v.size()).ok() ||
          !c->raw().read(off, got.data(), got.size()).ok() || got != v) {
        bad++;
      }
    }
  });
  for (int round = 0; round < 12; round++) {
    Result<void*> p = c->alloc((1u << 20) << (round % 4));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    c->will_write(*p, 1 << 20);
    std::memset(*p, round + 1, 1 << 20);  // a journal of 1 MiB or more
    ASSERT_TRUE(c->commit().ok());
  }
  done = true;
  writer.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(ContainerTest, UncommittedChangesVanishOnClose) {
  {
    auto c = must(Container::create(path_, small()));
    Node* head = push(*c, nullptr, 1);
    ASSERT_TRUE(c->set_root(head).ok());
    ASSERT_TRUE(c->commit().ok());
    put(*c, &head->value, uint64_t{2});
    push(*c, head, 3);
  }
  auto c = must(Container::open(path_));
  EXPECT_EQ(values(c->root<Node>()), std::vector<uint64_t>{1});
  EXPECT_EQ(c->info().blocks, 1u);
}

TEST_F(ContainerTest, AbortRestoresLastCommitIncludingAllocations) {
  auto c = must(Container::create(path_, small()));
  Node* head = push(*c, nullptr, 1);
  ASSERT_TRUE(c->set_root(head).ok());
  ASSERT_TRUE(c->commit().ok());
  ContainerInfo before = c->info();
  put(*c, &head->value, uint64_t{7});
  Node* second = push(*c, head, 8);
  ASSERT_TRUE(c->set_root(second).ok());
  ASSERT_TRUE(c->abort().ok());
  EXPECT_EQ(c->root<Node>(), head);
  EXPECT_EQ(head->value, 1u);
  EXPECT_EQ(c->info().blocks, before.blocks);
  EXPECT_EQ(c->info().used_bytes, before.used_bytes);
  EXPECT_TRUE(c->check().problems.empty());
  // The heap works after abort, and the aborted slot is free again.
  Node* again = push(*c, head, 9);
  EXPECT_EQ(again, second);
}

TEST_F(ContainerTest, LargeAllocationsGrowTheContainerAndCommit) {
  auto c = must(Container::create(path_, small()));
  std::vector<std::byte*> big;
  for (int i = 0; i < 6; i++) {
    Result<void*> p = c->alloc(size_t{24} << 20);  // 24 MiB each, initial heap 4 MiB
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto* b = static_cast<std::byte*>(*p);
    c->will_write(b, 64);
    std::memset(b, i + 1, 64);
    c->will_write(b + (24 << 20) - 64, 64);
    std::memset(b + (24 << 20) - 64, i + 1, 64);
    big.push_back(b);
  }
  ASSERT_TRUE(c->set_root(big[5]).ok());
  ASSERT_TRUE(c->commit().ok());
  EXPECT_GE(c->info().heap_bytes, uint64_t{144} << 20);
  c.reset();
  c = must(Container::open(path_));
  auto* b = c->root<std::byte>();
  EXPECT_EQ(b, big[5]);
  EXPECT_EQ(b[0], std::byte{6});
  EXPECT_EQ(b[(24 << 20) - 1], std::byte{6});
  EXPECT_TRUE(c->check().problems.empty());
}

TEST_F(ContainerTest, AbortAfterGrowthKeepsTheHeapUsable) {
  auto c = must(Container::create(path_, small()));
  ASSERT_TRUE(c->commit().ok());
  uint64_t heap = c->info().heap_bytes;
  ASSERT_TRUE(c->alloc(size_t{32} << 20).ok());
  EXPECT_GT(c->info().heap_bytes, heap);
  ASSERT_TRUE(c->abort().ok());
  EXPECT_EQ(c->info().heap_bytes, heap);
  Result<void*> p = c->alloc(size_t{40} << 20);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  c->will_write(*p, 8);
  std::memset(*p, 0x5a, 8);
  ASSERT_TRUE(c->set_root(*p).ok());
  ASSERT_TRUE(c->commit().ok());
  c.reset();
  c = must(Container::open(path_));
  EXPECT_EQ(*c->root<uint8_t>(), 0x5a);
  EXPECT_TRUE(c->check().problems.empty());
}

// A file that cannot grow (here: a file-size limit, EFBIG) fails the
// growth with kNoSpace; the commits after it must still work: a failed
// resize once left the file shorter than its mapping, and the next
// journal write died of SIGBUS.
TEST_F(ContainerTest, CommitsAfterAFailedGrowthStillWork) {
  const int code = test::exit_code_in_child([this] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{24u << 20, 24u << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    auto c = Container::create(path_, small());
    if (!c.ok()) return 2;
    std::vector<void*> blocks;
    Status s;
    for (int i = 0; i < 40 && s.ok(); i++) {
      Result<void*> p = (*c)->alloc(size_t{1} << 20, AllocKind::kData);
      if (p.ok()) {
        (*c)->will_write(*p, size_t{1} << 20);
        std::memset(*p, i + 1, size_t{1} << 20);
        blocks.push_back(*p);
        if (!(s = (*c)->set_root(*p)).ok()) break;
        s = (*c)->commit();
      } else {
        s = p.status();
      }
    }
    if (s.code() != Code::kNoSpace) return 3;
    (void)(*c)->abort();
    // Small commits, whose journal lands past the last good size.
    for (int i = 0; i < 8; i++) {
      auto* b = static_cast<std::byte*>(blocks[static_cast<size_t>(i)]);
      (*c)->will_write(b, 4096);
      std::memset(b, 0x77, 4096);
      if (!(*c)->set_root(b).ok() || !(*c)->commit().ok()) return 4;
    }
    return 0;
  });
  ASSERT_EQ(code, 0) << "the step that went wrong (above 128: a signal)";
  auto c = must(Container::open(path_));
  EXPECT_EQ(*c->root<uint8_t>(), 0x77);
  EXPECT_TRUE(c->check().problems.empty());
}

// A file size limit (ulimit -f) is a full disk, not SIGXFSZ: the create
// or growth that would pass it fails with kNoSpace, naming the limit, and
// the process lives (here with SIGXFSZ's default action, which kills).
TEST_F(ContainerTest, AFileSizeLimitIsAFullDiskNotASignal) {
  const int code = test::exit_code_in_child([this] {
    rlimit lim{8u << 20, RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 2;
    Options big = small();
    big.initial_size = 16u << 20;
    Result<std::unique_ptr<Container>> refused = Container::create(path_, big);
    if (refused.status().code() != Code::kNoSpace) return 3;
    if (refused.status().message().find("ulimit -f") == std::string::npos) return 4;
    if (std::ifstream(path_).good() || std::ifstream(dir_.file(".c.pm.creating")).good()) return 5;
    auto c = Container::create(path_, small());
    if (!c.ok()) return 6;
    Result<void*> p = (*c)->alloc(size_t{16} << 20, AllocKind::kData);
    if (p.status().code() != Code::kNoSpace) return 7;
    Result<void*> q = (*c)->alloc(4096);
    if (!q.ok() || !(*c)->set_root(*q).ok() || !(*c)->commit().ok()) return 8;
    return 0;
  });
  ASSERT_EQ(code, 0) << "the step that went wrong (above 128: a signal)";
}

// The container keeps to its own file whatever becomes of its path: growth
// of one whose path was renamed over by another container goes into its
// own file (it used to reopen the path: the other file was cut short and
// overwritten, and the first one's commits were lost), and one whose path
// was removed still grows.
TEST_F(ContainerTest, AContainerWhosePathIsReplacedKeepsToItsOwnFile) {
  const std::string moved = dir_.file("moved.pm");
  auto a = must(Container::create(path_, small()));
  ASSERT_EQ(::rename(path_.c_str(), moved.c_str()), 0);
  {
    auto b = must(Container::create(path_, small()));
    Result<void*> p = b->alloc(sizeof(uint64_t));
    ASSERT_TRUE(p.ok());
    auto* v = static_cast<uint64_t*>(*p);
    put(*b, v, uint64_t{42});
    ASSERT_TRUE(b->set_root(v).ok());
    ASSERT_TRUE(b->commit().ok());
  }
  const size_t big = size_t{24} << 20;  // past the initial heap: a growth
  Result<void*> p = a->alloc(big, AllocKind::kData);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto* blob = static_cast<std::byte*>(*p);
  a->will_write(blob, big);
  std::memset(blob, 0x5a, big);
  ASSERT_TRUE(a->set_root(blob).ok());
  ASSERT_TRUE(a->commit().ok());
  a.reset();
  {
    auto b = must(Container::open(path_));
    EXPECT_EQ(*b->root<uint64_t>(), 42u);
    EXPECT_TRUE(b->check().problems.empty());
  }
  a = must(Container::open(moved));
  auto* r = a->root<std::byte>();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r[0], std::byte{0x5a});
  EXPECT_EQ(r[big - 1], std::byte{0x5a});
  // Removed: growth still works, on the unlinked file.
  ASSERT_EQ(::unlink(moved.c_str()), 0);
  EXPECT_TRUE(a->alloc(big, AllocKind::kData).ok());
  EXPECT_TRUE(a->commit().ok());
}

// In a child with its own mount namespace and a 16 MiB tmpfs: fill the
// disk with another file, allocate until growth fails, remove the other
// file, allocate again with no commit between. Exit codes: 0 good, 77 no
// tmpfs to be had (not root), else the step that went wrong.
std::string g_filler;  // removed by free_at_failed_growth
void free_at_failed_growth(const char* name, sync_point::Kind) {
  if (std::strcmp(name, "container.grow.no_room") == 0) ::unlink(g_filler.c_str());
}

// `racing`: the other file goes just after the growth failed, before the
// container notes the free space (the hook), as when another process
// removes it meanwhile.
int grow_after_the_disk_is_freed(bool racing) {
  const std::string dir = test::private_small_tmpfs();
  if (dir.empty()) return 77;
  auto c = Container::create(dir + "/c.pm", small());
  if (!c.ok()) return 2;
  const std::string filler = dir + "/filler";
  test::fill_file_system(filler);
  g_filler = filler;
  if (racing) sync_point::g_hook = free_at_failed_growth;
  Status s;
  for (int i = 0; i < 64 && s.ok(); i++) s = (*c)->alloc(size_t{1} << 20, AllocKind::kData).status();
  sync_point::g_hook = nullptr;
  if (s.code() != Code::kNoSpace) return 3;
  if (!racing) {
    if ((*c)->alloc(size_t{1} << 20, AllocKind::kData).ok()) return 4;
    ::unlink(filler.c_str());
  }
  if (!(*c)->alloc(size_t{1} << 20, AllocKind::kData).ok()) return 5;
  return 0;
}

void expect_growth_after_freeing(bool racing) {
  const int code =
      test::exit_code_in_child([racing] { return grow_after_the_disk_is_freed(racing); });
  if (code == 77) GTEST_SKIP() << "no private tmpfs here (needs root)";
  EXPECT_EQ(code, 0) << "the step that went wrong (above 128: a signal)";
}

// Space freed on the disk lets the heap grow at once. A growth that found
// no room is not retried until a commit or until the file system has more
// room; with only the commit, a store whose gleaner waited for room never
// committed again, and its puts failed with kNoSpace after the other file
// was gone (seen in CI under TSan).
TEST_F(ContainerTest, GrowthWorksAgainOnceTheDiskHasRoomWithoutACommit) {
  expect_growth_after_freeing(false);
}

// The same when the space is freed while the failed growth is under way:
// the free space it compares with is read before the attempt (read after
// it, it already counted the freed space, and every later growth was
// refused until a commit: the store's full-disk test failed now and then).
TEST_F(ContainerTest, GrowthWorksAgainWhenTheDiskIsFreedDuringAFailedGrowth) {
  expect_growth_after_freeing(true);
}

TEST_F(ContainerTest, FreeRejectsPointersThatAreNotBlockStarts) {
  auto c = must(Container::create(path_, small()));
  auto* p = static_cast<char*>(*c->alloc(100));
  EXPECT_EQ(c->free(p + 8).code(), Code::kInvalidArgument);
  int local = 0;
  EXPECT_EQ(c->free(&local).code(), Code::kInvalidArgument);
  EXPECT_TRUE(c->free(p).ok());
  EXPECT_EQ(c->free(p).code(), Code::kInvalidArgument);  // double free
  EXPECT_TRUE(c->free(nullptr).ok());
  auto* big = static_cast<char*>(*c->alloc(1 << 20));
  EXPECT_EQ(c->free(big + 4096).code(), Code::kInvalidArgument);
  EXPECT_TRUE(c->free(big).ok());
  EXPECT_TRUE(c->check().problems.empty());
}

TEST_F(ContainerTest, FindBlockAnswersForInteriorPointers) {
  auto c = must(Container::create(path_, small()));
  auto* s = static_cast<char*>(*c->alloc(100));
  auto* l = static_cast<char*>(*c->alloc(100000));
  Result<BlockInfo> b = c->find_block(s + 50);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->start, s);
  EXPECT_GE(b->size, 100u);
  b = c->find_block(l + 99999);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->start, l);
  EXPECT_GE(b->size, 100000u);
  ASSERT_TRUE(c->free(s).ok());
  EXPECT_TRUE(c->find_block(s).status().is_not_found());
  int local;
  EXPECT_TRUE(c->find_block(&local).status().is_not_found());
}

TEST_F(ContainerTest, NamedRootsPersistAndHaveLimits) {
  {
    auto c = must(Container::create(path_, small()));
    for (int i = 0; i < 32; i++) {
      void* p = *c->alloc(8);
      ASSERT_TRUE(c->set_root(p, "root" + std::to_string(i)).ok());
    }
    EXPECT_EQ(c->set_root(*c->alloc(8), "one-too-many").code(), Code::kNoSpace);
    EXPECT_EQ(c->set_root(nullptr, std::string(48, 'x')).code(), Code::kInvalidArgument);
    int local;
    EXPECT_EQ(c->set_root(&local, "stack").code(), Code::kInvalidArgument);
    ASSERT_TRUE(c->set_root(nullptr, "root3").ok());
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  EXPECT_NE(c->root("root0"), nullptr);
  EXPECT_EQ(c->root("root3"), nullptr);
  EXPECT_NE(c->root("root31"), nullptr);
  EXPECT_EQ(c->root("missing"), nullptr);
  EXPECT_EQ(c->root(), nullptr);
}

TEST_F(ContainerTest, SecondOpenIsRefusedWhileOpen) {
  auto c = must(Container::create(path_, small()));
  Result<std::unique_ptr<Container>> again = Container::open(path_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kBusy);
  EXPECT_NE(again.status().message().find("locked by"), std::string::npos)
      << again.status().message();
  // The path is named once: "open P: locked by ...".
  const std::string m = again.status().message();
  EXPECT_EQ(m.find(path_), m.rfind(path_)) << m;
  EXPECT_EQ(Container::remove(path_).code(), Code::kBusy);
}

TEST(StatusTest, ContextNamesEachThingOnce) {
  const Status s = Status::busy("/d/f: locked by pid 7");
  EXPECT_EQ(s.with_context("open /d/f").message(), "open /d/f: locked by pid 7");
  EXPECT_EQ(s.with_context("open /d/f").with_context("open /d/f").message(),
            "open /d/f: locked by pid 7");
  EXPECT_EQ(s.with_context("load").message(), "load: /d/f: locked by pid 7");
  EXPECT_EQ(Status::io_error("x").with_context("open /d/g").message(), "open /d/g: x");
}

TEST_F(ContainerTest, LockHolderIsNamedAcrossProcesses) {
  auto c = must(Container::create(path_, small()));
  c.reset();
  int to_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  pid_t pid = fork();
  if (pid == 0) {
    auto cc = Container::open(path_);
    char b = cc.ok() ? 'y' : 'n';
    (void)!write(to_child[1], &b, 1);
    pause();
    _exit(0);
  }
  char b;
  ASSERT_EQ(read(to_child[0], &b, 1), 1);
  ASSERT_EQ(b, 'y');
  Result<std::unique_ptr<Container>> again = Container::open(path_);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("pid " + std::to_string(pid)), std::string::npos)
      << again.status().message();
  EXPECT_TRUE(Container::open(path_).ok());  // the lock died with the process
}

// A child after fork() shared the lock's open file description, so a
// parent that closed its container and opened it again found it locked
// by the child (Python's multiprocessing with a database open).
TEST_F(ContainerTest, AForkedChildDoesNotKeepTheParentsLock) {
  auto c = must(Container::create(path_, small()));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char b;
  ASSERT_EQ(read(ready[0], &b, 1), 1);
  c.reset();
  Result<std::unique_ptr<Container>> again = Container::open(path_);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

// A child after fork() shares its parent's mapping of the file: its commits,
// raw writes, growth and close would go under the parent's commits (a user
// trial: a forked child writing through its parent's SQLite connection
// left the parent's database malformed). They are refused, and the parent
// goes on as if the child had never been.
TEST_F(ContainerTest, AForkedChildCannotChangeItsParentsContainer) {
  Options o = small();
  o.raw_bytes = 4096;
  auto c = must(Container::create(path_, o));
  auto* v = static_cast<uint64_t*>(*c->alloc(sizeof(uint64_t)));
  put(*c, v, uint64_t{1});
  ASSERT_TRUE(c->set_root(v).ok());
  ASSERT_TRUE(c->commit().ok());
  Container* shared = c.get();
  const int code = test::exit_code_in_child([&] {
    put(*shared, v, uint64_t{2});
    if (shared->commit().code() != Code::kInvalidArgument) return 2;
    if (shared->commit().message().find("fork()") == std::string::npos) return 3;
    if (shared->alloc(size_t{64} << 20).ok()) return 4;  // would grow the file
    const char x = 'x';
    if (shared->raw().write(0, &x, 1).ok() || shared->raw().persist(0, 1).ok()) return 5;
    c.reset();  // the close leaves the parent's journal header alone
    return 0;
  });
  ASSERT_EQ(code, 0) << "the step that went wrong";
  EXPECT_EQ(*v, 1u);
  put(*c, v, uint64_t{3});
  ASSERT_TRUE(c->commit().ok());
  c.reset();
  c = must(Container::open(path_));
  EXPECT_EQ(*c->root<uint64_t>(), 3u);
  EXPECT_TRUE(c->check().problems.empty());
}

TEST_F(ContainerTest, OpenAndCreateReportMisuse) {
  EXPECT_EQ(Container::open(path_).status().code(), Code::kNotFound);
  auto c = must(Container::create(path_, small()));
  c.reset();
  EXPECT_EQ(Container::create(path_, small()).status().code(), Code::kInvalidArgument);
  Options bad = small();
  bad.max_size = 3 << 20;
  EXPECT_EQ(Container::create(dir_.file("bad.pm"), bad).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(std::ifstream(dir_.file("bad.pm")).good()) << "failed create left a file";
  Options o;
  o.create_if_missing = true;
  EXPECT_TRUE(Container::open(dir_.file("new.pm"), o).ok());
  // A missing directory is named, not the hidden temporary of the create.
  Status nodir = Container::create(dir_.file("no/such/dir/x.pm"), small()).status();
  EXPECT_EQ(nodir.code(), Code::kNotFound);
  EXPECT_NE(nodir.message().find("no directory"), std::string::npos) << nodir.to_string();
  EXPECT_EQ(nodir.message().find(".creating"), std::string::npos) << nodir.to_string();
}

TEST_F(ContainerTest, NewFilesAreCreatedPrivate) {
  auto c = must(Container::create(path_, small()));
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Options::file_mode is open(2)'s mode: the umask still applies.
TEST_F(ContainerTest, FileModeIsTheNewFilesPermissionsLessTheUmask) {
  Options o = small();
  o.file_mode = 0666;
  const mode_t old = umask(027);
  auto c = Container::create(path_, o);
  umask(old);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  o.file_mode = 010000;
  EXPECT_EQ(Container::create(dir_.file("bad.pm"), o).status().code(), Code::kInvalidArgument);
  o.file_mode = 0444;  // the owner could not write it
  EXPECT_EQ(Container::create(dir_.file("bad.pm"), o).status().code(), Code::kInvalidArgument);
}

TEST_F(ContainerTest, LayoutIsCheckedAtOpen) {
  Options o = small();
  o.layout = "linked-list-v1";
  must(Container::create(path_, o));
  Options other;
  other.layout = "hash-v2";
  Result<std::unique_ptr<Container>> r = Container::open(path_, other);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("linked-list-v1"), std::string::npos);
  other.layout = "linked-list-v1";
  EXPECT_TRUE(Container::open(path_, other).ok());
}

TEST_F(ContainerTest, SeveralContainersInOneProcess) {
  auto a = must(Container::create(dir_.file("a.pm"), small()));
  auto b = must(Container::create(dir_.file("b.pm"), small()));
  Node* na = push(*a, nullptr, 1);
  Node* nb = push(*b, nullptr, 2);
  EXPECT_TRUE(a->contains(na));
  EXPECT_FALSE(a->contains(nb));
  EXPECT_EQ(Container::owner_of(na), a.get());
  EXPECT_EQ(Container::owner_of(&nb->value), b.get());
  int local = 0;
  EXPECT_EQ(Container::owner_of(&local), nullptr);
  ASSERT_TRUE(a->set_root(na).ok());
  ASSERT_TRUE(b->set_root(nb).ok());
  ASSERT_TRUE(a->commit().ok());
  ASSERT_TRUE(b->abort().ok());
  a.reset();
  b.reset();
  a = must(Container::open(dir_.file("a.pm")));
  b = must(Container::open(dir_.file("b.pm")));
  EXPECT_EQ(a->root<Node>()->value, 1u);
  EXPECT_EQ(b->root<Node>(), nullptr);
}

TEST_F(ContainerTest, AddressInUseIsAClearError) {
  auto a = must(Container::create(dir_.file("a.pm"), small()));
  Options o = small();
  o.base_address = a->info().base_address;
  Result<std::unique_ptr<Container>> r = Container::create(dir_.file("b.pm"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kBusy);
  EXPECT_NE(r.status().message().find("already in use"), std::string::npos);
  o.base_address = 0xffff800000000000ull;  // kernel space: no process maps there
  r = Container::create(dir_.file("c.pm"), o);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().to_string();
}

TEST_F(ContainerTest, UntrackedWritesAreCommittedByFaultingTrackers) {
  if (test::hints_only()) GTEST_SKIP() << "the hints tracker commits announced ranges only";
  {
    auto c = must(Container::create(path_, small()));
    auto* p = static_cast<uint64_t*>(*c->alloc(1 << 16));
    ASSERT_TRUE(c->set_root(p).ok());
    ASSERT_TRUE(c->commit().ok());
    for (int i = 0; i < 8192; i += 512) p[i] = static_cast<uint64_t>(i) + 1;  // no hints
    ASSERT_TRUE(c->commit().ok());
    p[0] = 77;  // uncommitted
  }
  auto c = must(Container::open(path_));
  auto* p = c->root<uint64_t>();
  EXPECT_EQ(p[0], 1u);
  EXPECT_EQ(p[512], 513u);
  EXPECT_EQ(p[8192 - 512], 8192u - 512 + 1);
}

TEST_F(ContainerTest, SystemCallsCanWriteIntoAnnouncedRanges) {
  auto c = must(Container::create(path_, small()));
  auto* buf = static_cast<char*>(*c->alloc(4096));
  int fd = ::open("/proc/self/cmdline", O_RDONLY);
  c->will_write(buf, 4096);
  ssize_t n = ::read(fd, buf, 4096);
  ::close(fd);
  EXPECT_GT(n, 0) << strerror(errno);
}

// The fault router serves container pages and passes every other SIGSEGV
// to the handler that was installed before it. In a child: handlers are
// process-wide.
sigjmp_buf g_jump;
void test_segv_handler(int) { siglongjmp(g_jump, 1); }

// What the default options promise (container.h): with the uffd tracker a
// system call may write into container memory, here read(2) into a freshly
// allocated 100 kB block of a 64 MiB container, and the commit keeps it.
TEST_F(ContainerTest, ReadSystemCallIntoContainerMemoryWorksUnderTheDefaultTracker) {
  const std::string t = test::test_tracker();
  if ((t != "uffd" && t != "auto") || std::getenv("PM_UFFD_CHUNK_MIN_MB") != nullptr) {
    GTEST_SKIP() << "the uffd tracker without chunk mode only";
  }
  auto c = must(Container::create(path_, Options()));  // 64 MiB heap, tracker auto
  if (c->info().tracker != "uffd") GTEST_SKIP() << "this kernel has no uffd tracker";
  constexpr size_t kBytes = 100'000;
  char* p = static_cast<char*>(*c->alloc(kBytes, AllocKind::kData));
  std::string src = path_ + ".src";
  {
    std::string data(kBytes, 'r');
    FILE* f = std::fopen(src.c_str(), "w");
    ASSERT_EQ(std::fwrite(data.data(), 1, kBytes, f), kBytes);
    std::fclose(f);
  }
  int fd = ::open(src.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::read(fd, p, kBytes), static_cast<ssize_t>(kBytes)) << std::strerror(errno);
  ::close(fd);
  ::unlink(src.c_str());
  ASSERT_TRUE(c->set_root(p).ok());
  ASSERT_TRUE(c->commit().ok());
  c.reset();
  auto again = must(Container::open(path_));
  const char* q = static_cast<const char*>(again->root());
  EXPECT_EQ(std::string(q, kBytes), std::string(kBytes, 'r'));
}

TEST_F(ContainerTest, ForeignSegfaultsReachThePreviousHandler) {
  if (test::hints_only()) GTEST_SKIP() << "the hints tracker installs no handler";
  const int code = test::exit_code_in_child([this] {
    struct sigaction sa {};
    sa.sa_handler = test_segv_handler;
    sigaction(SIGSEGV, &sa, nullptr);
    Options o = small();
    o.tracker = test::test_tracker() == "mprotect" ? TrackerKind::kMprotect : TrackerKind::kUffd;
    setenv("PM_UFFD_CHUNK_MIN_MB", "0", 1);  // uffd: fault-based chunk level on
    auto c = Container::create(path_, o);
    if (!c.ok()) return 2;
    auto* p = static_cast<uint64_t*>(*(*c)->alloc(64));
    *p = 7;  // a tracked fault: served by the router, no jump
    void* guard = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sigsetjmp(g_jump, 1) == 0) {
      *static_cast<volatile char*>(guard) = 1;  // foreign fault
      return 3;  // not chained
    }
    return (*c)->commit().ok() && *p == 7 ? 0 : 4;
  });
  EXPECT_EQ(code, 0) << "the step that went wrong (above 128: a signal)";
}

TEST_F(ContainerTest, CommitWhileHoldingAGuardIsRefused) {
  auto c = must(Container::create(path_, small()));
  MutationGuard g(*c);
  EXPECT_EQ(c->commit().code(), Code::kBusy);
  EXPECT_EQ(c->abort().code(), Code::kBusy);
}

// Mutators move units between counters under a guard; a committer commits
// concurrently. The sum is invariant in every committed state.
TEST_F(ContainerTest, ConcurrentMutatorsAndCommitsKeepInvariants) {
  constexpr int kSlots = 64;
  {
    auto c = must(Container::create(path_, small()));
    auto* slots = static_cast<int64_t*>(*c->alloc(kSlots * sizeof(int64_t)));
    c->will_write(slots, kSlots * sizeof(int64_t));
    for (int i = 0; i < kSlots; i++) slots[i] = 1000;
    ASSERT_TRUE(c->set_root(slots).ok());
    ASSERT_TRUE(c->commit().ok());
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++) {
      ts.emplace_back([&, t] {
        std::mt19937 rng(t);
        while (!stop.load()) {
          MutationGuard g(*c);
          int a = static_cast<int>(rng() % kSlots), b = static_cast<int>(rng() % kSlots);
          c->will_write(&slots[a], 8);
          c->will_write(&slots[b], 8);
          // Atomic RMW: several mutators share the slots.
          __atomic_fetch_sub(&slots[a], 1, __ATOMIC_RELAXED);
          __atomic_fetch_add(&slots[b], 1, __ATOMIC_RELAXED);
          void* junk = *c->alloc(16 + rng() % 200);
          (void)c->free(junk);
        }
      });
    }
    for (int i = 0; i < 200; i++) ASSERT_TRUE(c->commit().ok());
    stop = true;
    for (auto& t : ts) t.join();
    ASSERT_TRUE(c->commit().ok());
    EXPECT_TRUE(c->check().problems.empty());
  }
  auto c = must(Container::open(path_));
  auto* slots = c->root<int64_t>();
  int64_t sum = 0;
  for (int i = 0; i < kSlots; i++) sum += slots[i];
  EXPECT_EQ(sum, 1000 * kSlots);
  EXPECT_TRUE(c->check().problems.empty());
}

TEST_F(ContainerTest, ReleaseCleanDropsDramButKeepsData) {
  auto c = must(Container::create(path_, small()));
  auto* p = static_cast<char*>(*c->alloc(1 << 20));
  c->will_write(p, 1 << 20);
  std::memset(p, 'x', 1 << 20);
  ASSERT_TRUE(c->set_root(p).ok());
  ASSERT_TRUE(c->commit().ok());
  EXPECT_GE(c->usage().private_bytes, uint64_t{1} << 20);  // the committed copies
  put(*c, p, 'y');  // dirty again: must survive release_clean
  ASSERT_TRUE(c->release_clean().ok());
  EXPECT_EQ(c->usage().private_bytes, 0u);
  EXPECT_EQ(p[0], 'y');
  EXPECT_EQ(p[(1 << 20) - 1], 'x');
  ASSERT_TRUE(c->commit().ok());
  c.reset();
  c = must(Container::open(path_));
  EXPECT_EQ(c->root<char>()[0], 'y');
}

// A program started with stdin, stdout and stderr closed: the container's
// descriptors must not take their numbers, or its printf() would write into
// the file (pm kv get with stdout closed wrote the value over the
// superblock).
TEST_F(ContainerTest, AContainerNeverTakesTheStandardDescriptors) {
  { auto c = must(Container::create(path_, small())); }
  pid_t pid = fork();
  if (pid == 0) {
    for (int fd = 0; fd < 3; fd++) ::close(fd);
    Options ro;
    ro.read_only = true;
    for (const Options& o : {Options(), ro}) {
      Result<std::unique_ptr<Container>> c = Container::open(path_, o);
      if (!c.ok()) _exit(2);
      for (int fd = 0; fd < 3; fd++) {
        if (::fcntl(fd, F_GETFD) != -1) _exit(3 + fd);
      }
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: no open; 3-5: descriptor 0-2 taken";
}

TEST_F(ContainerTest, ReadCommittedSeesTheLastCommitNotTheWorkingView) {
  auto c = must(Container::create(path_, small()));
  auto* p = static_cast<char*>(*c->alloc(8192));
  c->will_write(p, 8192);
  std::memset(p, 'a', 8192);
  ASSERT_TRUE(c->set_root(p).ok());
  ASSERT_TRUE(c->commit().ok());
  put(*c, p + 4096, 'b');
  char got[2] = {};
  ASSERT_TRUE(c->read_committed(p + 4095, got, 2).ok());
  EXPECT_EQ(std::string(got, 2), "aa");  // the working view holds "ab"
  ASSERT_TRUE(c->abort().ok());
  put(*c, p + 4096, 'c');
  ASSERT_TRUE(c->commit().ok());
  ASSERT_TRUE(c->read_committed(p + 4095, got, 2).ok());
  EXPECT_EQ(std::string(got, 2), "ac");
  const uint64_t heap = c->info().heap_bytes;
  auto* base = static_cast<char*>(c->base());
  EXPECT_TRUE(c->read_committed(base + heap - 1, got, 1).ok());
  EXPECT_EQ(c->read_committed(base + heap - 1, got, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->read_committed(base - 1, got, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->read_committed(base, got, SIZE_MAX).code(), Code::kInvalidArgument);
  c.reset();
  Options ro;
  ro.read_only = true;
  c = must(Container::open(path_, ro));
  EXPECT_EQ(c->read_committed(c->root<char>(), got, 1).code(), Code::kNotSupported);
}

TEST_F(ContainerTest, InfoCountsOnlyPagesThatReallyChanged) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  // Open read the heap metadata and changed one page (the generation);
  // pages that were only read do not count.
  EXPECT_EQ(c->info().dirty_pages, 1u);
  ASSERT_TRUE(c->commit().ok());
  EXPECT_EQ(c->info().dirty_pages, 0u);
  auto* p = static_cast<uint64_t*>(*c->alloc(3 * 4096));
  ASSERT_TRUE(c->commit().ok());
  EXPECT_EQ(c->info().dirty_pages, 0u);
  put(*c, &p[0], uint64_t{1});
  put(*c, &p[1024], uint64_t{2});
  EXPECT_EQ(c->info().dirty_pages, 2u);
}

TEST_F(ContainerTest, GenerationChangesOnEveryOpen) {
  uint64_t g1, g2;
  {
    auto c = must(Container::create(path_, small()));
    g1 = c->generation();
    ASSERT_TRUE(c->commit().ok());
  }
  {
    auto c = must(Container::open(path_));
    g2 = c->generation();
  }
  auto c = must(Container::open(path_));
  EXPECT_NE(g1, g2);
  EXPECT_NE(c->generation(), g1);
}

TEST_F(ContainerTest, RemoveDeletesContainersOnly) {
  must(Container::create(path_, small()));
  EXPECT_TRUE(Container::remove(path_).ok());
  EXPECT_EQ(Container::open(path_).status().code(), Code::kNotFound);
  std::ofstream(dir_.file("notes.txt")) << "not a container";
  EXPECT_EQ(Container::remove(dir_.file("notes.txt")).code(), Code::kInvalidArgument);
  EXPECT_TRUE(std::ifstream(dir_.file("notes.txt")).good());
}

// ---- bad input -------------------------------------------------------------

void patch(const std::string& path, off_t off, const void* data, size_t n) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_EQ(::pwrite(fd, data, n, off), static_cast<ssize_t>(n));
  ::close(fd);
}

TEST_F(ContainerTest, DamagedFilesFailToOpenWithAReason) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, nullptr, 5)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  const std::string pristine = dir_.file("pristine.pm");
  std::filesystem::copy_file(path_, pristine);
  auto reset = [&] {
    std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
  };
  auto expect = [&](Code code, const char* words) {
    Result<std::unique_ptr<Container>> r = Container::open(path_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };

  // The superblock and its copy alike (one alone is the next test's).
  auto patch_both = [&](uint64_t off, const void* data, size_t n) {
    patch(path_, off, data, n);
    patch(path_, kSuperblockCopyOffset + off, data, n);
  };
  patch_both(0, "NOTACONT", 8);
  expect(Code::kCorruption, "not a libpm container");
  reset();
  uint32_t v = 99;  // a newer build's file says so in both
  patch_both(offsetof(Superblock, version), &v, 4);
  expect(Code::kNotSupported, "version 99");
  reset();
  char b = 0x7f;
  patch_both(offsetof(Superblock, layout) + 3, &b, 1);
  expect(Code::kCorruption, "checksum");
  reset();
  ASSERT_EQ(truncate(path_.c_str(), 100), 0);
  expect(Code::kCorruption, "too small");
  reset();
  ASSERT_EQ(truncate(path_.c_str(), 4096 + 8192), 0);
  expect(Code::kCorruption, "truncated");
  reset();
  std::ofstream(path_, std::ios::trunc) << std::string(10000, 'z');
  expect(Code::kCorruption, "not a libpm container");
  reset();
  EXPECT_TRUE(Container::open(path_).ok());
}

// A damaged superblock alone loses nothing: open() reads its copy, check()
// says so, and a writable open rewrites it. A file made before the copy
// (zeros there) fails as it did.
TEST_F(ContainerTest, ADamagedSuperblockIsReadFromItsCopyAndRewritten) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, nullptr, 5)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  const std::string pristine = dir_.file("pristine.pm");
  std::filesystem::copy_file(path_, pristine);
  for (uint64_t off : {uint64_t{0}, offsetof(Superblock, version), uint64_t{20},
                       offsetof(Superblock, checksum)}) {
    std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
    patch(path_, off, "\xa5\x5a", 2);
    {
      Options ro;
      ro.read_only = true;
      auto c = must(Container::open(path_, ro));
      ASSERT_TRUE(c != nullptr);
      EXPECT_EQ(static_cast<Node*>(c->root())->value, 5u);
      CheckReport r = c->check();
      EXPECT_TRUE(r.problems.empty());  // the heap is sound
      ASSERT_EQ(r.superblock.size(), 1u);
      EXPECT_NE(r.superblock[0].find("its copy"), std::string::npos) << r.superblock[0];
    }
    { auto c = must(Container::open(path_)); }  // writable: rewrites it
    auto c = must(Container::open(path_));
    ASSERT_TRUE(c != nullptr);
    EXPECT_TRUE(c->check().superblock.empty()) << c->check().superblock[0];
    EXPECT_EQ(static_cast<Node*>(c->root())->value, 5u);
  }
  // A damaged copy under a sound superblock: reported, and rewritten by a
  // writable open.
  for (bool writable : {false, true}) {
    std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
    patch(path_, kSuperblockCopyOffset + 20, "\xa5", 1);
    Options o;
    o.read_only = !writable;
    auto c = must(Container::open(path_, o));
    CheckReport r = c->check();
    ASSERT_EQ(r.superblock.size(), 1u);
    EXPECT_NE(r.superblock[0].find("copy at byte 3584 is damaged"), std::string::npos)
        << r.superblock[0];
    EXPECT_EQ(r.superblock[0].find("rewritten") != std::string::npos, writable) << r.superblock[0];
  }
  EXPECT_TRUE(must(Container::open(path_))->check().superblock.empty());
  std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
  patch(path_, 0, "NOTACONT", 8);
  EXPECT_TRUE(Container::remove(path_).ok()) << "its copy says what it is";
  std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
  patch(path_, kSuperblockCopyOffset, std::string(512, '\0').data(), 512);
  patch(path_, 20, "\xa5", 1);
  Result<std::unique_ptr<Container>> r = Container::open(path_);
  EXPECT_EQ(r.status().code(), Code::kCorruption) << r.status().to_string();
}

// Roots name objects: set_root() refuses an address in no block, check()
// reports a root whose object was freed (or a damaged one), and collect()
// refuses to free what such a root reached.
TEST_F(ContainerTest, ARootInNoBlockIsRefusedReportedAndStopsCollect) {
  auto c = must(Container::create(path_, small()));
  Node* a = push(*c, nullptr, 1);
  Node* b = push(*c, a, 2);
  auto* base = reinterpret_cast<std::byte*>(c->info().base_address);
  EXPECT_EQ(c->set_root(base, "hdr").code(), Code::kInvalidArgument);
  ASSERT_TRUE(c->set_root(b).ok());
  ASSERT_TRUE(c->set_root(a, "first").ok());
  ASSERT_TRUE(c->commit().ok());
  EXPECT_TRUE(c->check().problems.empty());
  ASSERT_TRUE(c->free(a).ok());
  std::vector<std::string> pr = c->check().problems;
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_NE(pr[0].find("root 'first'"), std::string::npos) << pr[0];
  Result<CollectReport> g = c->collect(false);
  EXPECT_EQ(g.status().code(), Code::kCorruption);
  EXPECT_TRUE(c->find_block(b).ok()) << "collect freed what the good root reaches";
  ASSERT_TRUE(c->set_root(nullptr, "first").ok());
  EXPECT_TRUE(c->collect(false).ok());
  EXPECT_TRUE(c->find_block(b).ok());
}

// Random byte damage anywhere in the metadata never crashes open(); when
// open succeeds, check() and a commit still behave.
TEST_F(ContainerTest, RandomCorruptionNeverCrashesOpen) {
  {
    auto c = must(Container::create(path_, small()));
    Node* head = nullptr;
    for (int i = 0; i < 50; i++) head = push(*c, head, static_cast<uint64_t>(i));
    ASSERT_TRUE(c->set_root(head).ok());
    ASSERT_TRUE(c->commit().ok());
    put(*c, &head->value, uint64_t{1234});
    ASSERT_TRUE(c->commit().ok());
  }
  const std::string pristine = dir_.file("pristine.pm");
  std::filesystem::copy_file(path_, pristine);
  std::mt19937_64 rng(42);
  int opened = 0;
  for (int round = 0; round < 300; round++) {
    std::filesystem::copy_file(pristine, path_, std::filesystem::copy_options::overwrite_existing);
    int nbytes = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < nbytes; k++) {
      // Superblock, journal header, heap header, segment metadata.
      off_t off = static_cast<off_t>(rng() % (4096 + 4096 + 8192));
      char byte = static_cast<char>(rng());
      patch(path_, off, &byte, 1);
    }
    Result<std::unique_ptr<Container>> r = Container::open(path_);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    opened++;
    (void)(*r)->check();
    (void)(*r)->alloc(64);
    (void)(*r)->commit();
  }
  EXPECT_GT(opened, 0);
}

// ---- crash between commit point and write-back ----------------------------

// Forwards to the real file until `drains_left` drains have happened, then
// drops every later write: the process "lost power" right after that drain.
class CrashAfterDrains : public Persist {
 public:
  CrashAfterDrains(std::unique_ptr<Persist> real, int drains)
      : real_(std::move(real)), left_(drains) {}
  bool is_pmem() const override { return real_->is_pmem(); }
  const std::byte* view() const override { return real_->view(); }
  uint64_t size() const override { return real_->size(); }
  void write(uint64_t off, const void* src, size_t n) override {
    if (left_ > 0) real_->write(off, src, n);
  }
  void flush(uint64_t off, size_t n) override {
    if (left_ > 0) real_->flush(off, n);
  }
  Status drain() override {
    if (left_ <= 0) return Status();
    left_--;
    return real_->drain();
  }
  Status resize(uint64_t keep, uint64_t n) override { return real_->resize(keep, n); }

 private:
  std::unique_ptr<Persist> real_;
  int left_;
};

PersistOpener crash_after_drains(int drains) {
  return [drains](const std::string& p) -> Result<std::unique_ptr<Persist>> {
    Result<std::unique_ptr<Persist>> real = open_pmem_file(p);
    if (!real.ok()) return real.status();
    return std::unique_ptr<Persist>(new CrashAfterDrains(std::move(*real), drains));
  };
}

TEST_F(ContainerTest, CommitIsReplayedAfterACrashBeforeWriteBack) {
  Node* head;
  {
    auto c = must(Container::create(path_, small()));
    head = push(*c, nullptr, 1);
    ASSERT_TRUE(c->set_root(head).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  {
    // Two drains (the open's of the header slots, then the journal) reach
    // the file; write-back is lost.
    auto c = must(open_container(path_, Options(), false, crash_after_drains(2)));
    put(*c, &c->root<Node>()->value, uint64_t{42});
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  EXPECT_EQ(c->info().commits, 2u);
  EXPECT_EQ(c->root<Node>()->value, 42u);
}

TEST_F(ContainerTest, CommitIsAbsentAfterACrashBeforeTheCommitPoint) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, nullptr, 1)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  {
    auto c = must(open_container(path_, Options(), false, crash_after_drains(0)));
    put(*c, &c->root<Node>()->value, uint64_t{42});
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  EXPECT_EQ(c->root<Node>()->value, 1u);
}

// ---- read-only opens ---------------------------------------------------------

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Options read_only() {
  Options o;
  o.read_only = true;
  return o;
}

// ---- journal header slots (libpm/journal.h) --------------------------------

uint64_t header_seq(const std::string& bytes, uint64_t slot) {
  JournalHeader h;
  std::memcpy(&h, bytes.data() + slot, sizeof h);
  return h.magic == kJournalMagic ? h.seq : 0;
}

TEST_F(ContainerTest, CommitsAlternateBetweenTwoJournalSlots) {
  auto c = must(Container::create(path_, small()));
  ASSERT_TRUE(c->set_root(push(*c, nullptr, 1)).ok());
  ASSERT_TRUE(c->commit().ok());
  put(*c, &c->root<Node>()->value, uint64_t{2});
  ASSERT_TRUE(c->commit().ok());
  const std::string f = file_bytes(path_);
  const uint64_t a = header_seq(f, kJournalHeaderOffset), b = header_seq(f, kJournalSlot1Offset);
  EXPECT_EQ(std::max(a, b), c->info().commits);
  EXPECT_EQ(std::min(a, b) + 1, std::max(a, b));
}

// A clean close marks both slots applied. Before, the older one stayed
// pending (off pmem, the deferred write-back): a damaged byte in the
// newest header then had recovery replay the older commit over the newer
// one's bytes, undoing half of it silently (a user trial's ledger). The
// planted bug (close_marks_newest_only) is that defect: it must fail here.
TEST_F(ContainerTest, ADamagedNewestHeaderAfterACleanCloseReplaysNothingOlder) {
  // The two values an open finds after the newest header's checksum is damaged.
  auto run = [&](std::pair<uint64_t, uint64_t>* found) {
    ::unlink(path_.c_str());
    {
      auto c = must(Container::create(path_, small()));
      Node* n = push(*c, push(*c, nullptr, 0), 0);
      ASSERT_TRUE(c->set_root(n).ok());
      ASSERT_TRUE(c->commit().ok());
      put(*c, &n->value, uint64_t{1});  // commit N changes the first value only
      ASSERT_TRUE(c->commit().ok());
      put(*c, &n->value, uint64_t{2});  // N + 1 changes both
      put(*c, &n->next->value, uint64_t{2});
      ASSERT_TRUE(c->commit().ok());
    }
    const std::string f = file_bytes(path_);
    const uint64_t a = header_seq(f, kJournalHeaderOffset), b = header_seq(f, kJournalSlot1Offset);
    // Its checksum: the sequence number and flags stay as they were.
    const uint64_t at = (a > b ? kJournalHeaderOffset : kJournalSlot1Offset) +
                        offsetof(JournalHeader, checksum);
    const char flip = static_cast<char>(f[at] ^ 0x10);
    patch(path_, static_cast<off_t>(at), &flip, 1);
    auto c = must(Container::open(path_));
    ASSERT_NE(c, nullptr);
    *found = {c->root<Node>()->value, c->root<Node>()->next->value};
  };
  std::pair<uint64_t, uint64_t> fixed, planted;
  run(&fixed);
  EXPECT_EQ(fixed, (std::pair<uint64_t, uint64_t>{2, 2}));
  g_planted_bugs.close_marks_newest_only = true;
  run(&planted);
  g_planted_bugs.close_marks_newest_only = false;
  EXPECT_NE(planted, (std::pair<uint64_t, uint64_t>{2, 2})) << "the planted bug went unseen";
}

// A kill inside heap growth, between extending the file and allocating
// the new part (Persist::resize), leaves holes past the bytes in use. On a
// full disk they could not be filled, and no open, writable or read-only,
// pm check or salvage, got past "holes (a sparse copy?)" (a user trial:
// kill -9 of a writer on a full 10 MiB tmpfs). The open cuts them off now.
TEST_F(ContainerTest, AGrowthCutShortOnAFullDiskLeavesAFileThatOpens) {
  const std::string d = dir_.file("small");
  test::SmallFs fs(d);
  if (!fs.ok()) GTEST_SKIP() << "mount(2) of a tmpfs is not allowed here";
  const std::string path = d + "/c.pm";
  auto run = [&](uint64_t* file_size) -> Status {
    ::unlink(path.c_str());
    ::unlink((d + "/ballast").c_str());
    {
      auto c = must(Container::create(path, small()));
      if (c == nullptr) return Status::io_error("create");
      auto* n = *c->make<Node>(Node{nullptr, 42});
      PM_TRY(c->set_root(n));
      PM_TRY(c->commit());
    }
    struct stat st {};
    ::stat(path.c_str(), &st);
    // The crash: the file extended by 2 MiB, none of it allocated.
    if (::truncate(path.c_str(), st.st_size + (2 << 20)) != 0) return Status::io_error("grow");
    const int fd = ::open((d + "/ballast").c_str(), O_WRONLY | O_CREAT, 0600);
    const std::string mib(1 << 20, 'b');
    while (::write(fd, mib.data(), mib.size()) > 0) {
    }
    ::close(fd);
    Options ro = small();
    ro.read_only = true;
    Result<std::unique_ptr<Container>> r = Container::open(path, ro);
    PM_TRY(r.status());
    if ((*r)->root<Node>()->value != 42) return Status::corruption("read-only: root lost");
    r->reset();
    r = Container::open(path, small());
    PM_TRY(r.status());
    if ((*r)->root<Node>()->value != 42) return Status::corruption("root lost");
    ::stat(path.c_str(), &st);
    *file_size = static_cast<uint64_t>(st.st_size);
    return Status();
  };
  uint64_t size = 0;
  Status fixed = run(&size);
  EXPECT_TRUE(fixed.ok()) << fixed.to_string();
  EXPECT_LT(size, 6u << 20);  // the holes are gone
  g_planted_bugs.open_fills_growth_holes = true;
  Status planted = run(&size);
  g_planted_bugs.open_fills_growth_holes = false;
  EXPECT_EQ(planted.code(), Code::kNoSpace)
      << "the planted bug went unseen: " << planted.to_string();
}

TEST_F(ContainerTest, VersionThreeFilesKeepOneJournalSlot) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, nullptr, 1)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  Superblock sb;
  int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, &sb, sizeof sb, 0), ssize_t{sizeof sb});
  sb.version = 3;
  sb.checksum = superblock_checksum(sb);
  ASSERT_EQ(::pwrite(fd, &sb, sizeof sb, 0), ssize_t{sizeof sb});
  ::close(fd);
  const std::string slot1 = file_bytes(path_).substr(kJournalSlot1Offset, 64);
  for (uint64_t v = 2; v < 6; v++) {
    auto c = must(Container::open(path_));
    put(*c, &c->root<Node>()->value, v);
    ASSERT_TRUE(c->commit().ok());
  }
  const std::string f = file_bytes(path_);
  EXPECT_EQ(f.substr(kJournalSlot1Offset, 64), slot1);  // a version-3 build reads slot 0 only
  std::memcpy(&sb, f.data(), sizeof sb);
  EXPECT_EQ(sb.version, 3u);
  auto c = must(Container::open(path_));
  EXPECT_EQ(c->root<Node>()->value, 5u);
}

JournalHeader newest_header(const std::string& path, uint64_t seq) {
  JournalHeader h;
  std::memcpy(&h, file_bytes(path).data() + journal_slot_offset(seq, 2), sizeof h);
  return h;
}

// A container whose root is a data block of `bytes`, committed and closed:
// 0, or the step that failed (2, 3) for a child test's exit code.
int create_with_a_block(const std::string& path, uint64_t bytes) {
  auto c = Container::create(path, small());
  if (!c.ok()) return 2;
  Result<void*> p = (*c)->alloc(bytes, AllocKind::kData);
  return p.ok() && (*c)->set_root(*p).ok() && (*c)->commit().ok() ? 0 : 3;
}

// Off pmem a commit's write-back is deferred, and the next body goes above
// the deferred body when it does not fit below it (journal.h, rule 2). On a
// file that cannot grow, that room may be missing where the journal's room
// at the heap's end is not: the commit must finish the deferred commit and
// use the heap end's room, or a full disk refuses every commit, even those
// that free space (found by CI's full-disk store test). In a child under a
// file-size limit; exit codes: 0 good, else the step that went wrong.
int commit_with_no_room_above_the_deferred_body(const std::string& path) {
  constexpr uint64_t kPage = 4096, kBlock = 8u << 20;
  if (int step = create_with_a_block(path, kBlock); step != 0) return step;
  // Reopened, nothing is deferred: the one-page commit A goes to the heap's
  // end and stays deferred.
  auto c = Container::open(path);
  if (!c.ok()) return 4;
  auto* b = (*c)->root<std::byte>();
  (*c)->will_write(b, kPage);
  std::memset(b, 1, kPage);
  if (!(*c)->commit().ok()) return 5;
  const uint64_t heap_end = newest_header(path, (*c)->info().commits).body_offset;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 6;
  const uint64_t room = static_cast<uint64_t>(st.st_size) - heap_end;
  // B's body fits the room but not above A's (which takes two pages with
  // its entry): the file may not grow past its size.
  const uint64_t pages = room / kPage - 2;
  if (room < 3 * kPage || pages * kPage > kBlock) return 7;
  signal(SIGXFSZ, SIG_IGN);
  rlimit lim{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 8;
  (*c)->will_write(b, pages * kPage);
  std::memset(b, 2, pages * kPage);
  if (!(*c)->commit().ok()) return 9;
  if (newest_header(path, (*c)->info().commits).body_offset != heap_end) return 10;
  // And again (C above B does not fit either), then reopen.
  (*c)->will_write(b + kPage, kPage);
  std::memset(b + kPage, 3, kPage);
  if (!(*c)->commit().ok()) return 11;
  c->reset();
  c = Container::open(path);
  if (!c.ok()) return 12;
  b = (*c)->root<std::byte>();
  if (b[0] != std::byte{2} || b[kPage] != std::byte{3} || b[pages * kPage - 1] != std::byte{2}) {
    return 13;
  }
  return (*c)->check().problems.empty() ? 0 : 14;
}

TEST_F(ContainerTest, AFullFileTakesCommitsWithNoRoomAboveTheDeferredBody) {
  if (must(Container::create(path_, small()))->info().is_pmem) {
    GTEST_SKIP() << "nothing is deferred on pmem";
  }
  std::filesystem::remove(path_);
  EXPECT_EQ(test::exit_code_in_child(
                [this] { return commit_with_no_room_above_the_deferred_body(path_); }),
            0)
      << "the step that went wrong (above 128: a signal)";
}

// A commit on a full disk finishes the deferred commit (its header marked
// applied) and then fails: the close marks nothing more, so the slot of the
// commit before must have been marked then too. Else it stayed pending, and
// a damaged newest header had the next open replay it over newer bytes (a
// review found it). In a child under a file-size limit: 0 good, else the
// step that went wrong.
int a_commit_failing_after_finishing_the_deferred_one(const std::string& path) {
  constexpr uint64_t kPage = 4096, kBlock = 8u << 20;
  if (int step = create_with_a_block(path, kBlock); step != 0) return step;
  auto c = Container::open(path);
  if (!c.ok()) return 4;
  auto* b = (*c)->root<std::byte>();
  (*c)->will_write(b, 2 * kPage);  // A0: the first page 1
  std::memset(b, 1, kPage);
  if (!(*c)->commit().ok()) return 5;
  (*c)->will_write(b, 2 * kPage);
  std::memset(b, 2, 2 * kPage);  // A: both pages 2 (A0's slot stays pending)
  if (!(*c)->commit().ok()) return 6;
  const uint64_t heap_end = newest_header(path, (*c)->info().commits).body_offset;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 7;
  // B fits nowhere: neither above A's deferred body nor at the heap's end.
  const uint64_t pages = (static_cast<uint64_t>(st.st_size) - heap_end) / kPage + 2;
  if (pages * kPage > kBlock - 2 * kPage) return 8;
  signal(SIGXFSZ, SIG_IGN);
  rlimit lim{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 9;
  (*c)->will_write(b + 2 * kPage, pages * kPage);
  std::memset(b + 2 * kPage, 3, pages * kPage);
  if ((*c)->commit().code() != Code::kNoSpace) return 10;
  return 0;
}

TEST_F(ContainerTest, ACommitFailingAfterFinishingTheDeferredOneLeavesNoSlotPending) {
  if (must(Container::create(path_, small()))->info().is_pmem) {
    GTEST_SKIP() << "nothing is deferred on pmem";
  }
  // The first two pages an open finds after the newest header's checksum
  // is damaged.
  auto run = [&](std::pair<int, int>* found) {
    std::filesystem::remove(path_);
    ASSERT_EQ(test::exit_code_in_child(
                  [this] { return a_commit_failing_after_finishing_the_deferred_one(path_); }),
              0)
        << "the step that went wrong (above 128: a signal)";
    const std::string f = file_bytes(path_);
    const uint64_t a = header_seq(f, kJournalHeaderOffset), b = header_seq(f, kJournalSlot1Offset);
    const uint64_t at = (a > b ? kJournalHeaderOffset : kJournalSlot1Offset) +
                        offsetof(JournalHeader, checksum);
    const char flip = static_cast<char>(f[at] ^ 0x10);
    patch(path_, static_cast<off_t>(at), &flip, 1);
    auto c = must(Container::open(path_));
    ASSERT_NE(c, nullptr);
    auto* p = c->root<std::byte>();
    *found = {static_cast<int>(p[0]), static_cast<int>(p[4096])};
  };
  std::pair<int, int> fixed, planted;
  run(&fixed);
  EXPECT_EQ(fixed, (std::pair<int, int>{2, 2}));
  g_planted_bugs.finish_marks_newest_only = true;
  run(&planted);
  g_planted_bugs.finish_marks_newest_only = false;
  EXPECT_NE(planted, (std::pair<int, int>{2, 2})) << "the planted bug went unseen";
}

// With kHints a commit compares only the announced lines with the file, not
// their whole pages: a byte written unannounced beside announced ones, in
// the same page, is not committed.
TEST_F(ContainerTest, HintsCommitTheAnnouncedLinesOnly) {
  Options o = small();
  o.tracker = TrackerKind::kHints;
  uint64_t at = 0;
  {
    auto c = must(Container::create(path_, o));
    auto* b = static_cast<std::byte*>(*c->alloc(5 * 4096, AllocKind::kData));
    ASSERT_TRUE(c->set_root(b).ok());
    ASSERT_TRUE(c->commit().ok());
    at = static_cast<uint64_t>((reinterpret_cast<uintptr_t>(b) + 4095) / 4096 * 4096 -
                               reinterpret_cast<uintptr_t>(b));
    std::byte* p = b + at;  // page-aligned: pages 0 to 3 of p lie in the block
    c->will_write(p + 60, 4040);  // lines 0 to 64: across the first page boundary
    std::memset(p + 60, 1, 4040);
    p[5120] = std::byte{2};  // page 1, line 80: not announced
    c->will_write(p + 3 * 4096 + 8, 8);
    std::memset(p + 3 * 4096 + 8, 3, 8);
    ASSERT_TRUE(c->commit().ok());
  }
  auto c = must(Container::open(path_));
  const std::byte* p = c->root<std::byte>() + at;
  EXPECT_EQ(p[59], std::byte{0});
  EXPECT_EQ(p[60], std::byte{1});
  EXPECT_EQ(p[4099], std::byte{1});
  EXPECT_EQ(p[4100], std::byte{0});
  EXPECT_EQ(p[5120], std::byte{0});
  EXPECT_EQ(p[3 * 4096 + 8], std::byte{3});
  EXPECT_EQ(p[3 * 4096 + 15], std::byte{3});
}

TEST_F(ContainerTest, ReadOnlyOpenReadsEverythingAndChangesNothing) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, push(*c, nullptr, 1), 2)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  const std::string before = file_bytes(path_);
  auto c = must(Container::open(path_, read_only()));
  EXPECT_TRUE(c->info().read_only);
  EXPECT_EQ(values(c->root<Node>()), (std::vector<uint64_t>{2, 1}));
  EXPECT_TRUE(c->check(false).problems.empty());
  // Stores land in a private copy: abort() drops them, commit() refuses.
  c->root<Node>()->value = 7;
  EXPECT_TRUE(c->abort().ok());
  EXPECT_EQ(c->root<Node>()->value, 2u);
  c->root<Node>()->value = 7;
  Status s = c->commit();
  EXPECT_EQ(s.code(), Code::kReadOnly) << s.to_string();
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.to_string();
  EXPECT_EQ(c->alloc(64).status().code(), Code::kReadOnly);
  EXPECT_EQ(c->set_root(nullptr).code(), Code::kReadOnly);
  EXPECT_EQ(c->free(c->root<Node>()).code(), Code::kReadOnly);
  EXPECT_EQ(c->reserve(1 << 20).code(), Code::kReadOnly);
  EXPECT_EQ(c->collect(false).status().code(), Code::kReadOnly);
  // A writer is refused while a reader has the file.
  EXPECT_EQ(Container::open(path_).status().code(), Code::kBusy);
  c.reset();
  EXPECT_EQ(file_bytes(path_), before);
  EXPECT_EQ(Container::create(path_, read_only()).status().code(), Code::kInvalidArgument);
}

// A read-only open after a kill (or inside a deferred write-back) sees the
// last commit, applied in its own memory, and leaves the file as it is
// (it used to refuse: kReadOnly, "open it writable once").
TEST_F(ContainerTest, ReadOnlyOpenOfAnUnfinishedCommitSeesItAndLeavesTheFile) {
  {
    auto c = must(Container::create(path_, small()));
    ASSERT_TRUE(c->set_root(push(*c, nullptr, 1)).ok());
    ASSERT_TRUE(c->commit().ok());
  }
  // A session that commits and dies (no close: its header stays pending);
  // the commit grows the heap too, so the heap's header is in its journal.
  const int code = test::exit_code_in_child([this] {
    Result<std::unique_ptr<Container>> c = Container::open(path_);
    if (!c.ok()) return 2;
    Node* root = (*c)->root<Node>();
    put(**c, &root->value, uint64_t{42});
    Result<void*> big = (*c)->alloc(size_t{8} << 20, AllocKind::kData);
    if (!big.ok()) return 3;
    (*c)->will_write(*big, size_t{8} << 20);
    std::memset(*big, 0x3c, size_t{8} << 20);
    put(**c, &root->next, static_cast<Node*>(*big));
    if (!(*c)->commit().ok()) return 4;
    _exit(0);
  });
  ASSERT_EQ(code, 0);
  auto bytes = [&] {
    std::ifstream f(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string before = bytes();
  for (int i = 0; i < 2; i++) {
    std::string said;
    Options o = read_only();
    o.logger = [&](LogLevel, std::string_view m) { said.append(m).append("\n"); };
    auto ro = must(Container::open(path_, o));
    EXPECT_NE(said.find("in this process's view only"), std::string::npos) << said;
    ASSERT_NE(ro, nullptr);
    EXPECT_EQ(ro->root<Node>()->value, 42u);
    const auto* b = reinterpret_cast<const std::byte*>(ro->root<Node>()->next);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b[0], std::byte{0x3c});
    EXPECT_EQ(b[(size_t{8} << 20) - 1], std::byte{0x3c});
    EXPECT_TRUE(ro->check().problems.empty());
    ro->root<Node>()->value = 7;  // a store of its own, dropped by abort: the commit stays
    ASSERT_TRUE(ro->abort().ok());
    EXPECT_EQ(ro->root<Node>()->value, 42u);
    EXPECT_EQ(b[(size_t{8} << 20) - 1], std::byte{0x3c});
  }
  EXPECT_EQ(bytes(), before) << "a read-only open wrote the file";
  must(Container::open(path_)).reset();  // recovers
  auto c = must(Container::open(path_, read_only()));
  EXPECT_EQ(c->root<Node>()->value, 42u);
}

// Returns 0, or the step that failed. Run as a user who may not write path.
int open_unwritable(const std::string& path) {
  Result<std::unique_ptr<Container>> c = Container::open(path);
  if (c.ok() || c.status().code() != Code::kReadOnly) return 1;
  if (c.status().message().find("no write access") == std::string::npos) return 2;
  Options o;
  o.read_only = true;
  return Container::open(path, o).ok() ? 0 : 3;
}

TEST_F(ContainerTest, AFileTheUserMayNotWriteOpensOnlyReadOnly) {
  must(Container::create(path_, small())).reset();
  ASSERT_EQ(::chmod(path_.c_str(), 0444), 0);
  if (::geteuid() != 0) {
    EXPECT_EQ(open_unwritable(path_), 0);
    return;
  }
  // Root writes any file: try it as nobody.
  ASSERT_EQ(::chmod(std::filesystem::path(path_).parent_path().c_str(), 0711), 0);
  EXPECT_EQ(test::exit_code_in_child([this] {
              if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 10;
              return open_unwritable(path_);
            }),
            0);
}

}  // namespace
}  // namespace pm
