// PendingKeys against a model: what it collects after any mix of reads and
// forgets holds every key an ordered read needs and nothing never logged.
#include "kvstore/pending_keys.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kvstore/planted_bugs.h"
#include "testutil/container_util.h"
#include "testutil/temp_dir.h"

namespace kv {
namespace {

constexpr uint64_t kLogBytes = 64 << 10;

class PendingKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pm::Options o = pm::test::small();
    o.raw_bytes = 2 * kLogBytes;
    c_ = pm::test::must(pm::Container::create(dir_.file("c.pm"), o));
    ASSERT_TRUE(c_ != nullptr);
    for (uint32_t i = 0; i < 2; i++) {
      logs_.push_back(std::make_unique<Log>(&c_->raw(), i, i * kLogBytes, kLogBytes));
    }
  }

  // Logs one record of ops at log i's tail.
  void log(uint32_t i, const std::vector<Op>& ops) {
    std::vector<std::byte> buf;
    encode_record(i, tail_[i], seq_++, 1, ops, &buf);
    ASSERT_TRUE(logs_[i]->write(tail_[i], buf.data(), buf.size()).ok());
    tail_[i] += buf.size();
  }

  std::vector<std::string> collect(PendingKeys& p, std::string_view after, bool inclusive,
                                   std::string_view end, size_t max, bool* more) {
    std::vector<std::string> out;
    *more = p.collect(after, inclusive, end, max, &out);
    return out;
  }

  pm::test::TempDir dir_;
  std::unique_ptr<pm::Container> c_;
  std::vector<std::unique_ptr<Log>> logs_;
  Limits limits_{64, 64, kLogBytes / 4};
  uint64_t tail_[2] = {0, 0};
  uint64_t seq_ = 1;
};

// Random records in two logs, cursors moving on, readers at random moments:
// every collect holds each key of the unapplied records, sorted and once,
// and only keys that were logged; pages of `max` keys chain to the same.
TEST_F(PendingKeysTest, CollectsEveryUnappliedKeyInOrderAcrossRunsAndLogs) {
  PendingKeys p(2);
  std::mt19937_64 rng(7);
  std::vector<std::pair<uint64_t, std::string>> records[2];  // (position, key) in log order
  uint64_t cursor[2] = {0, 0};
  std::set<std::string> ever;
  for (int step = 0; step < 3000; step++) {
    const uint32_t i = static_cast<uint32_t>(rng() % 2);
    const uint64_t r = rng() % 10;
    if (r < 6 && tail_[i] - cursor[i] < kLogBytes - 256) {
      std::string k = "k" + std::to_string(rng() % 400);
      if (rng() % 3 == 0) k += std::string(rng() % 20, static_cast<char>('a' + rng() % 3));
      records[i].emplace_back(tail_[i], k);
      ever.insert(k);
      log(i, {{OpCode::kPut, k, "v"}});
    } else if (r < 8) {  // a gleaner applies some records
      size_t n = 0;
      for (auto& [pos, k] : records[i]) n += pos >= cursor[i];
      size_t skip = rng() % (n + 1);
      for (auto& [pos, k] : records[i]) {
        if (pos >= cursor[i] && skip-- == 0) {
          cursor[i] = pos;
          break;
        }
      }
      if (rng() % 4 == 0) p.forget(i, cursor[i]);
    } else {  // a reader
      for (uint32_t j = 0; j < 2; j++) {
        ASSERT_TRUE(p.update(j, *logs_[j], limits_, cursor[j], tail_[j]).ok());
      }
      std::set<std::string> need;
      for (uint32_t j = 0; j < 2; j++) {
        for (auto& [pos, k] : records[j]) {
          if (pos >= cursor[j]) need.insert(k);
        }
      }
      const std::string after = "k" + std::to_string(rng() % 450);
      const bool inclusive = rng() % 2;
      const std::string end = rng() % 3 == 0 ? "" : "k" + std::to_string(rng() % 450);
      bool more = true;
      std::vector<std::string> all = collect(p, after, inclusive, end, SIZE_MAX, &more);
      EXPECT_FALSE(more);
      EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
      EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a key twice";
      const std::set<std::string> got(all.begin(), all.end());
      for (const std::string& k : got) {
        EXPECT_TRUE(ever.count(k)) << k << " never logged";
        EXPECT_TRUE(inclusive ? k >= after : k > after) << k;
        EXPECT_TRUE(end.empty() || k < end) << k;
      }
      for (const std::string& k : need) {
        if ((inclusive ? k >= after : k > after) && (end.empty() || k < end)) {
          EXPECT_TRUE(got.count(k)) << k << " is unapplied and was not collected";
        }
      }
      // The same in pages of 5, each after the last key of the one before.
      std::vector<std::string> paged;
      std::string from = after;
      bool incl = inclusive;
      for (more = true; more;) {
        std::vector<std::string> page = collect(p, from, incl, end, 5, &more);
        ASSERT_LE(page.size(), 5u);
        if (more) {
          ASSERT_EQ(page.size(), 5u);
        }
        paged.insert(paged.end(), page.begin(), page.end());
        if (!page.empty()) {
          from = page.back();
          incl = false;
        }
      }
      EXPECT_EQ(paged, all);
    }
    if (HasFailure()) return;
  }
  // Everything applied: nothing is held once the cursors reach the tails.
  for (uint32_t j = 0; j < 2; j++) {
    ASSERT_TRUE(p.update(j, *logs_[j], limits_, tail_[j], tail_[j]).ok());
  }
  EXPECT_EQ(p.held(), 0u);
}

