// KvConfig: the sizes, durations and emulation settings of one `pm bench kv`
// run, chosen once from the command line (full size or --smoke).
#ifndef TOOLS_BENCH_KV_CONFIG_H_
#define TOOLS_BENCH_KV_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pm::bench {

struct KvConfig {
  // Where the engines' files go (created and removed again if missing).
  std::string dir = "/dev/shm/pm-bench-kv";
  bool smoke = false;

  // Keys loaded before the timed cells (Bullet used 50 M; 1 M keeps a
  // default run at a few minutes on two cores). Every timed get and put
  // picks one of these keys, so puts overwrite and gets always hit.
  uint64_t keys = 1'000'000;
  // Length of each cell (one distribution, put ratio and thread count).
  double seconds = 2;
  std::vector<int> put_percents = {0, 2, 15, 50, 100};
  std::vector<int> thread_counts = {1, 2};
  double zipf_theta = 0.99;  // YCSB's and Bullet's skew
  // Pre-created key stream per thread and distribution, cycled through.
  uint64_t stream_length = 1u << 20;

  // Slower-PM emulation (kvstore and phash only; 0: off).
  uint32_t emulate_persist_ns = 0;
  uint32_t emulate_read_ns = 0;
  // kv::StoreOptions::dram_budget_bytes of the kvstore engine (0: no limit).
  uint64_t dram_budget_bytes = 0;

  // Throughput vs put ratio as a PNG (empty: none).
  std::string plot_path;

  bool emulated() const { return emulate_persist_ns != 0 || emulate_read_ns != 0; }

  // Sizes of --smoke: every engine and code path in a few seconds.
  static KvConfig smoke_sized() {
    KvConfig c;
    c.smoke = true;
    c.keys = 2000;
    c.seconds = 0.05;
    c.stream_length = 1u << 14;
    return c;
  }
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_CONFIG_H_
