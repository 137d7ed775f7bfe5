#include "libpm/journal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "libpm/superblock.h"

namespace pm {
namespace {

// An in-memory file: enough Persist for the journal's unit tests.
class MemFile : public Persist {
 public:
  explicit MemFile(size_t n) : bytes_(n) {}
  bool is_pmem() const override { return true; }
  const std::byte* view() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }
  void write(uint64_t off, const void* src, size_t n) override {
    std::memcpy(&bytes_[off], src, n);
  }
  void flush(uint64_t, size_t) override {}
  Status drain() override {
    drains++;
    return Status();
  }
  Status resize(uint64_t keep, uint64_t n) override {
    bytes_.resize(keep);
    bytes_.resize(n);
    return Status();
  }
  std::byte* raw() { return bytes_.data(); }
  int drains = 0;

 private:
  std::vector<std::byte> bytes_;
};

constexpr uint64_t kHeap = 64 * 1024;

TEST(JournalTest, DiffFindsChangedLinesAndMergesNeighbours) {
  std::vector<std::byte> a(8192), b(8192);
  b[0] = std::byte{1};
  b[70] = std::byte{1};  // line 1, adjacent to line 0
  b[4096 + 63] = std::byte{1};
  std::vector<pm::Run> runs;
  diff_lines(b.data(), a.data(), 0, 8192, &runs);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].off, 0u);
  EXPECT_EQ(runs[0].len, 128u);
  EXPECT_EQ(runs[1].off, 4096u);
  EXPECT_EQ(runs[1].len, 64u);
}

struct Fixture {
  MemFile f{kHeapOffset + kHeap};
  std::vector<std::byte> work = std::vector<std::byte>(kHeap);
  std::vector<pm::Run> runs;
  void change(uint64_t off, char v) {
    std::memset(&work[off], v, 64);
    runs.push_back({off, 64});
  }
  const std::byte* home(uint64_t off) { return f.view() + kHeapOffset + off; }
};

TEST(JournalTest, CommitPointThenApplyThenReplayIsIdempotent) {
  Fixture x;
  x.change(128, 'a');
  x.change(8192, 'b');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  EXPECT_EQ(x.f.drains, 1);  // one barrier makes the journal durable
  JournalStatus js = read_journal(x.f);
  ASSERT_EQ(js.state, JournalState::kPending);
  EXPECT_EQ(*x.home(128), std::byte{0});  // not applied yet
  ASSERT_TRUE(replay_journal(x.f, js.header).ok());
  EXPECT_EQ(*x.home(128), std::byte{'a'});
  EXPECT_EQ(*x.home(8192 + 63), std::byte{'b'});
  EXPECT_EQ(read_journal(x.f).state, JournalState::kApplied);
  ASSERT_TRUE(replay_journal(x.f, js.header).ok());  // again: same result
  EXPECT_EQ(*x.home(128), std::byte{'a'});
}

TEST(JournalTest, TornBodyIsReportedAndNotApplied) {
  Fixture x;
  x.change(0, 'a');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  x.f.raw()[kHeapOffset + kHeap + 20] ^= std::byte{1};  // one byte of the body never landed
  JournalStatus js = read_journal(x.f);
  EXPECT_EQ(js.state, JournalState::kTorn);
  EXPECT_NE(js.why.find("checksum"), std::string::npos);
}

TEST(JournalTest, TornHeaderReadsAsEmpty) {
  Fixture x;
  x.change(0, 'a');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  x.f.raw()[kJournalHeaderOffset + 9] ^= std::byte{4};
  EXPECT_EQ(read_journal(x.f).state, JournalState::kEmpty);
}

TEST(JournalTest, StaleBodyOfAnotherCommitNeverValidates) {
  Fixture x;
  x.change(0, 'a');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  // A header for commit 2 that names the same bytes, checksum copied from 1.
  JournalHeader h;
  std::memcpy(&h, x.f.view() + kJournalHeaderOffset, sizeof h);
  h.seq = 2;
  x.f.write(kJournalHeaderOffset, &h, sizeof h);
  EXPECT_NE(read_journal(x.f).state, JournalState::kPending);
}

TEST(JournalTest, EntriesPastTheFileAreRejected) {
  Fixture x;
  x.change(0, 'a');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  ASSERT_TRUE(x.f.resize(kHeapOffset + kHeap + 30, kHeapOffset + kHeap + 30).ok());
  JournalStatus js = read_journal(x.f);
  EXPECT_EQ(js.state, JournalState::kTorn);
  EXPECT_NE(js.why.find("outside the file"), std::string::npos);
}

