// Fragmentation suite of `pm bench alloc`: Nibble's six allocation patterns
// (see churn.h) against libpm, glibc malloc (in a forked child) and
// Boost.Interprocess managed_mapped_file, reporting bytes in use over live
// bytes, and the target libpm footprint <= 1.15x live on every pattern.
#ifndef TOOLS_BENCH_ALLOC_FRAGMENTATION_H_
#define TOOLS_BENCH_ALLOC_FRAGMENTATION_H_

#include "bench/alloc/alloc_config.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

// Runs every pattern on every engine, one at a time; files go in dir.dir and
// are removed. Errors: the first engine error, or a failed child process.
// REQUIRES: no other thread runs (glibc's run forks).
Result<SuiteResult> run_fragmentation(const DirInfo& dir, const AllocConfig& cfg,
                                      const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_FRAGMENTATION_H_
