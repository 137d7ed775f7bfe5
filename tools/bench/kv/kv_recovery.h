// The kvstore's recovery time against data size and log size: for each
// (keys, total log bytes), load the keys and checkpoint them, fill the logs
// to about 85% with overwrites that no gleaner applies (background threads
// off), close, and time the reopen, which replays the logs.
#ifndef TOOLS_BENCH_KV_KV_RECOVERY_H_
#define TOOLS_BENCH_KV_KV_RECOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

struct RecoveryPoint {
  uint64_t keys = 0;
  uint64_t log_bytes = 0;  // all logs together
  uint64_t records = 0;    // replayed
  double open_ms = 0;      // kv::Store::open, container recovery included
  double replay_ms = 0;    // the store's own log replay (StoreStats::recovery_us)
};

Result<std::vector<RecoveryPoint>> recovery_sweep(const std::string& dir,
                                                  const std::vector<uint64_t>& key_counts,
                                                  const std::vector<uint64_t>& log_totals,
                                                  const Progress& progress);

Table recovery_table(const std::vector<RecoveryPoint>& points);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_RECOVERY_H_
