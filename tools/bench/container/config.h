// Config: the sizes, repetitions and time budgets of one `pm bench container`
// run, chosen once from the command line (full size or --smoke).
#ifndef TOOLS_BENCH_CONTAINER_CONFIG_H_
#define TOOLS_BENCH_CONTAINER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm::bench {

struct Config {
  // Directories to run the whole suite in, one after the other.
  std::vector<std::string> dirs;
  bool smoke = false;

  // (i) commit latency: iterations per case (fewer if case_budget_s runs out).
  int small_iterations = 2000;  // 8-byte change, 1 and 10 pages
  int large_iterations = 300;   // 100 and 1000 pages
  int warmup_iterations = 10;
  double case_budget_s = 2;
  // commit() with nothing and with one 8-byte change dirty, against heap size.
  std::vector<uint64_t> scaling_heap_bytes = {32ull << 20, 256ull << 20, 1ull << 30, 4ull << 30};
  int scaling_iterations = 100;

  // (ii) hash map: keys inserted, then as many uniform random gets.
  uint64_t keys = 1'000'000;
  // Per-insert-commit runs stop after this long (on pmem, on msync) and
  // report the rate over the inserts that ran; the rest of the keys are then
  // filled in batches (untimed, for at most fill_budget_s) so that gets see a
  // full map. Batched runs stop after fill_budget_s.
  double insert_budget_pmem_s = 10;
  double insert_budget_msync_s = 5;
  double fill_budget_pmem_s = 60;
  double fill_budget_msync_s = 20;
  double insert_budget_s(bool is_pmem) const {
    return is_pmem ? insert_budget_pmem_s : insert_budget_msync_s;
  }
  double fill_budget_s(bool is_pmem) const {
    return is_pmem ? fill_budget_pmem_s : fill_budget_msync_s;
  }

  // (v) working set: updates on this many pages, committed every N of them
  // (the curve), each cell this long, repeated.
  uint64_t working_set_pages = 1000;
  std::vector<uint64_t> working_set_batches = {1, 10, 100, 1000, 10'000, 100'000, 1'000'000};
  double working_set_cell_s = 0.5;
  int working_set_repeats = 3;

  // (iii) open time of a container this big (4 GiB, or 100 MiB for --smoke).
  uint64_t big_bytes = 4ull << 30;
  int open_repetitions = 5;

  // Sizes of --smoke: enough to run every code path in seconds.
  static Config smoke_sized() {
    Config c;
    c.smoke = true;
    c.small_iterations = 30;
    c.large_iterations = 10;
    c.warmup_iterations = 3;
    c.case_budget_s = 0.5;
    c.scaling_heap_bytes = {16ull << 20, 64ull << 20};
    c.scaling_iterations = 10;
    c.keys = 2000;
    c.insert_budget_pmem_s = 1;
    c.insert_budget_msync_s = 1;
    c.fill_budget_pmem_s = 10;
    c.fill_budget_msync_s = 10;
    c.big_bytes = 100ull << 20;
    c.working_set_pages = 100;
    c.working_set_batches = {1, 100, 10'000};
    c.working_set_cell_s = 0.05;
    c.working_set_repeats = 1;
    c.open_repetitions = 3;
    return c;
  }
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_CONFIG_H_
