// Commit latency suite: the time to dirty 1..1000 pages (the stores, with the
// tracker's page faults) and the time of commit() afterwards, per tracker.
#ifndef TOOLS_BENCH_CONTAINER_COMMIT_LATENCY_H_
#define TOOLS_BENCH_CONTAINER_COMMIT_LATENCY_H_

#include <string>

#include "bench/container/config.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

// Runs every case for the uffd, mprotect and hints trackers in `dir`; the
// target is the median commit() after one 8-byte change with uffd, on pmem.
// Errors: from Container (create, alloc, commit).
Result<SuiteResult> run_commit_latency(const DirInfo& dir, const Config& cfg,
                                       const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_COMMIT_LATENCY_H_
