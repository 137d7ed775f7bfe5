// Gleaner: applies log records to the backend (gleaning) and commits the
// backend in epochs, each of which frees the log space it applied.
//
// THE INVARIANT crash safety rests on, enforced in advance_epoch() and only
// there: a log head passes a record only once that record, or the record
// that supersedes it, is durable.
//
// Why it needs enforcing: gleaning skips a record whose key has a newer
// frontend item (write collapsing: the newer record will be applied
// instead), and that newer record may not be durable yet (its update is in
// flight, waiting for a group sync, or kAsync has not synced it). If the
// epoch then committed a head past the skipped record and power failed
// before the newer one was synced, both would be gone: an acknowledged
// update lost. So before an epoch commits its heads, every log is synced up
// to its tail: a collapse relies only on records that were logged (and the
// tail published) before the gleaner looked, hence before the epoch began.
//
// Thread safety: glean() runs in any number of threads (each log is read by
// one at a time); advance_epoch() excludes them (epoch_mu_).
#ifndef KVSTORE_GLEANER_H_
#define KVSTORE_GLEANER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "kvstore/backend.h"
#include "kvstore/crl.h"
#include "kvstore/frontend.h"
#include "kvstore/log_writer.h"
#include "kvstore/pending_keys.h"
#include "kvstore/planted_bugs.h"
#include "kvstore/store_state.h"
#include "pm/container.h"

namespace kv {

class Gleaner {
 public:
  struct Env {
    pm::Container* container;
    Backend* backend;
    Frontend* frontend;
    LogWriter* logs;
    StopLatch* stop;
    StoreCounters* counters;
    const std::atomic<uint64_t>* next_seq;  // the store's sequence counter
    Limits limits;
    uint32_t emulate_read_ns, emulate_persist_ns;
    // Past this many bytes of private copies of committed pages, an epoch
    // releases them after its commit (StoreOptions::dram_budget_bytes). 0:
    // never.
    uint64_t private_budget = 0;
  };
  explicit Gleaner(const Env& env);

  // Recovery: every log is gleaned up to its committed head.
  void restore(uint32_t log, uint64_t head);
  // Where log `log` is applied up to (a hint: a gleaner may be moving it).
  uint64_t applied_to(uint32_t log) const {
    return cursors_[log]->pos.load(std::memory_order_relaxed);
  }
  // Records read behind a record the full backend had no room for.
  uint64_t blocked_rereads() const { return beyond_reads_.load(std::memory_order_relaxed); }

  // Applies up to max_records records to the (uncommitted) backend; returns
  // how many it looked at. kNoSpace, without stopping the store, when the
  // backend cannot take the next record of any log (apply_beyond). A log
  // that another thread is gleaning is skipped (and *skipped set, if given).
  Result<uint64_t> glean(uint64_t max_records, bool* skipped = nullptr);
  // Syncs the logs, commits the backend and frees the gleaned log space.
  // kNoSpace, without stopping the store, when the commit found no room for
  // its journal (nothing applied: a later epoch retries).
  Status advance_epoch();
  // Gleans everything logged so far and ends an epoch: the logs are empty.
  Status checkpoint();

  // The item's version is committed in the backend (it may be evicted).
  bool clean(const Item& it) const {
    const uint64_t e = it.applied_epoch.load(std::memory_order_acquire);
    return e != 0 && e <= committed_epoch_.load(std::memory_order_acquire);
  }
  // True when records remain between the gleaned position and the tail.
  bool behind() const;
  // Live keys: the backend's count plus what the records not yet applied to
  // it add or remove (StoreStats::keys). Reads only those records (bounded
  // by the logs, not by the data), with every log's cursor held, so that no
  // glean is between an apply and its cursor's move meanwhile.
  uint64_t live_keys();
  // The first `max` keys past `after` (at it too, when inclusive) and
  // before end (empty: no end) of the records no gleaner has applied yet
  // that the index may lack (PendingKeys: no removes, no trusted
  // kOpKeyIndexed puts; perhaps keys applied since), sorted, each once,
  // and whether there are more: what ordered reads merge with the
  // backend's index. Reads the records no earlier call
  // read (PendingKeys) under the epoch lock (shared), so no epoch frees
  // their log space meanwhile.
  Status pending_keys(std::string_view after, bool inclusive, std::string_view end, size_t max,
                      std::vector<std::string>* out, bool* more);
  // Reads the records no earlier call read, as pending_keys() does, but
  // collects nothing: done before a snapshot opens, it leaves pending_keys()
  // only the records logged since.
  Status read_pending();
  // Once recovery is done, in a store open for writing: the records logged
  // from now on are this session's (PendingKeys::trust_flags_from).
  void trust_index_flags();

