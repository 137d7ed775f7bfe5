#include "bench/container/open_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"
#include "pm/container.h"

namespace pm::bench {

namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr std::array<TrackerKind, 3> kTrackers = {TrackerKind::kUffd, TrackerKind::kMprotect,
                                                  TrackerKind::kHints};

struct OpenSamples {
  std::vector<double> open_ms, close_ms;
  std::string journal;  // state seen at the first open
};

// Creates the container with one commit and closes it. Returns seconds.
Result<double> create_big(const std::string& path, const Config& cfg) {
  Options o;
  o.initial_size = cfg.big_bytes;
  o.max_size = std::max(kGiB, (2 * cfg.big_bytes + kGiB - 1) / kGiB * kGiB);
  const uint64_t t0 = now_ns();
  Result<std::unique_ptr<Container>> c = Container::create(path, o);
  if (!c.ok()) return c.status();
  PM_TRY((*c)->commit());
  c->reset();
  return double(now_ns() - t0) / 1e9;
}

Result<OpenSamples> open_close(const std::string& path, TrackerKind kind, int reps) {
  OpenSamples s;
  Options o;
  o.tracker = kind;
  for (int i = 0; i < reps; i++) {
    const uint64_t t0 = now_ns();
    Result<std::unique_ptr<Container>> c = Container::open(path, o);
    if (!c.ok()) return c.status();
    const uint64_t t1 = now_ns();
    if (i == 0) s.journal = journal_state_name((*c)->info().journal);
    const uint64_t t2 = now_ns();
    c->reset();
    const uint64_t t3 = now_ns();
    s.open_ms.push_back(double(t1 - t0) / 1e6);
    s.close_ms.push_back(double(t3 - t2) / 1e6);
  }
  return s;
}

}  // namespace

Result<SuiteResult> run_open_time(const DirInfo& dir, const Config& cfg, const Progress& progress) {
  ScopedFile file(dir.dir + "/open-big.pm");
  progress.step(
      fmt::format("open time: creating a {} MiB container in {}", cfg.big_bytes >> 20, dir.dir));
  Result<double> created = create_big(file.path(), cfg);
  if (!created.ok()) return created.status().with_context("open time");
  Table t;
  t.title = fmt::format("(iii) open + close of a {} MiB container with a clean journal",
                        cfg.big_bytes >> 20);
  t.columns = {{"tracker", "tracker"},
               {"reps", "repetitions", Format::kCount},
               {"open med ms", "open_median_ms", Format::kMillis},
               {"open max ms", "open_max_ms", Format::kMillis},
               {"close med ms", "close_median_ms", Format::kMillis},
               {"journal", "journal"}};
  Target target = Target::at_most_of(
      fmt::format("open of a {} MiB container, uffd, median", cfg.big_bytes >> 20), 10, "ms");
  target.available = false;
  for (TrackerKind kind : kTrackers) {
    progress.step(fmt::format("open time, {} tracker", tracker_name(kind)));
    Result<OpenSamples> s = open_close(file.path(), kind, cfg.open_repetitions);
    if (!s.ok() && kind == TrackerKind::kUffd) {
      t.notes.push_back("uffd tracker unavailable: " + s.status().to_string());
      continue;
    }
    if (!s.ok()) return s.status().with_context(std::string("open time, ") + tracker_name(kind));
    t.add_row({std::string(tracker_name(kind)), static_cast<int64_t>(s->open_ms.size()),
               median(s->open_ms), percentile(s->open_ms, 100), median(s->close_ms), s->journal});
    if (kind == TrackerKind::kUffd) {
      target.available = true;
      target.measured = median(s->open_ms);
    }
  }
  t.notes.push_back(fmt::format("created (initial_size {} MiB, one commit, close) in {:.1f} ms",
                                cfg.big_bytes >> 20, *created * 1e3));
  if (cfg.big_bytes != 4 * kGiB) target.not_applicable = "goal is for 4 GiB";
  SuiteResult res;
  res.tables.push_back(std::move(t));
  res.targets.push_back(target);
  return res;
}

}  // namespace pm::bench
