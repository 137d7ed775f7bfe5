// KvConfig: the sizes, durations and emulation settings of one `pm bench kv`
// run, chosen once from the command line (full size or --smoke).
#ifndef TOOLS_BENCH_KV_KV_CONFIG_H_
#define TOOLS_BENCH_KV_KV_CONFIG_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
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
  // Runs of each cell per engine, engines interleaved; the median is reported.
  int repeats = 3;
  std::vector<int> put_percents = {0, 2, 15, 50, 100};
  // Workers per cell: 1, one fewer than the hardware threads (the engine's
  // background threads get a core, as in Bullet's setup) and all of them
  // (default_thread_counts(); {1, 2} on two cores).
  std::vector<int> thread_counts = default_thread_counts();
  double zipf_theta = 0.99;  // YCSB's and Bullet's skew
  // Engines to run (empty: all); see run_all() for the names.
  std::vector<std::string> engines;
  bool wants(const std::string& name) const {
    return engines.empty() || std::find(engines.begin(), engines.end(), name) != engines.end();
  }
  // Pre-created key stream per thread and distribution, cycled through.
  uint64_t stream_length = 1u << 20;

  // Slower-PM emulation (kvstore and phash only; 0: off).
  uint32_t emulate_persist_ns = 0;
  uint32_t emulate_read_ns = 0;
  // kv::StoreOptions::dram_budget_bytes of the kvstore engine (0: no limit).
  uint64_t dram_budget_bytes = 0;

  // Throughput vs put ratio as a PNG (empty: none).
  std::string plot_path;

  static std::vector<int> default_thread_counts() {
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<int> v = {1, std::max(1, cores - 1), cores};
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  bool emulated() const { return emulate_persist_ns != 0 || emulate_read_ns != 0; }

  // Sizes of --smoke: every engine and code path in a few seconds.
  static KvConfig smoke_sized() {
    KvConfig c;
    c.smoke = true;
    c.keys = 2000;
    c.seconds = 0.05;
    c.repeats = 1;
    c.stream_length = 1u << 14;
    return c;
  }
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_CONFIG_H_
