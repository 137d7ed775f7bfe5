// Hash map suite: the same chained hash map on libpm (commit per insert with
// the uffd and hints trackers, commit per 1000 inserts, with and without
// release_after_commit) and on libpmemobj (one transaction per insert):
// insert and get rates with ratios to libpmemobj, and the DRAM the libpm
// working view holds afterwards and after release_clean().
#ifndef TOOLS_BENCH_CONTAINER_HASHMAP_SUITE_H_
#define TOOLS_BENCH_CONTAINER_HASHMAP_SUITE_H_

#include "bench/container/config.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

// Errors: from Container and libpmemobj; kCorruption when a get does not find
// the value inserted (or heap check() finds a problem) after the workload.
Result<SuiteResult> run_hashmap(const DirInfo& dir, const Config& cfg, const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_HASHMAP_SUITE_H_
