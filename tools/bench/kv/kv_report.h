// What one `pm bench kv` run measured, and its presentation: the tables
// (throughput with ratios to volatile, latency percentiles, kvstore vs
// pmemobj, prefill, kvstore recovery and memory), the memory targets, and
// the same as JSON.
//
// Thread safety: plain values; use from one thread.
#ifndef TOOLS_BENCH_KV_KV_REPORT_H_
#define TOOLS_BENCH_KV_KV_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kv/kv_config.h"
#include "bench/kv/kv_engine_store.h"
#include "bench/kv/kv_runner.h"
#include "bench/common/report.h"

namespace pm::bench {

struct EngineRun {
  std::string name;  // "volatile", "phash", "kvstore", "pmemobj", "rocksdb"
  double prefill_seconds = 0;
  std::string prefill_method;
  std::vector<CellResult> cells;  // in cell_matrix() order
};

// The kvstore's own findings, after its last cell.
struct StoreFindings {
  bool measured = false;
  CellSpec closed_after{};             // the cell that ran last before the close
  kv::StoreStats snapshot;             // stats before the last cell (stats() scans every key)
  uint64_t frontend_bucket_bytes = 0;  // the frontend's bucket array (not in frontend_bytes)
  Recovery recovery;
  uint64_t verified_after_reopen = 0;  // keys read back correctly after the reopen
};

struct KvRun {
  std::vector<EngineRun> engines;
  std::vector<std::string> skipped;  // why an engine did not run
  StoreFindings store;
  unsigned cores = 0;  // hardware threads of the machine
};

// Per key: 1.4 x (16 + 100) + 32 bytes, for DRAM and for the container.
double memory_target_bytes_per_key();

// A label for every table title of an emulated run ("" when not emulated).
std::string emulation_label(const KvConfig& cfg);

std::vector<Table> kv_tables(const KvRun& run, const KvConfig& cfg);
std::vector<Target> kv_targets(const KvRun& run, const KvConfig& cfg);

nlohmann::json kv_config_json(const KvConfig& cfg);
nlohmann::json kv_engines_json(const KvRun& run);
nlohmann::json kv_store_json(const StoreFindings& s);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_REPORT_H_
