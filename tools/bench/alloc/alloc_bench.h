// `pm bench alloc`: libpm's allocator against glibc malloc and
// Boost.Interprocess: (i) fragmentation under Nibble's six patterns,
// (ii) alloc/free throughput at 1 and 2 threads. Prints the environment
// header, one table per suite and the targets judged from the numbers; or,
// with json, one JSON document.
#ifndef TOOLS_BENCH_ALLOC_ALLOC_BENCH_H_
#define TOOLS_BENCH_ALLOC_ALLOC_BENCH_H_

#include "bench/alloc/alloc_config.h"
#include "pm/status.h"

namespace pm::bench {

// Results go to stdout, progress to stderr (only on a terminal). Every file
// created is removed, and cfg.dir too if this run created it.
// Errors: the first engine or file system error; the run stops there.
// REQUIRES: called before the process starts other threads (a suite forks).
Status run_alloc_bench(const AllocConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_BENCH_H_
