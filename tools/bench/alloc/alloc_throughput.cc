#include "bench/alloc/alloc_throughput.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/alloc/alloc_engine_glibc.h"
#include "bench/alloc/alloc_engine_libpm.h"
#include "bench/common/workload.h"

namespace pm::bench {

namespace {

constexpr size_t kSizeTableLength = 4096;

// Log-uniform sizes in [16, 1024]: as many objects of 16-32 B as of
// 512-1024 B. Drawn before timing so the loop spends nothing on them.
std::vector<uint32_t> size_table(uint64_t seed) {
  Rng rng(seed);
  std::vector<uint32_t> sizes(kSizeTableLength);
  for (uint32_t& s : sizes) {
    double u = double(rng.next() >> 11) / double(1ull << 53);
    s = std::min<uint32_t>(1024, static_cast<uint32_t>(16.0 * std::pow(64.0, u)));
  }
  return sizes;
}

// What the threads of one measurement share.
struct Shared {
  AllocEngine* engine;
  const AllocConfig* cfg;
  uint64_t commit_every;  // 0: never
  std::atomic<uint64_t> calls{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
};

// Fills the window (untimed), waits for the start, does the timed free+alloc
// rounds, records when they ended, then frees the window (untimed).
Status worker(Shared& sh, uint64_t seed, uint64_t* end_ns) {
  AllocEngine& e = *sh.engine;
  const std::vector<uint32_t> sizes = size_table(seed);
  std::vector<uint64_t> slots;
  Status s;
  for (uint64_t i = 0; i < sh.cfg->window && s.ok(); i++) {
    Result<uint64_t> h = e.alloc(sizes[i % kSizeTableLength]);
    s = h.ok() ? Status() : h.status();
    if (h.ok()) slots.push_back(*h);
  }
  sh.ready.fetch_add(1);
  while (!sh.go.load(std::memory_order_acquire)) std::this_thread::yield();
  for (uint64_t r = 0; r < sh.cfg->rounds && s.ok(); r++) {
    uint64_t& slot = slots[r % slots.size()];
    s = e.free(slot);
    if (!s.ok()) break;
    slot = 0;  // freed: the cleanup below must not free it again
    Result<uint64_t> h = e.alloc(sizes[r % kSizeTableLength]);
    if (!h.ok()) {
      s = h.status();
      break;
    }
    slot = *h;
    if (sh.commit_every > 0 &&
        (sh.calls.fetch_add(2, std::memory_order_relaxed) + 2) % sh.commit_every == 0) {
      s = e.commit();
    }
  }
  *end_ns = now_ns();
  for (uint64_t h : slots) {
    Status f = e.free(h);
    if (s.ok()) s = f;
  }
  return s;
}

// alloc and free calls per second of `threads` threads, timed from the common
// start to the last thread's end.
Result<double> measure_once(AllocEngine& e, int threads, const AllocConfig& cfg,
                            uint64_t commit_every) {
  Shared sh{&e, &cfg, commit_every};
  std::vector<Status> results(static_cast<size_t>(threads));
  std::vector<uint64_t> ends(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < results.size(); t++) {
    pool.emplace_back([&, t] { results[t] = worker(sh, cfg.seed + t, &ends[t]); });
  }
  while (sh.ready.load() < threads) std::this_thread::yield();
  const uint64_t start = now_ns();
  sh.go.store(true, std::memory_order_release);
  for (std::thread& t : pool) t.join();
  for (const Status& s : results) PM_TRY(s);
  uint64_t end = *std::max_element(ends.begin(), ends.end());
  double calls = 2.0 * double(cfg.rounds) * threads;
  return calls / (double(end - start) / 1e9);
}

// The median over cfg.repetitions; commits (untimed) after each run so the
// next starts from a committed container.
Result<double> measure(AllocEngine& e, int threads, const AllocConfig& cfg, uint64_t commit_every) {
  std::vector<double> rates;
  for (int i = 0; i < cfg.repetitions; i++) {
    Result<double> r = measure_once(e, threads, cfg, commit_every);
    if (!r.ok()) return r.status();
    PM_TRY(e.commit());
    rates.push_back(*r);
  }
  return median(rates);
}

struct Row {
  int threads;
  double glibc, libpm, libpm_commit;
};

Result<Row> measure_row(const DirInfo& dir, int threads, const AllocConfig& cfg,
                        const Progress& progress) {
  Row row{threads, 0, 0, 0};
  progress.step(fmt::format("throughput, {} thread(s): glibc malloc", threads));
  Result<std::unique_ptr<GlibcAllocEngine>> glibc = GlibcAllocEngine::create();
  if (!glibc.ok()) return glibc.status();
  Result<double> r = measure(**glibc, threads, cfg, 0);
  if (!r.ok()) return r.status().with_context("glibc");
  row.glibc = *r;
  const std::string path = fmt::format("{}/alloc-{}-tput.pm", dir.dir, ::getpid());
  for (uint64_t every : {uint64_t{0}, cfg.commit_every}) {
    progress.step(fmt::format("throughput, {} thread(s): libpm{}", threads,
                              every ? fmt::format(", commit every {}", every) : ""));
    Result<std::unique_ptr<LibpmAllocEngine>> libpm = LibpmAllocEngine::create(path);
    if (!libpm.ok()) return libpm.status();
    r = measure(**libpm, threads, cfg, every);
    if (!r.ok()) return r.status().with_context("libpm");
    (every ? row.libpm_commit : row.libpm) = *r;
  }
  return row;
}

Table throughput_table(const std::vector<Row>& rows, const AllocConfig& cfg) {
  Table t;
  t.title = fmt::format(
      "(ii) alloc/free throughput: per thread {} live objects of 16..1024 B (log-uniform), {} "
      "free+alloc pairs; median of {}",
      cfg.window, cfg.rounds, cfg.repetitions);
  const std::string commit_title = fmt::format("libpm, commit/{}", cfg.commit_every);
  t.columns = {{"threads", "threads", Format::kCount},
               {"glibc calls/s", "glibc_calls_per_s", Format::kRate},
               {"libpm calls/s", "libpm_calls_per_s", Format::kRate},
               {"libpm / glibc", "libpm_vs_glibc", Format::kRatio},
               {commit_title + " calls/s", "libpm_commit_calls_per_s", Format::kRate},
               {"/ glibc", "libpm_commit_vs_glibc", Format::kRatio}};
  for (const Row& r : rows) {
    t.add_row({int64_t{r.threads}, r.glibc, r.libpm, ratio(r.libpm, r.glibc), r.libpm_commit,
               ratio(r.libpm_commit, r.glibc)});
  }
  t.notes = {
      "calls = alloc() and free() calls (a free+alloc pair counts 2); threads start together, "
      "time runs to the last thread's end",
      "libpm: threads call Container::alloc/free directly, objects are not written; 'libpm' has "
      "no commit inside the timed loop (one untimed after it)",
      fmt::format("'{}': a commit every {} calls counted over all threads, inside the timed loop",
                  commit_title, cfg.commit_every),
      "other load on the machine's cores shows up here as noise"};
  return t;
}

}  // namespace

Result<SuiteResult> run_alloc_throughput(const DirInfo& dir, const AllocConfig& cfg,
                                         const Progress& progress) {
  std::vector<Row> rows;
  for (int threads : cfg.threads) {
    Result<Row> r = measure_row(dir, threads, cfg, progress);
    if (!r.ok()) return r.status();
    rows.push_back(*r);
  }
  SuiteResult out;
  out.tables.push_back(throughput_table(rows, cfg));
  return out;
}

}  // namespace pm::bench