TEST(JournalTest, BodyGrowsTheFileWhenNeeded) {
  Fixture x;
  for (uint64_t off = 0; off < kHeap; off += 64) x.change(off, 'z');
  ASSERT_TRUE(write_journal(x.f, 1, kHeapOffset + kHeap, x.work.data(), x.runs).ok());
  EXPECT_GE(x.f.size(), kHeapOffset + kHeap + kHeap);
  EXPECT_EQ(read_journal(x.f).state, JournalState::kPending);
}

// Two header slots (format version 4): commit n in slot n % 2, bodies apart
// (as a deferred write-back needs, journal.h).
struct TwoCommits : Fixture {
  static constexpr uint64_t kBody1 = kHeapOffset + kHeap;
  static constexpr uint64_t kBody2 = kBody1 + 4096;
  explicit TwoCommits(bool deferred = true) {
    change(0, 'a');
    EXPECT_TRUE(write_journal(f, 1, kBody1, work.data(), runs, nullptr, 2).ok());
    EXPECT_TRUE(apply_runs(f, work.data(), runs, kHeapOffset, /*drain=*/!deferred).ok());
    runs.clear();
    change(4096, 'b');
    EXPECT_TRUE(write_journal(f, 2, kBody2, work.data(), runs, nullptr, 2,
                              deferred ? kJournalFollowsDeferred : 0)
                    .ok());
  }
};

TEST(JournalTest, TheNewestSlotDecidesAndThePreviousCommitIsReplayedFirst) {
  TwoCommits x;
  JournalStatus js = read_journal(x.f, kHeapOffset, 2);
  ASSERT_EQ(js.state, JournalState::kPending);
  EXPECT_EQ(js.header.seq, 2u);
  ASSERT_TRUE(js.has_previous);
  EXPECT_EQ(js.previous.seq, 1u);
  EXPECT_EQ(js.last_seq, 2u);
  // A one-slot reader (a version-3 file) sees slot 0 only: commit 2.
  EXPECT_EQ(read_journal(x.f).header.seq, 2u);
  ASSERT_TRUE(replay_journal(x.f, js.previous, kHeapOffset, 2).ok());
  ASSERT_TRUE(replay_journal(x.f, js.header, kHeapOffset, 2).ok());
  EXPECT_EQ(*x.home(0), std::byte{'a'});
  EXPECT_EQ(*x.home(4096), std::byte{'b'});
  js = read_journal(x.f, kHeapOffset, 2);
  EXPECT_EQ(js.state, JournalState::kApplied);
  EXPECT_FALSE(js.has_previous);  // an applied newest needs nothing before it
}

TEST(JournalTest, ATornNewestCommitFallsBackToThePreviousOne) {
  TwoCommits x;
  x.f.raw()[TwoCommits::kBody2 + 20] ^= std::byte{1};
  JournalStatus js = read_journal(x.f, kHeapOffset, 2);
  ASSERT_EQ(js.state, JournalState::kPending);
  EXPECT_EQ(js.header.seq, 1u);
  EXPECT_FALSE(js.has_previous);
  EXPECT_EQ(js.last_seq, 2u);  // the next commit is 3: no sequence number reused
  EXPECT_NE(js.why.find("commit 2"), std::string::npos) << js.why;
  // Its header torn instead: slot 0 reads as empty, commit 1 decides.
  TwoCommits y;
  y.f.raw()[kJournalHeaderOffset + 9] ^= std::byte{4};
  js = read_journal(y.f, kHeapOffset, 2);
  ASSERT_EQ(js.state, JournalState::kPending);
  EXPECT_EQ(js.header.seq, 1u);
}

TEST(JournalTest, WithoutADeferredWriteBackOnlyTheNewestCommitCounts) {
  // Commit 1 was written back at once: a torn commit 2 may be a completed
  // commit whose body a later one overwrote, and commit 1 must not undo it.
  TwoCommits x(/*deferred=*/false);
  JournalStatus js = read_journal(x.f, kHeapOffset, 2);
  EXPECT_EQ(js.header.seq, 2u);
  EXPECT_FALSE(js.has_previous);
  x.f.raw()[TwoCommits::kBody2 + 20] ^= std::byte{1};
  js = read_journal(x.f, kHeapOffset, 2);
  EXPECT_EQ(js.state, JournalState::kTorn);
  EXPECT_EQ(js.header.seq, 2u);
}

}  // namespace
}  // namespace pm
