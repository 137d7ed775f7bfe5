// StoreImpl: the store's engine (see kv/store.h for the contract and
// docs/kvstore.md for the design). Private to kvstore; the crash harness
// uses open_store_on() to run a store on a container it opened itself.
#ifndef KVSTORE_STORE_IMPL_H_
#define KVSTORE_STORE_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "kv/store.h"
#include "kvstore/backend.h"
#include "kvstore/crl.h"
#include "kvstore/frontend.h"
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

struct LogState {
  std::unique_ptr<Log> log;
  std::mutex writer_mu;                // held by the put appending to it
  std::mutex glean_mu;                 // held by the gleaner reading it
  std::atomic<uint64_t> head{0};       // committed head: space before it is free
  std::atomic<uint64_t> tail{0};       // end of the last complete record
  std::atomic<uint64_t> glean_pos{0};  // applied to the working backend up to here
  std::atomic<uint64_t> synced{0};     // durable up to here (msync and async paths)
};

class StoreImpl final : public Store {
 public:
  StoreImpl(pm::Container* c, std::unique_ptr<pm::Container> owned, const StoreOptions& o);
  ~StoreImpl() override;

  Status recover();
  void start_threads();

  Status get(std::string_view key, std::string* value) override;
  Result<bool> contains(std::string_view key) override;
  Status put(std::string_view key, std::string_view value) override;
  Status remove(std::string_view key) override;
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn) override;
  Status sync() override;
  Status checkpoint() override;
  std::unique_ptr<Transaction> begin() override { return std::make_unique<Transaction>(this); }
  StoreStats stats() override;
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
  // Logs and installs a group of updates (one record). For a single remove
  // of an absent key: kNotFound.
  Status update(std::vector<Update>& ups, bool single);
  LogState* acquire_log(uint64_t n, bool* busy);
  Status help_glean();
  Status wait_durable(LogState* L, uint64_t end);
  Status lead_sync(std::unique_lock<std::mutex>& l);
  Status sync_logs();
  // Reads a key missing from the frontend from the backend and installs it.
  Status miss(std::string_view key, uint64_t h, std::string* value, bool* found);
  Status apply_op(const Op& op, LogRef ref, uint64_t seq);
  bool clean(const Item& it) const {
    uint64_t e = it.applied_epoch.load(std::memory_order_acquire);
    return e != 0 && e <= committed_epoch_.load(std::memory_order_acquire);
  }
  void drop_applied_tombstones(std::vector<std::string>& keys);
  Status background_error() const;
  void set_background_error(const Status& s);
  void maintenance_loop();
  void gleaner_loop(int id);
  double occupancy() const;

  pm::Container* c_;
  std::unique_ptr<pm::Container> owned_;
  StoreOptions o_;
  std::unique_ptr<Backend> be_;
  Frontend fe_;
  std::vector<std::unique_ptr<LogState>> logs_;
  Limits limits_;
  bool pmem_ = false;
  uint32_t session_ = 0;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> committed_epoch_{1};

  std::shared_mutex epoch_mu_;  // gleaners shared, advance_epoch exclusive
  std::mutex txn_mu_;           // transactions hold several buckets: one at a time
  std::mutex tomb_mu_;
  std::vector<std::string> tomb_keys_;  // removes applied in the epoch being built
  std::atomic<uint32_t> glean_rr_{0};

  std::mutex sync_mu_;  // group commit
  std::condition_variable sync_cv_;
  bool syncing_ = false;

  mutable std::mutex err_mu_;
  Status bg_error_;

  std::atomic<bool> stop_{false};
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  std::thread maintenance_;
  std::vector<std::thread> gleaners_;
  std::atomic<int> active_gleaners_{0};
  std::atomic<bool> background_idle_{false};  // a background thread sleeps: wake it
  double last_occupancy_ = 0;

  struct Counters {
    std::atomic<uint64_t> puts{0}, removes{0}, gets{0}, misses{0};
    std::atomic<uint64_t> applied{0}, collapsed{0}, epochs{0}, writer_waits{0};
    uint64_t recovered_records = 0, recovery_us = 0;
  } n_;
};

}  // namespace kv

#endif  // KVSTORE_STORE_IMPL_H_
