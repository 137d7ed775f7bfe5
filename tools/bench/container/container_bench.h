// `pm bench container`: runs the commit latency, hash map (with DRAM) and
// open time suites in each configured directory, printing an environment
// header, one table per suite with ratios, and the targets judged
// from the measured numbers; or, with json, one JSON document.
#ifndef TOOLS_BENCH_CONTAINER_CONTAINER_BENCH_H_
#define TOOLS_BENCH_CONTAINER_CONTAINER_BENCH_H_

#include "bench/container/config.h"
#include "pm/status.h"

namespace pm::bench {

// Results go to stdout, progress to stderr (only on a terminal). Every file
// created is removed, and each directory too if this run created it.
// Errors: the first library or file system error; the run stops there.
Status run_container_bench(const Config& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_CONTAINER_BENCH_H_