// Removes are never collected; puts logged as kOpKeyIndexed only from where
// the flags are trusted (this session's records).
TEST_F(PendingKeysTest, RemovesAndIndexedPutsOfThisSessionAreLeftOut) {
  PendingKeys p(2);
  Op indexed{OpCode::kPut, "b-indexed-old", "v"};
  indexed.key_indexed = true;
  log(0, {indexed, {OpCode::kRemove, "c-removed", ""}, {OpCode::kPut, "a-new", "v"}});
  p.trust_flags_from(0, tail_[0]);  // the session starts here
  Op indexed_now{OpCode::kPut, "d-indexed-now", "v"};
  indexed_now.key_indexed = true;
  log(0, {indexed_now, {OpCode::kPut, "e-new", "v"}});
  ASSERT_TRUE(p.update(0, *logs_[0], limits_, 0, tail_[0]).ok());
  bool more = true;
  EXPECT_EQ(collect(p, "", true, "", 100, &more),
            (std::vector<std::string>{"a-new", "b-indexed-old", "e-new"}));
  EXPECT_FALSE(more);
}

TEST_F(PendingKeysTest, PlantedBugTrustingEveryFlagLeavesOutAKeyOfAnEarlierSession) {
  PendingKeys p(2);
  Op indexed{OpCode::kPut, "k", "v"};
  indexed.key_indexed = true;
  log(0, {indexed});
  p.trust_flags_from(0, tail_[0]);
  g_kv_planted_bugs.index_flag_of_any_session = true;
  const Status s = p.update(0, *logs_[0], limits_, 0, tail_[0]);
  g_kv_planted_bugs.index_flag_of_any_session = false;
  ASSERT_TRUE(s.ok());
  bool more = true;
  EXPECT_TRUE(collect(p, "", true, "", 100, &more).empty());
}

// A record that does not validate: an error naming it, what was read
// before it kept, and the next update reads from it again.
TEST_F(PendingKeysTest, ADamagedRecordFailsTheReadAndKeepsWhatCameBefore) {
  PendingKeys p(2);
  log(1, {{OpCode::kPut, "first", "v"}});
  const uint64_t damaged = tail_[1];
  log(1, {{OpCode::kPut, "second", "v"}});
  std::byte junk{0x5a};
  ASSERT_TRUE(logs_[1]->write(damaged + 48, &junk, 1).ok());
  const Status s = p.update(1, *logs_[1], limits_, 0, tail_[1]);
  EXPECT_EQ(s.code(), pm::Code::kCorruption);
  EXPECT_NE(s.message().find("record at " + std::to_string(damaged)), std::string::npos)
      << s.to_string();
  bool more = true;
  EXPECT_EQ(collect(p, "", true, "", 10, &more), std::vector<std::string>{"first"});
  EXPECT_FALSE(p.update(1, *logs_[1], limits_, 0, tail_[1]).ok());
}

}  // namespace
}  // namespace kv
