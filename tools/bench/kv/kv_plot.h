// The `pm bench kv --plot FILE.png` figure, in the manner of Bullet's
// Figure 5: throughput against put ratio, one line per engine, one panel
// per key choice and thread count, drawn by gnuplot.
#ifndef TOOLS_BENCH_KV_KV_PLOT_H_
#define TOOLS_BENCH_KV_KV_PLOT_H_

#include <string>

#include "bench/kv/kv_config.h"
#include "bench/kv/kv_report.h"
#include "pm/status.h"

namespace pm::bench {

// Whether an executable `gnuplot` is on PATH.
bool have_gnuplot();

// Writes the PNG to `path`. REQUIRES: have_gnuplot(). kIOError when gnuplot
// cannot be started or fails (its own message is on stderr).
Status write_plot(const KvRun& run, const KvConfig& cfg, const std::string& path);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_PLOT_H_
