#include "kvstore/log_writer.h"

#include <algorithm>

#include "kvstore/planted_bugs.h"
#include "libpm/sync_point.h"

namespace kv {

namespace {

// Which log a thread tries first: threads take the logs in turn, so that
// writers start on different logs (and runs are reproducible).
std::atomic<uint32_t> g_next_log_hint{0};
thread_local uint32_t t_log_hint = g_next_log_hint.fetch_add(1);

}  // namespace

LogWriter::LogWriter(pm::Container* c, uint32_t nlogs, uint64_t log_bytes, bool persist_each,
                     StopLatch* stop, uint32_t emulate_persist_ns)
    : persist_each_(persist_each), stop_(stop), emulate_persist_ns_(emulate_persist_ns) {
  for (uint32_t i = 0; i < nlogs; i++) {
    auto L = std::make_unique<LogState>();
    L->log = std::make_unique<Log>(&c->raw(), i, uint64_t{i} * log_bytes, log_bytes);
    logs_.push_back(std::move(L));
  }
}

void LogWriter::restore(uint32_t i, uint64_t head, uint64_t end) {
  LogState* L = logs_[i].get();
  L->head = head;
  L->tail = end;
  L->synced = end;
}

LogState* LogWriter::acquire(uint64_t n, uint64_t keep, bool* busy) {
  const uint32_t nlogs = size();
  const uint32_t start = t_log_hint;
  for (uint32_t i = 0; i < nlogs; i++) {
    const uint32_t idx = (start + i) % nlogs;
    LogState* L = logs_[idx].get();
    if (!L->writer_mu.try_lock()) {
      *busy = true;
      continue;
    }
    const uint64_t used =
        L->tail.load(std::memory_order_relaxed) - L->head.load(std::memory_order_acquire);
    if (used + n + keep <= L->log->capacity()) {
      t_log_hint = idx;
      return L;
    }
    L->writer_mu.unlock();
  }
  return nullptr;
}

void LogWriter::raise_synced(LogState* L, uint64_t to) {
  uint64_t cur = L->synced.load(std::memory_order_relaxed);
  while (cur < to && !L->synced.compare_exchange_weak(cur, to, std::memory_order_release)) {
  }
}

Result<uint64_t> LogWriter::append(LogState* L, const std::vector<std::byte>& rec) {
  PM_TRY(stop_->status());
  const uint64_t pos = L->tail.load(std::memory_order_relaxed);
  PM_TRY(L->log->write(pos, rec.data(), rec.size()));
  const uint64_t end = pos + rec.size();
  if (persist_each_ && !g_kv_planted_bugs.skip_put_persist) {
    // The one barrier of a put. Records before this one were persisted the
    // same way, under the same writer lock: the log is durable up to end.
    Status s = L->log->persist(pos, rec.size());
    if (!s.ok()) {
      stop_->stop(s);
      return s;
    }
    emulate_delay(emulate_persist_ns_);
    raise_synced(L, end);
  }
  L->tail.store(end, std::memory_order_release);
  return end;
}

Status LogWriter::mark_closed(uint32_t session) {
  PM_TRY(sync());
  for (auto& L : logs_) {
    const uint64_t head = L->head.load(std::memory_order_acquire);
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    // An empty log is marked too: the next open then finds the mark where
    // the records end, rather than look for one through the whole log.
    if (tail + sizeof(RecordHeader) > head + L->log->capacity()) continue;
    // Not persisted: whenever it reaches the file, the records before it
    // already have (a mark lost to a power failure only leaves the next
    // open unable to tell damage from a crash).
    const RecordHeader h = close_mark(L->log->index(), tail, session);
    PM_TRY(L->log->write(tail, reinterpret_cast<const std::byte*>(&h), sizeof h));
  }
  return Status();
}

Status LogWriter::sync_logs() {
  for (auto& L : logs_) {
    const uint64_t tail = L->tail.load(std::memory_order_acquire);
    // Space before the head was applied and committed by an epoch: nothing
    // there needs persisting (and a span longer than the ring would wrap).
    const uint64_t from =
        std::max(L->synced.load(std::memory_order_relaxed), L->head.load(std::memory_order_acquire));
    if (tail > from) {
      Status s = L->log->persist(from, tail - from);
      if (!s.ok()) {
        stop_->stop(s);
        return s;
      }
    }
    raise_synced(L.get(), tail);
    pm::sync_point::point("kv.sync.log");
  }
  return Status();
}

// One sync of every log by the calling thread while the others wait.
// REQUIRES: l holds sync_mu_ and no sync runs; l holds it again on return.
Status LogWriter::lead_sync(std::unique_lock<std::mutex>& l) {
  syncing_ = true;
  l.unlock();
  Status s = sync_logs();
  l.lock();
  syncing_ = false;
  sync_cv_.notify_all();
  return s;
}

// Group commit: one thread syncs everything written so far; the others wait
// for it and find their record covered.
Status LogWriter::wait_durable(LogState* L, uint64_t end) {
  std::unique_lock<std::mutex> l(sync_mu_);
  while (L->synced.load(std::memory_order_acquire) < end) {
    PM_TRY(stop_->status());
    if (syncing_) {
      pm::sync_point::wait(sync_cv_, l, "kv.sync.wait", [&] { return !syncing_; });
      continue;
    }
    PM_TRY(lead_sync(l));
  }
  return Status();
}

Status LogWriter::sync() {
  PM_TRY(stop_->status());
  std::unique_lock<std::mutex> l(sync_mu_);
  pm::sync_point::wait(sync_cv_, l, "kv.sync.wait", [&] { return !syncing_; });
  return lead_sync(l);
}

uint64_t LogWriter::used_bytes() const {
  uint64_t used = 0;
  for (auto& L : logs_) {
    used += L->tail.load(std::memory_order_relaxed) - L->head.load(std::memory_order_relaxed);
  }
  return used;
}

uint64_t LogWriter::capacity_bytes() const {
  uint64_t cap = 0;
  for (auto& L : logs_) cap += L->log->capacity();
  return cap;
}

double LogWriter::occupancy() const {
  const uint64_t cap = capacity_bytes();
  return cap ? static_cast<double>(used_bytes()) / static_cast<double>(cap) : 0;
}

}  // namespace kv
