// `pm bench ordered`: the version tree (kvstore/version_tree.h, after CDDS)
// against Berkeley DB's B-tree (durable: a transactional environment with
// its log beside the data, one synchronous transaction per write; and
// non-transactional) and LMDB (a write transaction per write, and per 1,000
// writes), on emulated pmem, in one run. Each repeat builds every engine
// afresh in turn: N puts of 16-byte keys with 100-byte values in random
// order, N gets, scans of 100 keys from random keys, N deletes; the table
// gives each phase's median rate and the tree's ratios; the targets
// are judged from them.
#ifndef TOOLS_BENCH_ORDERED_ORDERED_BENCH_H_
#define TOOLS_BENCH_ORDERED_ORDERED_BENCH_H_

#include <cstdint>
#include <string>

#include "pm/status.h"

namespace pm::bench {

struct OrderedConfig {
  std::string dir = "/dev/shm/pm-bench-ordered";
  uint64_t keys = 1'000'000;
  uint64_t scans = 100'000;
  int repeats = 3;

  static OrderedConfig smoke_sized() {
    OrderedConfig c;
    c.keys = 3000;
    c.scans = 300;
    c.repeats = 1;
    return c;
  }
};

Status run_ordered_bench(const OrderedConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ORDERED_ORDERED_BENCH_H_
