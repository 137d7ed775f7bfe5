// AllocConfig: the sizes of one `pm bench alloc` run (full size or --smoke):
// the fragmentation patterns' live bytes and churn, and the alloc/free
// throughput rounds.
#ifndef TOOLS_BENCH_ALLOC_ALLOC_CONFIG_H_
#define TOOLS_BENCH_ALLOC_ALLOC_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm::bench {

struct AllocConfig {
  // Directory for the libpm containers and the Boost.Interprocess file.
  std::string dir = "/dev/shm/pm-bench";
  bool smoke = false;
  uint64_t seed = 42;

  // (i) fragmentation: each pattern fills to live_bytes with objects of its
  // first size, then replaces random live objects with objects of its second
  // size until churn_factor * live_bytes bytes have been allocated.
  uint64_t live_bytes = 512ull << 20;
  double churn_factor = 3;

  // (ii) throughput: each thread keeps `window` objects live and does
  // `rounds` free+alloc pairs; the median of `repetitions` runs is reported.
  std::vector<int> threads = {1, 2};
  uint64_t rounds = 2'000'000;
  uint64_t window = 1024;
  int repetitions = 3;
  // The libpm run with commits commits once per this many alloc/free calls,
  // counted over all threads.
  uint64_t commit_every = 10'000;

  // Sizes of --smoke: every code path in a few seconds.
  static AllocConfig smoke_sized() {
    AllocConfig c;
    c.smoke = true;
    c.live_bytes = 8ull << 20;
    c.churn_factor = 2;
    c.rounds = 20'000;
    c.window = 256;
    c.repetitions = 1;
    return c;
  }
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_CONFIG_H_
