// kv::Store: a crash-safe key-value store with a DRAM frontend and a
// persistent backend in one libpm container (after Bullet's
// cross-referencing logs; docs/kvstore.md has the design).
//
// Every request is served by the DRAM frontend hash table. A put or remove
// appends one checksummed record to a persistent log in the container's raw
// region and returns; gleaner threads apply the records to a persistent hash
// table in the container's heap, and each epoch ends with one commit() that
// makes the backend changes and the reclaimed log space durable together.
// Reopening replays the logs (newest record per key) into the frontend.
//
// Durability (see StoreOptions::durability): on pmem or emulated pmem a put
// is durable when it returns; on an ordinary file system, when its group's
// msync has returned (Durability::kSync) or after the next sync() or
// background sync (kAsync).
//
// Thread safety: every method may be called from any number of threads.
// A get of a key in DRAM takes no lock: it reads the bucket's version,
// copies, and retries if the version moved; while a writer holds the bucket
// (on pmem, across its persist barrier) the get spins. A get that misses
// locks the bucket to read the backend.
//
// Errors: a failed persist (an I/O error) or epoch commit stops the store:
// every later update and sync returns that error (gets go on; scans and
// iterators return it too); reopening recovers every acknowledged update.
#ifndef KV_STORE_H_
#define KV_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pm/options.h"
#include "pm/status.h"

namespace kv {

using pm::Code;
using pm::Result;
using pm::Status;

enum class Durability : int {
  // pmem: one persist barrier per put before it returns. Other file systems:
  // a put returns after an msync that covers it (group commit: concurrent
  // puts share one msync).
  kSync = 0,
  // Puts return after writing the record to the mapping; a background
  // thread syncs every async_sync_ms and sync() syncs on request. A crash
  // loses at most the updates since the last sync. Within one log what
  // survives is a prefix; across logs it need not be (an update may survive
  // while an earlier one, in another log, is lost): updates that must
  // survive together belong in one Transaction.
  kAsync = 1,
  // kSync on pmem (a put costs one cache-flush barrier), kAsync on other
  // file systems (where kSync costs an msync per group of puts).
  kSyncOnPmem = 2,
};

struct StoreOptions {
  // --- fixed at create (stored in the container; ignored by open) ---
  // Persistent logs and their size. A put needs room in one log; gleaning
  // frees it. Default 8 logs of 8 MiB; at most kMaxLogs.
  static constexpr int kMaxLogs = 256;
  int logs = 8;
  uint64_t log_bytes = 8ull << 20;
  // Limits: longer keys or values get kInvalidArgument. A value must fit in
  // a quarter of a log.
  uint32_t max_key_bytes = 1024;
  uint32_t max_value_bytes = 1u << 20;
  // Keep an ordered index of the keys (docs/kvstore.md): scans in key
  // order cost O(log n + k). Without it, inserting new keys (and removing
  // keys) costs less in the background (bulk loads of new keys ran 1.8x
  // faster), and every scan reads and sorts all keys of its range.
  bool ordered = true;
  // Heap the container starts with, and the most it may grow to.
  uint64_t initial_heap_bytes = 64ull << 20;
  uint64_t max_heap_bytes = 64ull << 30;

