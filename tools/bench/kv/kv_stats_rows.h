// Every kv::StoreStats field as (name, JSON value), in declaration order:
// the one list that `pm kv stats` (table and JSON) and `pm bench kv --json`
// print, so that a new field shows up in both.
#ifndef TOOLS_BENCH_KV_KV_STATS_ROWS_H_
#define TOOLS_BENCH_KV_KV_STATS_ROWS_H_

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "kv/store.h"

namespace pm::bench {

inline std::vector<std::pair<const char*, nlohmann::json>> kv_stat_rows(const kv::StoreStats& s) {
  return {{"keys", s.keys},
          {"frontend_items", s.frontend_items},
          {"frontend_bytes", s.frontend_bytes},
          {"frontend_buckets", s.frontend_buckets},
          {"backend_keys", s.backend_keys},
          {"backend_ghosts", s.backend_ghosts},
          {"container_used_bytes", s.container_used_bytes},
          {"container_file_bytes", s.container_file_bytes},
          {"container_private_bytes", s.container_private_bytes},
          {"container_journaled_bytes", s.container_journaled_bytes},
          {"container_fresh_bytes", s.container_fresh_bytes},
          {"ordered", s.ordered},
          {"max_key_bytes", s.max_key_bytes},
          {"max_value_bytes", s.max_value_bytes},
          {"log_bytes", s.log_bytes},
          {"log_used_bytes", s.log_used_bytes},
          {"puts", s.puts},
          {"removes", s.removes},
          {"gets", s.gets},
          {"misses", s.misses},
          {"records_applied", s.records_applied},
          {"records_collapsed", s.records_collapsed},
          {"epochs", s.epochs},
          {"writer_waits", s.writer_waits},
          {"blocked_rereads", s.blocked_rereads},
          {"background_wakes", s.background_wakes},
          {"gleaners_active", s.gleaners_active},
          {"snapshots_open", s.snapshots_open},
          {"snapshot_versions", s.snapshot_versions},
          {"recovered_records", s.recovered_records},
          {"recovery_us", s.recovery_us},
          {"is_pmem", s.is_pmem},
          {"durability", s.durability == kv::Durability::kSync ? "sync" : "async"}};
}

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_STATS_ROWS_H_
