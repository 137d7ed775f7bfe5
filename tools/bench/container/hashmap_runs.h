// Hash map runs: one engine variant of the hash map suite, from an empty file
// to timed inserts, an untimed fill to the full key count, timed gets and the
// DRAM measurements, and removal of the file.
#ifndef TOOLS_BENCH_CONTAINER_HASHMAP_RUNS_H_
#define TOOLS_BENCH_CONTAINER_HASHMAP_RUNS_H_

#include <cstdint>
#include <string>

#include "bench/container/config.h"
#include "pm/options.h"
#include "pm/status.h"

namespace pm::bench {

struct LibpmVariant {
  std::string label;
  std::string file_tag;  // part of the container's file name
  TrackerKind tracker;
  uint64_t commit_every;  // inserts per commit()
  bool release_after_commit;
  uint64_t uffd_chunk_mode_above = 0;  // Options::uffd_chunk_mode_above
};

struct VariantResult {
  std::string label;
  uint64_t timed_inserts = 0;  // inserts in the timed phase
  double insert_seconds = 0;
  double commit_seconds = 0;  // part of insert_seconds spent in commit(); libpm only
  double budget_s = 0;        // time budget of the timed phase
  bool capped = false;        // the timed phase stopped at its time budget
  uint64_t keys_in_map = 0;   // after the fill phase; gets draw from these
  uint64_t gets = 0;
  double get_seconds = 0;
  // DRAM, libpm only.
  bool has_memory = false;
  uint64_t heap_used = 0;
  uint64_t view_anon = 0;           // private pages of the working view after the workload
  uint64_t view_anon_released = 0;  // ... after release_clean()
  uint64_t process_anon_delta = 0;  // RssAnon growth of the process over the run

  double insert_rate() const {
    return insert_seconds > 0 ? double(timed_inserts) / insert_seconds : 0;
  }
  double commit_us_per_insert() const {
    return timed_inserts > 0 ? commit_seconds * 1e6 / double(timed_inserts) : 0;
  }
  double get_rate() const { return get_seconds > 0 ? double(gets) / get_seconds : 0; }
};

// Errors: from Container and /proc; kCorruption when a get misses or returns
// a wrong value, or check() reports a heap problem.
// Time budgets of the phases: a per-insert-commit timed phase stops after
// `insert_s`, a batched one and the untimed fill after `fill_s`.
struct Budgets {
  double insert_s;
  double fill_s;
};

Result<VariantResult> run_libpm(const std::string& dir, const LibpmVariant& v, const Config& cfg,
                                Budgets budgets);

// One libpmemobj transaction per insert. Errors: kIOError from libpmemobj,
// kCorruption when a get misses or returns a wrong value.
Result<VariantResult> run_pmemobj(const std::string& dir, const Config& cfg, Budgets budgets);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_HASHMAP_RUNS_H_
