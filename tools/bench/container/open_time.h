// Open time suite: Container::open() and close of a big container (4 GiB
// heap, 100 MiB with --smoke) whose journal is clean, per tracker.
#ifndef TOOLS_BENCH_CONTAINER_OPEN_TIME_H_
#define TOOLS_BENCH_CONTAINER_OPEN_TIME_H_

#include "bench/container/config.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

// Creates the container once, then opens and closes it
// Config::open_repetitions times per tracker. The target is the median open
// with uffd at 4 GiB. Errors: from Container.
Result<SuiteResult> run_open_time(const DirInfo& dir, const Config& cfg, const Progress& progress);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_CONTAINER_OPEN_TIME_H_
