// LogWriter: appends records to a store's logs and owns each log's
// positions: the committed head (the space before it is free), the tail
// (the end of the last record written) and the durable position.
//
// Durability. A log is durable up to `synced`: every byte before it has
// reached persistence. With persist_each (kSync on pmem) append() persists
// each record before it publishes the tail, one flush-and-fence barrier; it
// can advance `synced` because appends to a log are serialised. Otherwise
// sync() persists every log from `synced` to its tail: one caller leads
// while the others wait for it and find their records covered (group
// commit). A failed persist stops the store (StopLatch): every later append
// and sync fails.
//
// Thread safety: every method, from any thread, unless noted.
#ifndef KVSTORE_LOG_WRITER_H_
#define KVSTORE_LOG_WRITER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kvstore/crl.h"
#include "kvstore/store_state.h"
#include "pm/container.h"

namespace kv {

struct LogState {
  std::unique_ptr<Log> log;
  std::mutex writer_mu;                // held by the update appending to it
  // The number of the update holding writer_mu from when it takes it until
  // its items are installed (kTakingSeq just before; 0 otherwise): a
  // snapshot waits for the updates numbered in it (StoreImpl::open_snapshot)
  // without taking writer_mu, which a busy writer would keep from it.
  static constexpr uint64_t kTakingSeq = UINT64_MAX;
  std::atomic<uint64_t> in_flight{0};
  std::atomic<uint64_t> head{0};       // committed head: space before it is free
  std::atomic<uint64_t> tail{0};       // end of the last complete record
  std::atomic<uint64_t> synced{0};     // durable up to here
};

class LogWriter {
 public:
  LogWriter(pm::Container* c, uint32_t nlogs, uint64_t log_bytes, bool persist_each,
            StopLatch* stop, uint32_t emulate_persist_ns);

  uint32_t size() const { return static_cast<uint32_t>(logs_.size()); }
  LogState* at(uint32_t i) const { return logs_[i].get(); }

  // Recovery: log i holds valid, durable records from head to end.
  void restore(uint32_t i, uint64_t head, uint64_t end);

  // A log with room for n more bytes and `keep` bytes beyond them, its
  // writer_mu locked for the caller; the search starts at the calling
  // thread's own log. nullptr when every log is full (*busy: some were
  // locked by other writers).
  LogState* acquire(uint64_t n, uint64_t keep, bool* busy);

  // Writes `rec` at L's tail, persists it when persist_each, and publishes
  // the new tail, which it returns. REQUIRES: L->writer_mu held.
  Result<uint64_t> append(LogState* L, const std::vector<std::byte>& rec);

  // Waits until L is durable up to `end` (group commit).
  Status wait_durable(LogState* L, uint64_t end);
  // Makes every log durable up to its tail now (kAsync: sync(); epochs).
  Status sync();
  // A clean end of `session`: makes every log durable, then writes and
  // persists a close mark at the tail of each log that has room for it.
  // REQUIRES: no append runs meanwhile.
  Status mark_closed(uint32_t session);

  // An epoch committed: the space before `head` is free.
  void release(LogState* L, uint64_t head) { L->head.store(head, std::memory_order_release); }

  // Bytes used over capacity, all logs.
  double occupancy() const;
  uint64_t used_bytes() const;
  uint64_t capacity_bytes() const;

 private:
  Status lead_sync(std::unique_lock<std::mutex>& l);
  Status sync_logs();
  static void raise_synced(LogState* L, uint64_t to);

  std::vector<std::unique_ptr<LogState>> logs_;
  const bool persist_each_;
  StopLatch* stop_;
  const uint32_t emulate_persist_ns_;

  std::mutex sync_mu_;  // group commit
  std::condition_variable sync_cv_;
  bool syncing_ = false;
};

}  // namespace kv

#endif  // KVSTORE_LOG_WRITER_H_
