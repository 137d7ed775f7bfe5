// StoreImpl: the store's API over its units (see kv/store.h for the
// contract and docs/kvstore.md for the design):
//   LogWriter   (log_writer.h)  appends records; durable positions; group commit
//   Gleaner     (gleaner.h)     applies records to the backend; epochs
//   recover()   (recovery.h)    rebuilds DRAM state at open; sessions
//   Backend     (backend.h)     the persistent hash table in the container
//   Frontend    (frontend.h)    the DRAM hash table every request reads
// Private to kvstore; the crash harness uses open_store_on() to run a store
// on a container it opened itself.
#ifndef KVSTORE_STORE_IMPL_H_
#define KVSTORE_STORE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kv/store.h"
#include "kvstore/backend.h"
#include "kvstore/crl.h"
#include "kvstore/doorbell.h"
#include "kvstore/frontend.h"
#include "kvstore/gleaner.h"
#include "kvstore/log_writer.h"
#include "kvstore/snapshot_versions.h"
#include "kvstore/store_state.h"
#include "libpm/file_lock.h"
#include "pm/container.h"

namespace kv {

// Container options for a new store file with these store options.
pm::Options container_options(const StoreOptions& o);
// Checks the fixed-at-create options; the message names the bad one.
Status check_store_options(const StoreOptions& o);
// Formats a store in a new (empty) container: the caller commits.
Status format_store(pm::Container* c, const StoreOptions& o);
// Opens a store on an open container (recovery included). The container
// must outlive the store.
Result<std::unique_ptr<Store>> open_store_on(pm::Container* c, const StoreOptions& o);

class StoreImpl final : public Store {
 public:
  // `path`: the file, for messages ("" for a caller's container).
  StoreImpl(pm::Container* c, std::unique_ptr<pm::Container> owned, const StoreOptions& o,
            const std::string& path);
  ~StoreImpl() override;

  Status recover();
  Status start_threads();

  Status get(std::string_view key, std::string* value) override;
  Result<bool> contains(std::string_view key) override;
  Status put(std::string_view key, std::string_view value) override;
  Status remove(std::string_view key) override;
  using Store::scan;
  Status scan(std::string_view begin, std::string_view end, uint64_t limit,
              const ScanFn& fn) override;
  std::unique_ptr<Iterator> iterator(std::string_view end) override;
  Status sync() override;
  Status checkpoint() override;
  std::unique_ptr<Transaction> begin() override { return std::make_unique<Transaction>(this); }
  StoreStats stats() override;
  uint64_t next_seq() override { return next_seq_.load(); }
  // Makes the next update take at least `seq` (salvage: a copy goes on
  // from its source's numbers, so that no mark of a number the source
  // handed out, such as the mount's clean-end mark, can hold in the copy).
  // REQUIRES: no update runs.
  void continue_numbering(uint64_t seq) { next_seq_ = std::max(next_seq_.load(), seq); }
  Result<uint64_t> glean(uint64_t max_records) override;
  Status advance_epoch() override;

 protected:
  Status apply_batch(std::vector<TxnOp>& ops) override;

