// Crash states of the version tree (kvstore/version_tree.h), explored with
// the harness's persistence model (sim_persist.h).
//
// A random workload (puts, deletes, snapshots held across commits, commits)
// runs on a tree with a small fanout, so that splits, root splits,
// compactions, node reuse and file growth happen every few operations. At
// every sync point the run builds crash images (every one when few, else
// the extremes and random picks) and opens each: it must recover to the last
// committed state, or, during a commit, to the committed one or the one being
// committed. Every eighth image starts a new session on what recovery left:
// crashed again during its recovery and its own commits (chained sessions).
// Fault runs fail the n-th sync (EIO; ENOSPC for growth) and check that the
// error comes back, nothing acknowledged is lost and the file reopens.
// Planted bugs (kvstore/planted_bugs.h) must each be caught.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "crash/sim_persist.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/version_tree.h"
#include "testutil/temp_dir.h"

namespace pm::crash {
namespace {

using kv::VersionTree;
using Model = std::map<std::string, std::string>;

bool env_is(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}
int scaled(int n) {
  if (env_is("PM_CRASH_LONG")) return n * 10;
  if (env_is("PM_CRASH_QUICK")) return std::max(1, n / 16);
  return n;
}

struct TreeCounts {
  uint64_t points = 0, states = 0, sessions = 0, faults = 0, failures = 0;
  std::vector<std::string> reports;
  void fail(const std::string& why) {
    failures++;
    if (reports.size() < 5) reports.push_back(why);
  }
};

kv::VersionTreeOptions small_tree() {
  kv::VersionTreeOptions o;
  o.key_max = 8;
  o.value_max = 32;
  o.fanout = 6;         // splits every few puts, a tree four or five levels deep
  o.initial_nodes = 8;  // and growth
  return o;
}

bool write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return f.good();
}

Result<Model> contents(const VersionTree& t) {
  Model m;
  Status s = t.scan(nullptr, {}, {}, 0, [&](std::string_view k, std::string_view v) {
    m.emplace(k, v);
    return true;
  });
  if (!s.ok()) return s;
  return m;
}

std::string describe(const Model& m) {
  std::string s = std::to_string(m.size()) + " keys {";
  int n = 0;
  for (const auto& [k, v] : m) {
    if (n++ == 6) return s + " ...}";
    s += " " + k + "=" + std::to_string(v.size()) + "B";
  }
  return s + " }";
}

// One session on one file: a workload whose crash states are all checked.
class Session {
 public:
  Session(UnitMode mode, uint64_t seed, int depth, TreeCounts* counts, bool stop_at_first)
      : mode_(mode), rng_(seed), pick_rng_(seed * 31 + 7), depth_(depth), counts_(counts),
        stop_at_first_(stop_at_first) {}

  // Creates the tree at `path` (or, with `image`, recovers the file that
  // holds it, which may be any of `recovering`) and runs `steps` steps.
  void run(const std::string& path, int steps, const std::vector<Model>* recovering) {
    path_ = path;
    counts_->sessions++;
    auto opener = [this](const std::string& p) -> Result<std::unique_ptr<Persist>> {
      Result<std::unique_ptr<Persist>> real = open_pmem_file(p);
      if (!real.ok()) return real.status();
      const std::vector<std::byte>* durable = recovering_image_ ? &*recovering_image_ : nullptr;
      auto sim = std::make_unique<SimPersist>(
          std::move(*real), mode_, [this](SimPersist& sp, const std::string& point) {
            on_point(sp, point);
          },
          p, durable);
      if (fail_at_ != 0) sim->fail_at(fail_at_);
      return std::unique_ptr<Persist>(std::move(sim));
    };
    Result<std::unique_ptr<VersionTree>> t = Status::not_found("");
    if (recovering == nullptr) {
      // A create is not acknowledged before it returns: nothing to keep.
      explore_ = false;
      t = VersionTree::create(path, small_tree(), opener);
      explore_ = explore_after_create_;
      if (!t.ok() && fail_at_ != 0) {
        create_failed_ = true;
        return;
      }
    } else {
      allowed_override_ = *recovering;
      t = VersionTree::open(path, opener);
    }
    if (!t.ok()) return fail("open: " + t.status().to_string());
    tree_ = std::move(*t);
    Result<Model> m = contents(*tree_);
    if (!m.ok()) {
      fail("scan: " + m.status().to_string());
    } else if (!allowed_override_.empty() && !allowed(*m, allowed_override_)) {
      fail("recovered " + describe(*m));
    } else {
      allowed_override_.clear();
      committed_ = working_ = *m;
      for (int i = 0; i < steps && !stopped(); i++) step();
    }
    snaps_.clear();
    tree_.reset();
  }