 private:
  // read_pending(). REQUIRES: epoch_mu_ held (shared).
  Status read_pending_locked();
  struct Cursor {
    std::mutex mu;                  // held by the gleaner reading this log
    std::atomic<uint64_t> pos{0};   // applied to the working backend up to here
    // The last apply_beyond() pass (under mu): behind the record blocked
    // at `blocked`, it tried every record up to `tried_to` with the heap
    // at `room` (while the heap's counters stay so, they cannot fit better).
    uint64_t blocked = 0, tried_to = 0;
    pm::HeapCounters room;
    std::chrono::steady_clock::time_point full_pass{};  // the last pass from `blocked`
  };
  Status apply(const Op& op, uint64_t h, LogRef ref, uint64_t seq);
  // The epoch holds what its commit has room for, on a full disk: the
  // gleaner applies no more until it commits (else a commit that needs
  // more journal room than the file has fails, and every retry holds
  // more: the store took no update again, not even a remove).
  bool epoch_full() const {
    return !g_kv_planted_bugs.epoch_ignores_journal_room && !env_.container->commit_fits();
  }
  // Checked before each kOpsBetweenChecks-th update of a record, too: one
  // record of thousands of updates (a transaction, a `pm kv load` batch)
  // outgrew by itself what a nearly full disk left the journal, and every
  // commit after failed. The epoch then ends inside the record: its cursor
  // stays at the record, which is applied again from its start later, the
  // updates already applied skipped by sequence number (as a replay skips
  // them; a record the backend had no room for is taken again so too).
  // The epoch must commit them even when no cursor moved (commit_wanted_).
  static constexpr size_t kOpsBetweenChecks = 32;
  bool full_inside(size_t op_index) {
    if (op_index == 0 || op_index % kOpsBetweenChecks != 0) return false;
    if (g_kv_planted_bugs.epoch_ends_between_records || !epoch_full()) return false;
    commit_wanted_.store(true, std::memory_order_relaxed);
    return true;
  }
  // Updates applied that no cursor move shows (full_inside): cleared by a
  // successful commit.
  std::atomic<bool> commit_wanted_{false};
  // The backend is full and log n's record before `pos` is one it has no
  // room for: its cursor stays there (a head never passes an unapplied
  // record), and everything after it, up to `tail`, is applied now that
  // fits, removes above all, whose space is what lets the blocked record
  // in. Out of order is safe: every backend entry keeps the sequence number
  // of the update it holds, so the blocked record, applied later, cannot
  // undo a newer change, and a replay after a crash applies them again to
  // the same effect (a transaction stays whole to readers: its record stays
  // in the log, and the frontend holds its items until it is applied).
  //
  // Records an earlier pass tried behind the same blocked record are tried
  // again only once the heap has changed (room may have appeared; a disk
  // that got room for the blocked record shows when its retry grows the
  // heap), or kFullPassEvery after the last full pass (a disk that got
  // room for smaller records only, which the heap's counters do not show):
  // else each update on a full disk that found the logs full read every
  // record in them again (pmcached: 50-125 ms per failing set, 64 MiB
  // logs). Skipping them is always safe: the cursor stays before them, and
  // they are applied in order once the blocked record is.
  Status apply_beyond(uint32_t n, LogState* L, Cursor& cur, uint64_t pos, uint64_t tail);
  static constexpr std::chrono::seconds kFullPassEvery{5};
  // Records read ahead of their apply, so that the cache misses of their
  // keys' frontend and backend buckets overlap (prefetched together).
  static constexpr int kBatch = 16;
  // The oldest sequence number still in a log after this epoch: ghosts
  // older than it can go.
  uint64_t oldest_live_seq() const;
  // Whether a log's cursor stays at a record the backend had no room for.
  // REQUIRES: epoch_mu_ held exclusively (no gleaner moves a cursor).
  bool waiting_for_room() const;
  // Per key hash, the oldest sequence number of the records left in the
  // logs ([cursor, tail) of each), sorted by hash. REQUIRES: as above.
  using SeqByKey = std::vector<std::pair<uint64_t, uint64_t>>;
  Result<SeqByKey> oldest_seq_by_key() const;
  // Forgets the ghosts no record left in the logs needs (in advance_epoch).
  Status purge_ghosts();
  // Records read by apply_beyond() since open (StoreStats::blocked_rereads).
  std::atomic<uint64_t> beyond_reads_{0};
  void drop_applied_tombstones(std::vector<std::string>& keys);
  Status fail(const Status& s) {
    env_.stop->stop(s);
    return s;
  }

  Env env_;
  std::vector<std::unique_ptr<Cursor>> cursors_;
  std::atomic<uint64_t> committed_epoch_{1};
  std::shared_mutex epoch_mu_;  // gleaners shared, advance_epoch exclusive
  std::atomic<uint32_t> next_log_{0};
  std::mutex tomb_mu_;
  std::vector<std::string> tomb_keys_;  // removes applied in the epoch being built
  PendingKeys pending_;
};

}  // namespace kv

#endif  // KVSTORE_GLEANER_H_
