// Working-set suite: LibPM's own kind of workload. Updates (an 8-byte
// counter incremented at a random place) concentrated on a working set of
// pages, committed in batches of 1 to 1M updates on libpm, against
// libpmemobj with one transaction per update: updates/s per batch size, a
// curve of how a commit that costs what changed amortises over its batch.
#ifndef TOOLS_BENCH_CONTAINER_WORKING_SET_H_
#define TOOLS_BENCH_CONTAINER_WORKING_SET_H_

#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "bench/container/config.h"
#include "pm/status.h"

namespace pm::bench {

// Errors: from Container and libpmemobj; kCorruption when the counters do
// not sum to the updates made.
Result<SuiteResult> run_working_set(const DirInfo& dir, const Config& cfg,
                                    const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_WORKING_SET_H_
