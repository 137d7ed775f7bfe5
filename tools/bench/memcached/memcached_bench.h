// `pm bench memcached`: Debian's memcached against pmcached on emulated pmem
// (/dev/shm, PMEM_IS_PMEM_FORCE=1: a put persists before its reply) and on
// an ordinary file system (group commit: one msync per batch read), over
// loopback, in one run. A pipelined client (C++: memcslap is the bottleneck
// on two cores) drives 16-byte keys and 100-byte values, zipfian and
// uniform, at several set ratios; each cell runs on each server in turn and
// repeats. Then the warm restart: start to first correct reply after a
// clean stop and after kill -9, against memcached's cold start.
#ifndef TOOLS_BENCH_MEMCACHED_MEMCACHED_BENCH_H_
#define TOOLS_BENCH_MEMCACHED_MEMCACHED_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pm/status.h"

namespace pm::bench {

struct MemcachedConfig {
  std::string pmem_dir = "/dev/shm/pm-bench-mc";
  std::string fs_dir = "/var/tmp/pm-bench-mc";  // "" skips the file-system server
  std::string pmcached;                          // "" finds it beside pm, then in PATH
  uint64_t keys = 1'000'000;
  double seconds = 2;
  int repeats = 3;
  int server_threads = 2;
  int client_threads = 2;
  int connections = 16;
  int depth = 16;  // requests in flight per connection
  std::vector<int> set_percents = {0, 5, 50};
  bool uniform = true;  // also the uniform key choice (zipfian always)

  static MemcachedConfig smoke_sized() {
    MemcachedConfig c;
    c.keys = 5000;
    c.seconds = 0.3;
    c.repeats = 1;
    c.set_percents = {5};
    c.uniform = false;
    c.connections = 4;
    return c;
  }
};

Status run_memcached_bench(const MemcachedConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_MEMCACHED_MEMCACHED_BENCH_H_
