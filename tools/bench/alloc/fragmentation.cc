#include "bench/alloc/fragmentation.h"

#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/alloc/alloc_engine_boost.h"
#include "bench/alloc/alloc_engine_glibc.h"
#include "bench/alloc/alloc_engine_libpm.h"
#include "bench/common/child_process.h"
#include "bench/alloc/churn.h"

namespace pm::bench {

namespace {

constexpr double kTarget = 1.15;

struct PatternRun {
  Pattern pattern;
  ChurnOutcome libpm, glibc, boost;
  int boost_grows = 0;
};

std::string bench_file(const DirInfo& dir, const char* name) {
  return fmt::format("{}/alloc-{}-{}", dir.dir, ::getpid(), name);
}

Result<ChurnOutcome> run_libpm(const DirInfo& dir, const Pattern& p, const AllocConfig& cfg) {
  Churn churn(p, cfg.live_bytes, cfg.churn_factor, cfg.seed);
  Result<std::unique_ptr<LibpmAllocEngine>> e =
      LibpmAllocEngine::create(bench_file(dir, "frag.pm"));
  if (!e.ok()) return e.status();
  return churn.run(**e);
}

// In a child, so that RSS growth is this pattern's alone and the heap it
// leaves behind does not feed the next engine.
Result<ChurnOutcome> run_glibc(const Pattern& p, const AllocConfig& cfg) {
  return run_in_child<ChurnOutcome>([&]() -> Result<ChurnOutcome> {
    Churn churn(p, cfg.live_bytes, cfg.churn_factor, cfg.seed);
    Result<std::unique_ptr<GlibcAllocEngine>> e = GlibcAllocEngine::create();
    if (!e.ok()) return e.status();
    return churn.run(**e);
  });
}

// The file starts at twice the live bytes (sparse: untouched pages cost
// nothing) and doubles whenever an allocation fails.
Result<ChurnOutcome> run_boost(const DirInfo& dir, const Pattern& p, const AllocConfig& cfg,
                               int* grows) {
  Churn churn(p, cfg.live_bytes, cfg.churn_factor, cfg.seed);
  Result<std::unique_ptr<BoostAllocEngine>> e =
      BoostAllocEngine::create(bench_file(dir, "frag.boost"), 2 * cfg.live_bytes);
  if (!e.ok()) return e.status();
  Result<ChurnOutcome> r = churn.run(**e);
  *grows = (*e)->grows();
  return r;
}

Result<PatternRun> run_pattern(const DirInfo& dir, const Pattern& p, const AllocConfig& cfg,
                               const Progress& progress) {
  PatternRun run{p, {}, {}, {}, 0};
  progress.step(fmt::format("fragmentation {}: libpm", p.name));
  Result<ChurnOutcome> r = run_libpm(dir, p, cfg);
  if (!r.ok()) return r.status().with_context(p.name + " libpm");
  run.libpm = *r;
  progress.step(fmt::format("fragmentation {}: glibc malloc", p.name));
  r = run_glibc(p, cfg);
  if (!r.ok()) return r.status().with_context(p.name + " glibc");
  run.glibc = *r;
  progress.step(fmt::format("fragmentation {}: boost managed_mapped_file", p.name));
  r = run_boost(dir, p, cfg, &run.boost_grows);
  if (!r.ok()) return r.status().with_context(p.name + " boost");
  run.boost = *r;
  return run;
}

// "60 -> 70 B", "1 -> 10 KiB".
std::string sizes_text(const Pattern& p) {
  if (p.from % 1024 == 0 && p.to % 1024 == 0) {
    return fmt::format("{} -> {} KiB", p.from / 1024, p.to / 1024);
  }
  return fmt::format("{} -> {} B", p.from, p.to);
}

Cell per_live(uint64_t bytes, const ChurnOutcome& o) {
  return ratio(double(bytes), double(o.live_bytes));
}

Table fragmentation_table(const std::vector<PatternRun>& runs, const AllocConfig& cfg) {
  Table t;
  t.title = fmt::format(
      "(i) fragmentation: bytes in use / live bytes after filling to {} MiB live and replacing "
      "{:g}x that",
      cfg.live_bytes >> 20, cfg.churn_factor);
  t.columns = {{"pattern", "pattern"},
               {"sizes", "sizes"},
               {"live MiB", "live_mib", Format::kMiB},
               {"first size left", "first_size_left"},
               {"libpm footprint", "libpm_footprint", Format::kRatio},
               {"libpm heap", "libpm_heap", Format::kRatio},
               {"libpm DRAM", "libpm_dram", Format::kRatio},
               {"glibc RSS", "glibc_rss", Format::kRatio},
               {"glibc trimmed", "glibc_rss_trimmed", Format::kRatio},
               {"boost used", "boost_used", Format::kRatio},
               {"boost file", "boost_file", Format::kRatio},
               {"seconds libpm/glibc/boost", "seconds"}};
  for (const PatternRun& r : runs) {
    t.add_row(
        {r.pattern.name, sizes_text(r.pattern), double(r.libpm.live_bytes) / (1 << 20),
         fmt::format("{:.1f}%", 100.0 * double(r.libpm.old_objects) /
                                    double(std::max<uint64_t>(r.libpm.objects, 1))),
         per_live(r.libpm.usage.in_use, r.libpm), per_live(r.libpm.usage.other, r.libpm),
         per_live(r.libpm.usage.dram, r.libpm), per_live(r.glibc.usage.in_use, r.glibc),
         per_live(r.glibc.usage.other, r.glibc), per_live(r.boost.usage.in_use, r.boost),
         per_live(r.boost.usage.other, r.boost),
         fmt::format("{:.1f}/{:.1f}/{:.1f}", r.libpm.seconds, r.glibc.seconds, r.boost.seconds)});
  }
  t.notes = {
      "every engine sees the same sizes and frees the same random objects (same seed); each new "
      "object is written once per 4 KiB page; 'first size left' = share of live objects still of "
      "the fill size",
      "libpm footprint = ContainerInfo::footprint_bytes (heap pages not free: blocks, partly used "
      "granule pages, metadata in use; free page runs between them do not count); libpm heap = "
      "heap_bytes (the container grows by at least doubling); libpm DRAM = private copies in the "
      "working view (smaps Anonymous: pages written during the pattern, less the free pages the "
      "heap dropped; no commit runs during the pattern)",
      "glibc RSS = growth of RssAnon of a forked child running only the pattern, WITHOUT "
      "malloc_trim; glibc trimmed = the same after malloc_trim(0)",
      "boost used = get_size() - get_free_memory() of managed_mapped_file (free holes between "
      "blocks do not count: not a fragmentation measure); boost file = the file's allocated "
      "pages on tmpfs (st_blocks: pages ever touched, the memory the file holds)"};
  for (const PatternRun& r : runs) {
    if (r.boost_grows > 0) {
      t.notes.push_back(fmt::format("{}: boost's file grew {} time(s) (started at 2x live)",
                                    r.pattern.name, r.boost_grows));
    }
  }
  return t;
}

std::vector<Target> fragmentation_targets(const std::vector<PatternRun>& runs) {
  std::vector<Target> targets;
  for (const PatternRun& r : runs) {
    Target t = Target::at_most_of(
        fmt::format("{} {}: libpm footprint / live", r.pattern.name, sizes_text(r.pattern)),
        kTarget, "x");
    t.available = r.libpm.live_bytes > 0;
    if (t.available) t.measured = double(r.libpm.usage.in_use) / double(r.libpm.live_bytes);
    targets.push_back(std::move(t));
  }
  return targets;
}

}  // namespace

Result<SuiteResult> run_fragmentation(const DirInfo& dir, const AllocConfig& cfg,
                                      const Progress& progress) {
  std::vector<PatternRun> runs;
  for (const Pattern& p : nibble_patterns()) {
    Result<PatternRun> r = run_pattern(dir, p, cfg, progress);
    if (!r.ok()) return r.status();
    runs.push_back(*r);
  }
  SuiteResult out;
  out.tables.push_back(fragmentation_table(runs, cfg));
  out.targets = fragmentation_targets(runs);
  return out;
}

}  // namespace pm::bench
