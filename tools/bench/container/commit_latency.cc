#include "bench/container/commit_latency.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <memory>

#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"
#include "pm/container.h"

namespace pm::bench {

namespace {

constexpr uint64_t kPage = 4096;
// The writes of a case spread evenly over an object of this many pages, so
// that N dirty pages are N separate runs for the tracker and the journal.
constexpr uint64_t kObjectPages = 4096;
constexpr uint64_t kHeapBytes = kObjectPages * kPage + (16ull << 20);

struct Case {
  const char* label;
  uint64_t pages;
  uint64_t word_offset;  // where in each page the 8-byte write goes
  bool large;            // uses Config::large_iterations
};
constexpr std::array<Case, 6> kCases = {{{"nothing dirty", 0, 0, false},
                                         {"8-byte change", 1, 64, false},
                                         {"1 page", 1, 2048, false},
                                         {"10 pages", 10, 2048, false},
                                         {"100 pages", 100, 2048, true},
                                         {"1000 pages", 1000, 2048, true}}};
constexpr size_t kSmallCase = 1;  // the 8-byte change: the target's row
constexpr size_t kPagesCase = 5;  // 1000 pages: the per-page target's row
constexpr std::array<TrackerKind, 3> kTrackers = {TrackerKind::kUffd, TrackerKind::kMprotect,
                                                  TrackerKind::kHints};

struct Samples {
  std::vector<double> dirty_us, commit_us, total_us;
};

// Times `iterations` rounds of "write one word in each page, commit", after
// warm-up rounds that make the pages private copies (the steady state).
Result<Samples> measure_case(Container& c, std::byte* object, const Case& k, bool hints,
                             int iterations, const Config& cfg, uint64_t* stamp) {
  std::vector<uint64_t*> words;
  for (uint64_t j = 0; j < k.pages; j++) {
    words.push_back(
        reinterpret_cast<uint64_t*>(object + j * (kObjectPages / k.pages) * kPage + k.word_offset));
  }
  Samples s;
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(cfg.case_budget_s * 1e9);
  for (int it = -cfg.warmup_iterations; it < iterations; it++) {
    // A new value every round: commit must find every page changed.
    const uint64_t v = ++*stamp;
    uint64_t t0 = now_ns();
    for (uint64_t* w : words) {
      if (hints) c.will_write(w, sizeof *w);
      *w = v;
    }
    uint64_t t1 = now_ns();
    PM_TRY(c.commit());
    uint64_t t2 = now_ns();
    if (it < 0) continue;
    s.dirty_us.push_back(double(t1 - t0) / 1e3);
    s.commit_us.push_back(double(t2 - t1) / 1e3);
    s.total_us.push_back(double(t2 - t0) / 1e3);
    if (s.commit_us.size() >= 10 && t2 > deadline) break;
  }
  return s;
}

// All cases for one tracker, in one container.
Result<std::vector<Samples>> measure_tracker(const std::string& dir, TrackerKind kind,
                                             const Config& cfg) {
  ScopedFile file(fmt::format("{}/commit-{}.pm", dir, tracker_name(kind)));
  Options o;
  o.initial_size = kHeapBytes;
  o.max_size = 1ull << 30;
  o.tracker = kind;
  Result<std::unique_ptr<Container>> c = Container::create(file.path(), o);
  if (!c.ok()) return c.status();
  Result<void*> object = (*c)->alloc(kObjectPages * kPage);
  if (!object.ok()) return object.status();
  PM_TRY((*c)->commit());
  std::vector<Samples> out;
  uint64_t stamp = 0;
  for (const Case& k : kCases) {
    int n = k.large ? cfg.large_iterations : cfg.small_iterations;
    Result<Samples> s = measure_case(**c, static_cast<std::byte*>(*object), k,
                                     kind == TrackerKind::kHints, n, cfg, &stamp);
    if (!s.ok()) return s.status().with_context(k.label);
    out.push_back(std::move(*s));
  }
  return out;
}

Table make_table(const std::map<TrackerKind, std::vector<Samples>>& by_tracker, const Config& cfg) {
  Table t;
  t.title = "(i) commit latency: dirty = the stores (with tracker faults), commit = commit()";
  t.columns = {{"change", "change"},
               {"tracker", "tracker"},
               {"iters", "iterations", Format::kCount},
               {"dirty med us", "dirty_median_us", Format::kMicros},
               {"dirty p99 us", "dirty_p99_us", Format::kMicros},
               {"commit med us", "commit_median_us", Format::kMicros},
               {"commit p99 us", "commit_p99_us", Format::kMicros},
               {"total med us", "total_median_us", Format::kMicros},
               {"total vs uffd", "total_vs_uffd", Format::kRatio}};
  for (size_t k = 0; k < kCases.size(); k++) {
    auto uffd = by_tracker.find(TrackerKind::kUffd);
    double uffd_total = uffd == by_tracker.end() ? 0 : median(uffd->second[k].total_us);
    for (const auto& [kind, samples] : by_tracker) {
      const Samples& s = samples[k];
      double total = median(s.total_us);
      t.add_row({std::string(kCases[k].label), std::string(tracker_name(kind)),
                 static_cast<int64_t>(s.commit_us.size()), median(s.dirty_us),
                 percentile(s.dirty_us, 99), median(s.commit_us), percentile(s.commit_us, 99),
                 total, ratio(total, uffd_total)});
    }
  }
  t.notes.push_back(fmt::format(
      "heap {} MiB; writes spread over a {} MiB object; nothing dirty = commit() with no change "
      "(the tracker's fixed cost); the 8-byte change rewrites one word; N pages = one 8-byte "
      "write in each of N pages; {} warm-up rounds first (pages already private)",
      kHeapBytes >> 20, kObjectPages * kPage >> 20, cfg.warmup_iterations));
  return t;
}

struct ScalingSamples {
  std::vector<double> empty_us, small_us;
};

// commit() with nothing dirty, then after one 8-byte change, in a fresh
// container of `heap_bytes` whose heap is untouched apart from one block.
Result<ScalingSamples> measure_heap_size(const std::string& dir, uint64_t heap_bytes,
                                         TrackerKind kind, const Config& cfg) {
  ScopedFile file(fmt::format("{}/commit-scaling-{}.pm", dir, tracker_name(kind)));
  Options o;
  o.initial_size = heap_bytes;
  o.max_size = std::max<uint64_t>(1ull << 30, (2 * heap_bytes + (1ull << 30) - 1) >> 30 << 30);
  o.tracker = kind;
  Result<std::unique_ptr<Container>> c = Container::create(file.path(), o);
  if (!c.ok()) return c.status();
  Result<void*> word = (*c)->alloc(sizeof(uint64_t));
  if (!word.ok()) return word.status();
  PM_TRY((*c)->commit());
  auto* w = static_cast<uint64_t*>(*word);
  ScalingSamples s;
  for (int it = -cfg.warmup_iterations; it < cfg.scaling_iterations; it++) {
    uint64_t t0 = now_ns();
    PM_TRY((*c)->commit());
    uint64_t t1 = now_ns();
    (*c)->will_write(w, sizeof *w);
    *w = static_cast<uint64_t>(it + cfg.warmup_iterations + 1);
    uint64_t t2 = now_ns();
    PM_TRY((*c)->commit());
    uint64_t t3 = now_ns();
    if (it < 0) continue;
    s.empty_us.push_back(double(t1 - t0) / 1e3);
    s.small_us.push_back(double(t3 - t2) / 1e3);
  }
  return s;
}

Result<Table> heap_size_table(const std::string& dir, const Config& cfg, const Progress& progress,
                              bool with_uffd) {
  Table t;
  t.title = "(i-b) commit() cost against heap size (fresh container, one small block in use)";
  t.columns = {{"heap MiB", "heap_mib", Format::kCount},
               {"tracker", "tracker"},
               {"iters", "iterations", Format::kCount},
               {"empty commit med us", "empty_commit_median_us", Format::kMicros},
               {"8-byte commit med us", "small_commit_median_us", Format::kMicros},
               {"8-byte commit p99 us", "small_commit_p99_us", Format::kMicros}};
  for (uint64_t heap : cfg.scaling_heap_bytes) {
    for (TrackerKind kind : kTrackers) {
      if (kind == TrackerKind::kUffd && !with_uffd) continue;
      progress.step(
          fmt::format("commit cost, {} MiB heap, {} tracker", heap >> 20, tracker_name(kind)));
      Result<ScalingSamples> s = measure_heap_size(dir, heap, kind, cfg);
      if (!s.ok()) return s.status().with_context(fmt::format("{} MiB heap", heap >> 20));
      t.add_row({static_cast<int64_t>(heap >> 20), std::string(tracker_name(kind)),
                 static_cast<int64_t>(s->small_us.size()), median(s->empty_us), median(s->small_us),
                 percentile(s->small_us, 99)});
    }
  }
  return t;
}

}  // namespace

Result<SuiteResult> run_commit_latency(const DirInfo& dir, const Config& cfg,
                                       const Progress& progress) {
  std::map<TrackerKind, std::vector<Samples>> by_tracker;
  std::vector<std::string> skipped;
  for (TrackerKind kind : kTrackers) {
    progress.step(fmt::format("commit latency, {} tracker, in {}", tracker_name(kind), dir.dir));
    Result<std::vector<Samples>> r = measure_tracker(dir.dir, kind, cfg);
    // uffd needs Linux 6.7+: report its absence instead of failing the run.
    if (!r.ok() && kind == TrackerKind::kUffd) {
      skipped.push_back("uffd tracker unavailable: " + r.status().to_string());
      continue;
    }
    if (!r.ok()) {
      return r.status().with_context(std::string("commit latency, ") + tracker_name(kind));
    }
    by_tracker[kind] = std::move(*r);
  }
  SuiteResult res;
  res.tables.push_back(make_table(by_tracker, cfg));
  for (const std::string& s : skipped) res.tables.back().notes.push_back(s);
  Result<Table> scaling = heap_size_table(dir.dir, cfg, progress, skipped.empty());
  if (!scaling.ok()) return scaling.status().with_context("commit latency");
  res.tables.push_back(std::move(*scaling));
  Target t = Target::at_most_of("commit() after one 8-byte change, uffd, median", 10, "us");
  auto uffd = by_tracker.find(TrackerKind::kUffd);
  t.available = uffd != by_tracker.end();
  if (t.available) t.measured = median(uffd->second[kSmallCase].commit_us);
  if (!dir.is_pmem) t.not_applicable = "goal is for (emulated) pmem; this is msync";
  res.targets.push_back(t);
  // Issue 14: a first write to a page plus its share of the commit.
  Target page = Target::at_most_of(
      "first write + its share of commit(), per page, 1000 pages, uffd, median", 3, "us");
  page.available = t.available;
  if (page.available) page.measured = median(uffd->second[kPagesCase].total_us) / 1000;
  page.not_applicable = t.not_applicable;
  res.targets.push_back(page);
  return res;
}

}  // namespace pm::bench
