#include "bench/kv/kv_recovery.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "kv/store.h"

namespace pm::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr int kLogs = 8;
// 40-byte header, 24-byte operation header, 16-byte key, 100-byte value.
constexpr uint64_t kRecordBytes = 184;

std::string key_of(uint64_t i) { return fmt::format("key{:013}", i); }  // 16 bytes

Result<RecoveryPoint> measure(const std::string& path, uint64_t keys, uint64_t log_total) {
  kv::StoreOptions o;
  o.logs = kLogs;
  o.log_bytes = log_total / kLogs;
  o.max_value_bytes = 1024;
  o.background = false;  // nothing gleans the fill: the logs keep it
  o.initial_heap_bytes = (keys * 256 + 64 * kMiB + kMiB - 1) / kMiB * kMiB;
  // The fill is set-up, not what is measured: one sync at its end, not one
  // per put (on a file system a per-put msync made 1.1M puts take hours).
  // The timed reopen keeps the default durability.
  kv::StoreOptions fill_o = o;
  fill_o.durability = kv::Durability::kAsync;
  ::unlink(path.c_str());
  const std::string value(100, 'v');
  {
    Result<std::unique_ptr<kv::Store>> s = kv::Store::open(path, fill_o);
    if (!s.ok()) return s.status();
    for (uint64_t i = 0; i < keys; i++) PM_TRY((*s)->put(key_of(i), value));
    PM_TRY((*s)->checkpoint());
    std::mt19937_64 rng(42);
    const uint64_t fill = log_total * 85 / 100 / kRecordBytes;
    for (uint64_t i = 0; i < fill; i++) PM_TRY((*s)->put(key_of(rng() % keys), value));
    PM_TRY((*s)->sync());
  }
  RecoveryPoint p;
  p.keys = keys;
  p.log_bytes = log_total;
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<kv::Store>> s = kv::Store::open(path, o);
  p.open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
  if (!s.ok()) return s.status();
  const kv::StoreStats st = (*s)->stats();
  p.records = st.recovered_records;
  p.replay_ms = static_cast<double>(st.recovery_us) / 1000;
  std::string v;
  PM_TRY((*s)->get(key_of(keys - 1), &v));  // readable after the replay
  s->reset();
  ::unlink(path.c_str());
  return p;
}

}  // namespace

Result<std::vector<RecoveryPoint>> recovery_sweep(const std::string& dir,
                                                  const std::vector<uint64_t>& key_counts,
                                                  const std::vector<uint64_t>& log_totals,
                                                  const Progress& progress) {
  std::vector<RecoveryPoint> points;
  for (uint64_t keys : key_counts) {
    for (uint64_t logs : log_totals) {
      progress.step(fmt::format("recovery: {} keys, {} MiB of logs", keys, logs / kMiB));
      Result<RecoveryPoint> p = measure(dir + "/kv-recovery.pm", keys, logs);
      if (!p.ok()) return p.status().with_context("recovery sweep");
      points.push_back(*p);
    }
  }
  return points;
}

Table recovery_table(const std::vector<RecoveryPoint>& points) {
  Table t;
  t.title = "kvstore recovery against data size and log size (logs filled to ~85%, then reopened)";
  t.columns = {{"keys", "keys", Format::kCount},
               {"log MiB", "log_mib", Format::kCount},
               {"records replayed", "records", Format::kCount},
               {"open() ms", "open_ms", Format::kMillis},
               {"replay ms", "replay_ms", Format::kMillis},
               {"us per record", "us_per_record", Format::kMicros}};
  for (const RecoveryPoint& p : points) {
    t.add_row({static_cast<int64_t>(p.keys), static_cast<int64_t>(p.log_bytes / kMiB),
               static_cast<int64_t>(p.records), p.open_ms, p.replay_ms,
               p.records ? p.replay_ms * 1000 / static_cast<double>(p.records) : Cell{}});
  }
  t.notes.push_back(
      "the backend holds every key (checkpointed before the fill): recovery replays the logs only, "
      "so its time follows the log size, not the data size");
  return t;
}

}  // namespace pm::bench