  void set_fail_at(uint64_t n) { fail_at_ = n; }
  void set_image(std::vector<std::byte> image) { recovering_image_ = std::move(image); }
  bool failed_commit() const { return failed_commit_; }
  const Model& committed() const { return committed_; }
  const Model& working() const { return working_; }
  void set_explore(bool on) { explore_ = explore_after_create_ = on; }
  bool create_failed() const { return create_failed_; }

 private:
  struct Snap {
    VersionTree::Snapshot snap;
    Model model;
  };

  bool stopped() const { return (stop_at_first_ && counts_->failures > 0) || failed_commit_; }
  void fail(const std::string& why) {
    counts_->fail(std::string(mode_ == UnitMode::kPmemLines ? "pmem" : "msync") + " depth " +
                  std::to_string(depth_) + " point " + std::to_string(counts_->points) + ": " +
                  why);
  }
  static bool allowed(const Model& m, const std::vector<Model>& ok) {
    return std::find(ok.begin(), ok.end(), m) != ok.end();
  }
  std::vector<Model> allowed_now() const {
    if (!allowed_override_.empty()) return allowed_override_;
    if (in_commit_) return {committed_, working_};
    return {committed_};
  }

  void step() {
    if (++steps_ % 25 == 0) {  // the working state in order (the DRAM indexes)
      Result<Model> m = contents(*tree_);
      if (!m.ok() || *m != working_) fail("working scan reads " + describe(m.ok() ? *m : Model{}));
    }
    const uint64_t r = rng_() % 100;
    const std::string key = "k" + std::to_string(rng_() % 150);
    if (r < 55) {
      const std::string v(rng_() % 33, static_cast<char>('a' + rng_() % 26));
      Status s = tree_->put(key, v);
      if (s.ok()) {
        working_[key] = v;
      } else if (s.code() != Code::kNoSpace || fail_at_ == 0) {
        fail("put: " + s.to_string());
      }
      Result<std::string> got = tree_->get(key);  // the working state's point read
      auto it = working_.find(key);
      if (got.ok() != (it != working_.end()) || (got.ok() && *got != it->second)) {
        fail("get " + key + " after a put: " + got.status().to_string());
      }
    } else if (r < 78) {
      Status s = tree_->del(key);
      if (s.ok() != (working_.erase(key) > 0)) fail("del " + key + ": " + s.to_string());
      if (tree_->get(key).ok()) fail("get " + key + " after its delete finds it");
    } else if (r < 86) {
      if (snaps_.size() < 2 && rng_() % 2 == 0) {
        snaps_.push_back({tree_->snapshot(), committed_});
      } else if (!snaps_.empty()) {
        check_snapshot(snaps_.front());
        snaps_.erase(snaps_.begin());
      }
    } else {
      in_commit_ = true;
      Status s = tree_->commit();
      in_commit_ = false;
      if (s.ok()) {
        committed_ = working_;
      } else if (fail_at_ != 0) {
        failed_commit_ = true;
      } else {
        fail("commit: " + s.to_string());
      }
    }
  }

  void check_snapshot(const Snap& s) {
    Model m;
    Status st = tree_->scan(&s.snap, {}, {}, 0, [&](std::string_view k, std::string_view v) {
      m.emplace(k, v);
      return true;
    });
    if (!st.ok() || m != s.model) {
      fail("snapshot " + std::to_string(s.snap.version()) + " reads " + describe(m));
    }
  }

