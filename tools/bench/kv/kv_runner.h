// Runs one timed cell of `pm bench kv` on one engine: worker threads cycle
// through their key streams for a fixed time, each operation a put with the
// cell's probability and a get otherwise, and record every latency.
#ifndef TOOLS_BENCH_KV_KV_RUNNER_H_
#define TOOLS_BENCH_KV_KV_RUNNER_H_

#include <cstdint>

#include "bench/kv/kv_engine.h"
#include "bench/kv/kv_histogram.h"
#include "bench/kv/kv_workload.h"
#include "pm/status.h"

namespace pm::bench {

struct CellResult {
  CellSpec spec;
  double seconds = 0;         // from the start signal until every worker stopped
  double settle_seconds = 0;  // KvEngine::settle() after the cell (untimed; not after the last)
  // CPU time of the whole process during the cell (user + system, every
  // thread: workers and the engine's background threads; getrusage).
  double cpu_seconds = 0;
  LatencyHistogram get_ns, put_ns;

  uint64_t ops() const { return get_ns.count() + put_ns.count(); }
  double ops_per_s() const { return seconds > 0 ? double(ops()) / seconds : 0; }
  double cpu_us_per_op() const { return ops() > 0 ? cpu_seconds * 1e6 / double(ops()) : 0; }
};

// A latency is the time from the end of the thread's previous operation to
// the end of this one (one clock read per operation), so it includes the
// few nanoseconds of choosing the key and building the value.
//
// Errors: the first error an engine returns; kCorruption when a get of a
// prefilled key finds nothing or a value of another key.
Result<CellResult> run_cell(KvEngine& engine, const CellSpec& spec, const KeyStreams& streams,
                            double seconds);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_RUNNER_H_