  // --- used at every open ---
  bool create_if_missing = true;
  // Opens an existing store for reading (pm::Options::read_only): gets and
  // scans work, the logs are replayed into DRAM only, nothing is written to
  // the file, no background thread runs; updates, glean(), advance_epoch()
  // and checkpoint() fail with kReadOnly. Readers share the file; a writer
  // excludes them (kBusy).
  bool read_only = false;
  Durability durability = Durability::kSync;
  uint32_t async_sync_ms = 10;
  // DRAM budget for frontend items (keys, values, item headers). 0: no
  // limit. Over it, items whose newest record is committed to the backend
  // are evicted; a get of an evicted key reads the backend and installs it.
  // The backend's private copies of committed pages (the container's
  // working view) are held to the same amount: past it, an epoch releases
  // them, and the next write to such a page faults it in again. Without a
  // budget both grow with what the store has written.
  uint64_t dram_budget_bytes = 0;
  // Background threads. With background = false nothing runs by itself:
  // the caller drives glean() and advance_epoch() (tests, crash harness).
  bool background = true;
  // Gleaner threads: at least min_gleaners run; up to max_gleaners when log
  // occupancy passes 60% and keeps rising, back down below 30%.
  int min_gleaners = 1;
  int max_gleaners = 2;
  // An epoch (one container commit) ends after this long, or sooner when
  // the logs fill.
  uint32_t epoch_ms = 20;
  // Dirty tracker of the backend container. The backend announces every
  // write, so hints (no page faults) is the default.
  pm::TrackerKind tracker = pm::TrackerKind::kHints;
  // Slower-PM emulation for benchmarks (Bullet used 300 ns loads, 100 ns
  // fences): busy-waits this long per persist barrier (a put's, and each of
  // an epoch commit's two) and per PM read (a backend lookup on a miss, a
  // log record read by a gleaner). 0: off.
  uint32_t emulate_persist_ns = 0;
  uint32_t emulate_read_ns = 0;
  pm::Logger logger;
};

struct StoreStats {
  // Live keys: the backend's count plus what records not yet applied to it
  // change (costs a read of those records, not of the data). Exact when no
  // update runs meanwhile.
  uint64_t keys = 0;
  uint64_t frontend_items = 0;   // items in DRAM, tombstones included
  uint64_t frontend_bytes = 0;   // DRAM held by items
  uint64_t frontend_buckets = 0;
  uint64_t backend_keys = 0;     // keys in the committed backend
  uint64_t backend_ghosts = 0;   // remembered removals (see docs/kvstore.md)
  uint64_t container_used_bytes = 0;
  uint64_t container_file_bytes = 0;
  // Room for values: the heap's free bytes, and how far it may still grow
  // (its maximum less its size). The logs, the journal's room and the
  // allocator's metadata are in the file but hold no values.
  uint64_t container_heap_free_bytes = 0;
  uint64_t container_growth_bytes = 0;
  // DRAM held by private copies of committed backend pages (bounded by
  // StoreOptions::dram_budget_bytes when set).
  uint64_t container_private_bytes = 0;
  // Since open: journal bodies the epochs wrote, and new blocks (values,
  // entries) written home once without the journal (pm::ContainerInfo).
  uint64_t container_journaled_bytes = 0;
  uint64_t container_fresh_bytes = 0;
  bool ordered = false;          // the store keeps an ordered index (StoreOptions::ordered)
  uint32_t max_key_bytes = 0;    // the limits fixed at create
  uint32_t max_value_bytes = 0;
  uint64_t max_record_bytes = 0; // largest log record: bounds one transaction
  uint64_t log_bytes = 0;        // total log capacity
  uint64_t log_used_bytes = 0;   // not yet reclaimed by an epoch
  uint64_t puts = 0, removes = 0, gets = 0, misses = 0;
  uint64_t records_applied = 0, records_collapsed = 0;
  uint64_t epochs = 0;
  uint64_t writer_waits = 0;     // puts that found every log full and helped glean
  // Records read again behind one the full backend had no room for (each
  // pass tries only what the last did not, while the heap stays as it was)
  uint64_t blocked_rereads = 0;
  uint64_t background_wakes = 0; // puts that rang for a background thread idle with no work
  int gleaners_active = 0;
  uint64_t snapshots_open = 0;   // scans and iterators reading at a snapshot now
  uint64_t snapshot_versions = 0; // versions kept in DRAM for them (replaced meanwhile)
  uint64_t recovered_records = 0;
  uint64_t recovery_us = 0;
  bool is_pmem = false;
  Durability durability = Durability::kSync;  // in force (kSyncOnPmem resolved at open)
};

class Transaction;

class Store {
 public:
  // Opens the store in container file `path`, creating it when missing (and
  // options.create_if_missing). kNotFound, kBusy (open in another process),
  // kCorruption (damaged file), kInvalidArgument (options out of range, or
  // the file is a container of another kind).
  static Result<std::unique_ptr<Store>> open(const std::string& path,
                                             const StoreOptions& options = StoreOptions());
  // Stops the background threads and closes. Acknowledged puts are already
  // in the logs; the next open replays them.
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // kNotFound when absent; *value is left alone then.
  virtual Status get(std::string_view key, std::string* value) = 0;
  virtual Result<bool> contains(std::string_view key) = 0;
  virtual Status put(std::string_view key, std::string_view value) = 0;
  // kNotFound when the key is absent (nothing is logged).
  virtual Status remove(std::string_view key) = 0;

  using ScanFn = std::function<bool(std::string_view key, std::string_view value)>;