  void on_point(SimPersist& sp, const std::string& point) {
    if (point == "flush" || !explore_) return;
    counts_->points++;
    const std::vector<size_t> counts = sp.candidate_counts();
    std::vector<std::vector<size_t>> choices;
    uint64_t product = 1;
    for (size_t c : counts) {
      product = product > 64 ? product : product * (c + 1);
    }
    if (product <= 64) {
      for (uint64_t k = 0; k < product; k++) {
        std::vector<size_t> ch(counts.size());
        uint64_t rest = k;
        for (size_t i = 0; i < counts.size(); i++) {
          ch[i] = rest % (counts[i] + 1);
          rest /= counts[i] + 1;
        }
        choices.push_back(std::move(ch));
      }
    } else {
      choices.push_back(std::vector<size_t>(counts.size(), 0));
      choices.push_back(counts);
      for (int n = 0; n < 6; n++) {
        std::vector<size_t> ch(counts.size());
        for (size_t i = 0; i < counts.size(); i++) ch[i] = pick_rng_() % (counts[i] + 1);
        choices.push_back(std::move(ch));
      }
    }
    const std::vector<Model> ok = allowed_now();
    for (const auto& ch : choices) {
      if (stopped()) return;
      check_image(sp.image(ch, &pick_rng_), ok);
    }
  }

  void check_image(std::vector<std::byte> image, const std::vector<Model>& ok) {
    counts_->states++;
    const std::string img = path_ + ".img" + std::to_string(depth_);
    if (!write_file(img, image)) return fail("cannot write " + img);
    if (depth_ < 2 && counts_->states % 8 == 0) {  // a new session on what recovery left
      Session next(mode_, pick_rng_(), depth_ + 1, counts_, stop_at_first_);
      next.set_image(std::move(image));
      next.run(img, 12, &ok);
      return;
    }
    Result<std::unique_ptr<VersionTree>> t = VersionTree::open(img);
    if (!t.ok()) return fail("image does not open: " + t.status().to_string());
    Result<Model> m = contents(**t);
    if (!m.ok()) return fail("image scan: " + m.status().to_string());
    if (!allowed(*m, ok)) {
      return fail("image recovers " + describe(*m) + "; allowed " + describe(ok.front()) +
                  (ok.size() > 1 ? " or " + describe(ok.back()) : ""));
    }
    // It takes writes.
    Status s = (*t)->put("probe", "x");
    if (s.ok()) s = (*t)->commit();
    if (!s.ok()) fail("recovered image refuses a write: " + s.to_string());
  }

  UnitMode mode_;
  std::mt19937_64 rng_, pick_rng_;
  int depth_;
  TreeCounts* counts_;
  bool stop_at_first_;
  bool explore_ = true, explore_after_create_ = true;
  bool create_failed_ = false;
  std::string path_;
  std::unique_ptr<VersionTree> tree_;
  std::optional<std::vector<std::byte>> recovering_image_;
  std::vector<Model> allowed_override_;
  Model committed_, working_;
  bool in_commit_ = false;
  bool failed_commit_ = false;
  uint64_t fail_at_ = 0;
  uint64_t steps_ = 0;
  std::vector<Snap> snaps_;
};

TreeCounts power_failures(UnitMode mode, uint64_t seed, int steps, bool stop_at_first = false) {
  pm::test::TempDir dir;
  TreeCounts counts;
  Session s(mode, seed, 0, &counts, stop_at_first);
  s.run(dir.file("t.tree"), steps, nullptr);
  return counts;
}

void expect_clean(const TreeCounts& c, const char* what) {
  std::string msg;
  for (const auto& r : c.reports) msg += "  " + r + "\n";
  EXPECT_EQ(c.failures, 0u) << what << ":\n" << msg;
  printf("%s: %llu points, %llu crash states, %llu sessions\n", what,
         static_cast<unsigned long long>(c.points), static_cast<unsigned long long>(c.states),
         static_cast<unsigned long long>(c.sessions));
}

TEST(TreeCrashTest, PowerFailuresAtEverySyncPointOnPmem) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    expect_clean(power_failures(UnitMode::kPmemLines, seed, scaled(400)), "pmem lines");
  }
}

