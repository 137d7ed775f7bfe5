// Alloc/free throughput suite of `pm bench alloc`: threads doing free+alloc
// pairs in a sliding window of live objects (sizes 16..1024 B), for glibc
// malloc and for libpm's Container::alloc/free, without commits in the timed
// loop and with a commit every AllocConfig::commit_every calls.
#ifndef TOOLS_BENCH_ALLOC_ALLOC_THROUGHPUT_H_
#define TOOLS_BENCH_ALLOC_ALLOC_THROUGHPUT_H_

#include "bench/alloc/alloc_config.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

// One table: calls per second at each thread count, and libpm's ratio to
// glibc. Errors: from the engines (libpm's container lives in dir.dir).
Result<SuiteResult> run_alloc_throughput(const DirInfo& dir, const AllocConfig& cfg,
                                         const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ALLOC_ALLOC_THROUGHPUT_H_
