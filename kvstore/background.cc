// The store's background threads: gleaners, and one maintenance thread that
// ends epochs, grows the frontend, runs the kAsync sync and moves threads
// between roles (after Bullet's dynamic roles).
#include <algorithm>
#include <chrono>
#include <new>
#include <system_error>

#include "kvstore/store_impl.h"

namespace kv {

namespace {

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Status StoreImpl::start_threads() {
  if (!o_.background || o_.read_only) return Status();
  active_gleaners_ = std::max(o_.min_gleaners, 1);
  try {
    for (int i = 0; i < o_.max_gleaners; i++) {
      gleaners_.emplace_back([this, i] { gleaner_loop(i); });
    }
    maintenance_ = std::thread([this] { maintenance_loop(); });
  } catch (const std::system_error& e) {
    // Those started stop when the caller drops the store (the destructor).
    return Status::from_errno("start the store's background threads", e.code().value());
  }
  return Status();
}

// Wakes sleeping background threads only when there is work worth it: a
// futex wake per put would cost more than the put. Gleaners: an eighth of
// the log not yet applied (measured from their cursor: from the committed
// head, which moves only at epochs, a log under load is always that full,
// and each put woke a gleaner that had just caught up: thousands of wakes a
// second). Maintenance: the frontend needs growing; its epochs and syncs
// keep their timer (maintenance_loop), so a full log is the writer's to
// handle until the timer comes (StoreImpl::log_for).
void StoreImpl::wake_background_if(uint32_t log, uint64_t end) {
  // (seq_cst, with the sequence number this update took before: see note_quiet.)
  if (deep_idle_.load()) {
    deep_idle_.store(false);
    wakes_.fetch_add(1, std::memory_order_relaxed);
    bell_.ring();
    return;
  }
  std::atomic<bool>* idle = nullptr;
  if (gleaners_idle_.load(std::memory_order_relaxed) &&
      end - gleaner_->applied_to(log) > logs_->at(log)->log->capacity() / 8) {
    idle = &gleaners_idle_;
  } else if (maintenance_idle_.load(std::memory_order_relaxed) && fe_.wants_growth()) {
    idle = &maintenance_idle_;
  }
  if (idle == nullptr) return;
  idle->store(false, std::memory_order_relaxed);
  wakes_.fetch_add(1, std::memory_order_relaxed);
  bell_.ring();
}

// Sleeps until rung or ms pass (kDeepIdleMs when the store is deeply
// idle); `idle` (when given) announces it, so that a writer with work for
// it rings.
void StoreImpl::sleep_background(uint32_t ms, std::atomic<bool>* idle) {
  const uint32_t seen = bell_.seen();
  // The destructor sets stopping_ and then rings: a ring before `seen`
  // would not wake us, so look again.
  if (stopping_.load()) return;
  if (idle != nullptr) idle->store(true, std::memory_order_relaxed);
  // Read after `seen`: a writer that clears it rings after, so a long
  // sleep chosen here ends at that ring.
  if (deep_idle_.load()) ms = kDeepIdleMs;
  bell_.wait(seen, ms);
}

// Quiet: no update took a number since the last round, and the logs hold
// nothing (all applied and committed). The flag is set, then the number
// read again (both seq_cst): an update that took its number before that
// read is seen here and clears it; one after it reads the flag in
// wake_background_if and rings.
void StoreImpl::note_quiet(uint64_t* seq_seen, uint32_t* rounds) {
  const uint64_t seq = next_seq_.load();
  if (seq != *seq_seen || logs_->occupancy() > 0) {
    *seq_seen = seq;
    *rounds = 0;
    return;
  }
  if (++*rounds * o_.epoch_ms < kDeepIdleMs || deep_idle_.load()) return;
  deep_idle_.store(true);
  if (next_seq_.load() != seq) deep_idle_.store(false);
}

void StoreImpl::gleaner_loop(int id) {
  uint32_t full_wait_ms = 0;  // as maintenance_loop's: doubling while the backend is full
  while (!stopping_.load()) {
    if (id >= active_gleaners_.load()) {
      sleep_background(50, nullptr);
      continue;
    }
    bool skipped = false;
    Result<uint64_t> n = stop_.or_stop("glean", [&] { return gleaner_->glean(4096, &skipped); });
    if (!n.ok() && n.status().code() == Code::kNoSpace) {
      // A full backend: until an epoch frees room (or a ring).
      full_wait_ms = std::min(kFullDiskWaitMs, std::max(2 * full_wait_ms, o_.epoch_ms));
      sleep_background(full_wait_ms, nullptr);
      continue;
    }
    full_wait_ms = 0;
    if (!n.ok()) return;  // the store is stopped
    if (*n == 0) {
      // Nothing to do: sleep until an eighth of a log waits to be applied
      // (a writer wakes us) or an epoch has passed. Waking every
      // millisecond instead cost gets a 40 us p99.9 on two cores. A log
      // another thread was gleaning may still hold that much: then only
      // the timer, or every put to it would wake us to find it taken.
      sleep_background(o_.epoch_ms, skipped ? nullptr : &gleaners_idle_);
    }
  }
}

void StoreImpl::maintenance_loop() {
  uint64_t last_sync = now_us(), last_epoch = now_us();
  uint64_t quiet_seq = 0;
  uint32_t quiet_rounds = 0;
  // After an epoch whose commit found no room (a full disk), the next one
  // waits this long, doubling up to kFullDiskWaitMs: full logs ask for an
  // epoch every few milliseconds, and each such commit diffs and journals
  // the epoch's changes again to fail again. A writer that finds the logs
  // full still runs its own epoch.
  uint32_t full_wait_ms = 0;
  while (!stopping_.load()) {
    uint32_t ms = o_.epoch_ms;
    if (durability_ == Durability::kAsync) ms = std::min(ms, o_.async_sync_ms);
    // Writers do not ring for epochs: while the logs fill, look four times
    // as often, so that the epoch that frees them starts soon after they
    // pass half full.
    if (logs_->occupancy() > 0.25) ms /= 4;
    sleep_background(std::max<uint32_t>(ms, 1), &maintenance_idle_);
    if (fe_.wants_growth()) {
      try {
        fe_.grow();
      } catch (const std::bad_alloc&) {  // out of DRAM: the table serves fuller
      }
    }
    const uint64_t now = now_us();
    const double occ = logs_->occupancy();
    if ((now - last_epoch >= o_.epoch_ms * 1000ull || occ > 0.5) &&
        now - last_epoch >= full_wait_ms * 1000ull) {
      last_epoch = now;
      Status s = advance_epoch();
      if (!s.ok() && s.code() != Code::kNoSpace) return;  // the store is stopped
      full_wait_ms = s.ok() ? 0
                            : std::min(kFullDiskWaitMs, std::max(2 * full_wait_ms, o_.epoch_ms));
      // Dynamic roles: more gleaners while the logs fill, fewer when they drain.
      int active = active_gleaners_.load();
      const double occ_now = logs_->occupancy();
      if (occ_now > 0.6 && occ_now >= last_occupancy_ && active < o_.max_gleaners) active++;
      if (occ_now < 0.3 && active > std::max(o_.min_gleaners, 1)) active--;
      active_gleaners_ = active;
      last_occupancy_ = occ_now;
      Reclaimer::collect();
    }
    if (durability_ == Durability::kAsync && now - last_sync >= o_.async_sync_ms * 1000ull) {
      last_sync = now;
      if (!sync().ok()) return;  // the store is stopped
    }
    note_quiet(&quiet_seq, &quiet_rounds);
  }
}

}  // namespace kv