TEST(TreeCrashTest, PowerFailuresAtEverySyncPointOffPmem) {
  for (uint64_t seed = 11; seed <= 12; seed++) {
    expect_clean(power_failures(UnitMode::kMsyncPages, seed, scaled(400)), "msync pages");
  }
}

// The n-th sync fails: the error comes back, and what was acknowledged
// (committed) is what the file holds after a reopen, or, for a failed
// commit, either that or the state it was committing.
TEST(TreeCrashTest, FailedSyncsLoseNothingAcknowledged) {
  TreeCounts counts;
  const int runs = scaled(120);
  for (int n = 1; n <= runs; n++) {
    pm::test::TempDir dir;
    const std::string path = dir.file("t.tree");
    Session s(UnitMode::kMsyncPages, 100 + n, 0, &counts, false);
    s.set_explore(false);
    s.set_fail_at(static_cast<uint64_t>(n));
    s.run(path, 300, nullptr);
    counts.faults++;
    if (s.create_failed()) {
      EXPECT_NE(access(path.c_str(), F_OK), 0) << "a failed create left " << path;
      continue;
    }
    Result<std::unique_ptr<VersionTree>> t = VersionTree::open(path);
    ASSERT_TRUE(t.ok()) << "fault at sync " << n << ": " << t.status().to_string();
    Result<Model> m = contents(**t);
    ASSERT_TRUE(m.ok());
    if (s.failed_commit()) {
      EXPECT_TRUE(*m == s.committed() || *m == s.working()) << "fault at sync " << n;
    } else {
      EXPECT_EQ(*m, s.committed()) << "fault at sync " << n;
    }
    ASSERT_TRUE((*t)->put("probe", "x").ok());
    ASSERT_TRUE((*t)->commit().ok());
  }
  expect_clean(counts, "faults");
}

struct PlantedBug {
  const char* name;
  bool kv::KvPlantedBugs::*flag;
};

class TreePlantedBugTest : public ::testing::TestWithParam<PlantedBug> {};

TEST_P(TreePlantedBugTest, IsCaught) {
  // Release stage only, as SelfTest: the sanitizer stages look for memory errors.
  if (env_is("PM_CRASH_QUICK")) GTEST_SKIP() << "planted bugs run in the release stage";
  kv::g_kv_planted_bugs.*(GetParam().flag) = true;
  TreeCounts c;
  for (uint64_t seed = 1; seed <= 4 && c.failures == 0; seed++) {
    TreeCounts one = power_failures(UnitMode::kPmemLines, seed, 400, /*stop_at_first=*/true);
    c.failures += one.failures;
    c.reports.insert(c.reports.end(), one.reports.begin(), one.reports.end());
  }
  kv::g_kv_planted_bugs = kv::KvPlantedBugs{};
  EXPECT_GT(c.failures, 0u) << GetParam().name << " went unnoticed";
  if (!c.reports.empty()) printf("%s caught: %s\n", GetParam().name, c.reports[0].c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Bugs, TreePlantedBugTest,
    ::testing::Values(PlantedBug{"split_in_place", &kv::KvPlantedBugs::tree_split_in_place},
                      PlantedBug{"commit_before_persist",
                                 &kv::KvPlantedBugs::tree_commit_before_persist},
                      PlantedBug{"reuse_uncommitted_end",
                                 &kv::KvPlantedBugs::tree_reuse_uncommitted_end},
                      PlantedBug{"unaligned_slots", &kv::KvPlantedBugs::tree_unaligned_slots},
                      PlantedBug{"root_kept_if_unchanged",
                                 &kv::KvPlantedBugs::tree_root_kept_if_unchanged}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pm::crash