 private:
  struct Update {
    bool remove;
    std::string_view key, value;
    uint64_t hash;
  };
  Status check_sizes(std::string_view key, std::string_view value) const;
  // get() and scan() without the guard that makes out of DRAM a status.
  Status get_unguarded(std::string_view key, std::string* value);
  Status scan_unguarded(std::string_view begin, std::string_view end, uint64_t limit,
                        const ScanFn& fn);
  // OK unless opened read-only (StoreOptions::read_only).
  Status writable() const {
    if (!o_.read_only) return Status();
    return Status::read_only(c_->usage().path + ": opened read-only; open it writable to change it");
  }
  // Logs and installs a group of updates (one record). For a single remove
  // of an absent key: kNotFound.
  Status update(std::vector<Update>& ups, bool single);
  // A log with room for n bytes (its writer lock held), gleaning and ending
  // an epoch when every log is full; only a record that removes and puts at
  // most kSmallRecordPutBytes may use the last sixteenth of a log.
  static constexpr uint64_t kSmallRecordPutBytes = 1024;
  Result<LogState*> log_for(uint64_t n, uint64_t put_bytes, bool removes);
  // Reads a key missing from the frontend from the backend and, when
  // `install` (and within the DRAM budget), installs it.
  // *seq (when asked): the number of the version read (0: never written).
  Status miss(std::string_view key, uint64_t h, std::string* value, bool* found,
              bool install = true, uint64_t* seq = nullptr);
  // Opens a snapshot (store_scan.cc, snapshot_versions.h) and returns its
  // number: every update numbered at or below it is installed, and
  // read_for_scan() at it sees no later one, for the keys of [begin, end)
  // (end empty: no end). close_snapshot() ends it. May throw bad_alloc.
  SnapshotVersions::Snapshot open_snapshot(std::string_view begin, std::string_view end);
  void close_snapshot(const SnapshotVersions::Snapshot& snap) { versions_.release(snap); }
  // While a snapshot is open: keeps what the updates ups[which[...]],
  // numbered seq, replace (old: their current items, or nullptr when the
  // backend holds the current version). REQUIRES: their buckets locked.
  Status keep_replaced(const std::vector<Update>& ups, const std::vector<size_t>& which,
                       const std::vector<Item*>& old, uint64_t seq);
  // A key's value at snapshot `snap` for an ordered read (store_scan.cc):
  // the frontend, else the backend, installing nothing (a scan must not
  // fill DRAM); a version newer than snap is replaced by the one kept.
  // *missed: the frontend did not hold the key (the backend was read).
  Status read_for_scan(std::string_view key, uint64_t h, uint64_t snap, std::string* value,
                       bool* found, bool* missed);
  friend class OrderedReader;
  friend class ScanSnapshot;
  // Over the DRAM budget: evicts items whose version is committed.
  void evict_over_budget();
  bool persist_each() const { return durability_ == Durability::kSync && pmem_; }

  // Background threads (background.cc).
  void maintenance_loop();
  void gleaner_loop(int id);
  void wake_background_if(uint32_t log, uint64_t end);
  void sleep_background(uint32_t ms, std::atomic<bool>* idle);

  pm::Container* c_;
  std::unique_ptr<pm::Container> owned_;
  StoreOptions o_;
  StopLatch stop_;
  StoreCounters n_;
  std::unique_ptr<Backend> be_;
  Frontend fe_;
  std::unique_ptr<LogWriter> logs_;
  std::unique_ptr<Gleaner> gleaner_;
  Limits limits_;
  bool pmem_ = false;
  Durability durability_ = Durability::kSync;  // in force (kSyncOnPmem resolved)
  uint32_t session_ = 0;
  std::atomic<uint64_t> next_seq_{1};
  SnapshotVersions versions_;  // what updates replace while a scan is open
  std::mutex txn_mu_;  // transactions hold several buckets: one at a time

  std::atomic<bool> stopping_{false};
  Doorbell bell_;  // wakes the background threads (a put rings it: it never blocks)
  std::thread maintenance_;
  std::vector<std::thread> gleaners_;
  const uint64_t forks_at_open_ = pm::FileLock::forks();
  std::atomic<int> active_gleaners_{0};
  // A background thread sleeps with nothing to do: a writer with work for
  // it rings (wake_background_if).
  std::atomic<bool> gleaners_idle_{false}, maintenance_idle_{false};
  // No update for a while and nothing left in the logs: the background
  // threads sleep kDeepIdleMs at a time (an idle daemon woke 120 times a
  // second), and the next update rings them (wake_background_if).
  static constexpr uint32_t kDeepIdleMs = 1000;
  // The longest wait between background epochs that find no room (a full
  // disk; background.cc): space freed on the disk is used within it.
  static constexpr uint32_t kFullDiskWaitMs = 1000;
  std::atomic<bool> deep_idle_{false};
  // Sets deep_idle_ once the store has been quiet for a second of rounds.
  void note_quiet(uint64_t* seq_seen, uint32_t* rounds);
  std::atomic<uint64_t> wakes_{0};  // rings by wake_background_if (StoreStats)
  double last_occupancy_ = 0;
};

}  // namespace kv

#endif  // KVSTORE_STORE_IMPL_H_