  // Ordered reads. Keys come in byte order (memcmp; a key before its
  // extensions), from the backend's ordered index merged with the updates
  // the logs hold that it does not have yet: O(log n + k), plus a pass over
  // those not yet applied records (bounded by the logs' size).
  // Consistency: a snapshot. The call (or the iterator's seek) reads the
  // store as it was at one point in its order of updates: every update
  // acknowledged before the call, and no update that began after it, and
  // of the updates concurrent with it, a prefix in that order, each
  // transaction whole. Each key once. Writers are not held up: an update
  // made while a snapshot is open keeps a DRAM copy of what it replaces
  // until the snapshot closes (StoreStats::snapshot_versions), so close
  // iterators you are done with. No lock is held while fn runs: fn may
  // call into the store (its updates are not seen by the scan).
  //
  // Calls fn for each key in [begin, end) (end empty: no end), at most
  // limit of them (0: no limit), until fn returns false. A key that cannot
  // be read (a damaged value: kCorruption) ends the scan with its error,
  // after fn has had every key before it.
  virtual Status scan(std::string_view begin, std::string_view end, uint64_t limit,
                      const ScanFn& fn) = 0;
  // Every key with the prefix, in order (the range the prefix spans).
  Status scan(std::string_view prefix, const ScanFn& fn) {
    return scan(prefix, prefix_end(prefix), 0, fn);
  }
  // The first key past every key with this prefix ("" when there is none:
  // an empty prefix, or one of 0xff bytes only).
  static std::string prefix_end(std::string_view prefix);

  // A cursor over [seek key, end) in key order: each seek() opens a
  // snapshot (see scan()), which the next seek() or the iterator's
  // destruction closes. Not thread-safe; must not outlive the store.
  class Iterator {
   public:
    virtual ~Iterator() = default;
    // Positions at the first key >= key; seek("") at the first key.
    virtual void seek(std::string_view key) = 0;
    virtual bool valid() const = 0;
    // REQUIRES: valid().
    virtual void next() = 0;
    // Valid until the next seek() or next().
    virtual std::string_view key() const = 0;
    virtual std::string_view value() const = 0;
    // Not OK when a read failed (the iterator is then not valid); every
    // key before the one that failed is visited first.
    virtual Status status() const = 0;
  };
  // Keys below `end` (empty: no end). Call seek() before reading.
  virtual std::unique_ptr<Iterator> iterator(std::string_view end = {}) = 0;

  // Makes every acknowledged update durable (kAsync) and waits for it.
  virtual Status sync() = 0;
  // Applies logged records to the backend and commits them: empties the logs
  // (recovery after this replays nothing).
  virtual Status checkpoint() = 0;

  // Atomic groups of puts and removes (see Transaction).
  virtual std::unique_ptr<Transaction> begin() = 0;

  virtual StoreStats stats() = 0;
  // The sequence number the next update takes (cheap). Every update (put,
  // remove, transaction) takes the next one, also across reopens: read just
  // after an update, it is that update's number plus one, and after a
  // reopen it is one past the newest update that survived (updates a crash
  // lost take their numbers again).
  virtual uint64_t next_seq() = 0;

  // Maintenance steps, run by the background threads; public for
  // background = false. glean() applies up to max_records records from the
  // logs to the (uncommitted) backend and returns how many it looked at;
  // advance_epoch() commits the backend and reclaims log space.
  virtual Result<uint64_t> glean(uint64_t max_records) = 0;
  virtual Status advance_epoch() = 0;

 protected:
  Store() = default;
  friend class Transaction;
  struct TxnOp {
    bool remove;
    std::string key, value;
  };
  virtual Status apply_batch(std::vector<TxnOp>& ops) = 0;
};

// A group of puts and removes that become visible and durable together: one
// log record, so a crash keeps all of them or none. Reads inside the
// transaction see the store, not the group's own pending writes. Destroying
// an uncommitted transaction aborts it. Not thread-safe (one thread at a
// time); several transactions may run in parallel.
class Transaction {
 public:
  explicit Transaction(Store* s) : store_(s) {}
  Status put(std::string_view key, std::string_view value);
  Status remove(std::string_view key);
  // Applies every operation atomically; removes of absent keys are no-ops.
  // kInvalidArgument when the group does not fit in a log record.
  Status commit();
  void abort() { ops_.clear(); }
  size_t size() const { return ops_.size(); }

 private:
  Store* store_;
  std::vector<Store::TxnOp> ops_;
};

}  // namespace kv

#endif  // KV_STORE_H_
