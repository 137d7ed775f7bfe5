// The persistent backend: a linear-hashing table in the libpm container,
// changed only by gleaners (plain stores on the working view, announced with
// will_write) and made durable by the epoch's commit().
//
// Each entry keeps the sequence number of the update it holds, so an older
// record can never overwrite a newer one, and recovery can tell which log
// records the backend already reflects. A removal leaves a "ghost" (key and
// sequence number, no value) until no log record older than it remains in
// any log; otherwise a crash could replay an older put of a removed key.
//
// Damage: every link followed and every entry read is checked against the
// heap's bounds and the store's limits first, chains are walked with a
// bound on their length, and an entry's checksum is verified before its
// value is returned: a damaged file gives kCorruption, never a crash, a
// loop or a value that was never written.
#ifndef KVSTORE_BACKEND_H_
#define KVSTORE_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "kvstore/backend_entry.h"
#include "kvstore/ordered_index.h"
#include "pm/container.h"
#include "pm/status.h"

namespace kv {

using pm::Result;
using pm::Status;

inline constexpr uint64_t kBackendMagic = 0x31444e454b434142;  // "BACKEND1"
// 2: session_start (recovery.h). 3: the ordered index (ordered_index.h).
// 4: chain ends marked (kChainEndsMarked). Older roots are upgraded at the
// first writable open.
inline constexpr uint32_t kBackendVersion = 4;
inline constexpr uint32_t kMaxLogs = 256;
inline constexpr uint64_t kSegBuckets = 4096;  // buckets per segment (32 KiB)
inline constexpr uint64_t kMaxSegs = 16384;    // up to 64 Mi buckets
// BackendRoot::flags: every entry carries a checksum (a store created with
// checksums; an upgraded one keeps its older entries as they were).
inline constexpr uint64_t kAllEntriesChecksummed = 1;
// Every chain ends in its bucket's chain_end() mark (backend_entry.h); a 0
// link is damage.
inline constexpr uint64_t kChainEndsMarked = 2;

struct BackendRoot {
  uint64_t magic;
  uint32_t version;
  uint32_t nlogs;
  uint64_t log_bytes;
  uint32_t max_key, max_value;
  uint64_t seq_high;  // every sequence number in the backend is below it
  uint64_t count;     // live keys at the last commit
  uint64_t ghosts;
  uint64_t session;   // incremented (and committed) at every open
  BackendEntry* ghost_head;
  uint64_t level, split;       // linear hashing: kSegBuckets << level buckets, plus split
  uint64_t heads[kMaxLogs];    // committed head of each log
  BackendEntry** segs[kMaxSegs];
  // Version 2. Where session `session` began writing each log: the end of
  // the valid records its recovery found there (recovery.h).
  uint64_t session_start[kMaxLogs];
  uint64_t flags;  // kAllEntriesChecksummed, kChainEndsMarked
  // Version 3. The ordered index of the live keys (an IndexRoot); 0: a
  // store created without one (StoreOptions::ordered).
  uint64_t index;
};
inline constexpr size_t kBackendRootV1Bytes = offsetof(BackendRoot, session_start);
inline constexpr size_t kBackendRootV2Bytes = offsetof(BackendRoot, index);

// The bucket of hash h in the table as the root describes it (linear
// hashing: kSegBuckets << level buckets, plus the split ones).
inline uint64_t bucket_for(const BackendRoot& r, uint64_t h) {
  const uint64_t n = kSegBuckets << r.level;
  uint64_t b = h & (n - 1);
  if (b < r.split) b = h & (2 * n - 1);
  return b;
}

struct Geometry {
  uint32_t nlogs = 0;
  uint64_t log_bytes = 0;
  uint32_t max_key = 0, max_value = 0;
  bool ordered = true;  // with an ordered index
};

class Backend {
 public:
  // Formats a backend in `c` and makes it the root (durable at the next commit).
  static Result<std::unique_ptr<Backend>> create(pm::Container* c, const Geometry& g);
  // Attaches to the root of `c`; kCorruption/kInvalidArgument if it is not one.
  static Result<std::unique_ptr<Backend>> attach(pm::Container* c);

  BackendRoot* root() const { return root_; }
  // A version 1 root: no session boundaries, no flags (recovery upgrades it).
  bool legacy() const { return root_->version == 1; }
  // Every entry must carry a checksum.
  bool all_checksummed() const { return !legacy() && (root_->flags & kAllEntriesChecksummed); }
  // Chains end in marks, not 0.
  bool ends_marked() const { return !legacy() && (root_->flags & kChainEndsMarked); }
  // An older root (before 3, no ordered index: scans order what they find
  // instead; before 4, chain ends not marked).
  bool upgradable() const { return root_->version < kBackendVersion; }
  // Moves an older root into a current one, building the ordered index
  // from the live entries and marking every chain's end (durable at the
  // next commit). Single-threaded. On failure the caller aborts: the root,
  // the index and the chains are then as before.
  Status upgrade();
  // The ordered index of the live keys; nullptr for a store created
  // without one, or an older root opened read-only.
  const OrderedIndex* index() const { return index_.get(); }
  // Not OK when the root's index is damaged (then index() is nullptr).
  const Status& index_status() const { return index_status_; }

  // "" when e may be read (inside the heap, lengths within the limits).
  std::string entry_problem(const BackendEntry* e) const;
  // Chains and the ghost list longer than this loop.
  uint64_t max_chain() const { return count() + ghosts() + 1024; }
  // Announces a root field write (hints tracker).
  template <typename T>
  void set(T* field, T v) {
    c_->will_write(field, sizeof(T));
    *field = v;
  }

  struct Found {
    bool present = false;  // a live entry (value filled in when asked)
    bool ghost = false;    // a remembered removal
    uint64_t seq = 0;
  };
  // Thread-safe with apply_*.
  Result<Found> get(std::string_view key, uint64_t h, std::string* value);
  // For a scan that read key from the index and then found no live entry
  // of it: kCorruption if the index still holds it while the table holds no
  // live entry (under the stripe lock, index keys == live keys: see
  // ordered_index.h), i.e. a damaged index key that still sorts between its
  // neighbours and stands for a key the scan would leave out. OK when the
  // key was removed (or put) meanwhile. Thread-safe with apply_*.
  Status check_indexed(std::string_view key, uint64_t h);

  // Apply one update unless the backend already holds a newer one (seq).
  // Thread-safe with each other and with get (not with the exclusive ones).
  Status apply_put(std::string_view key, uint64_t h, std::string_view value, uint64_t seq);
  Status apply_remove(std::string_view key, uint64_t h, uint64_t seq);
  // Brings the head of hash h's chain into the cache. Like apply_*, it must
  // not run beside the exclusive ones (the gleaners' epoch lock sees to it).
  void prefetch(uint64_t h) const { __builtin_prefetch(slot(bucket_of(h))); }
  // Then the chain's first entry (once the bucket is cached: a second pass
  // over a batch), where an update writes: header, key and value. A hint
  // only: the head is read without the stripe lock, while an apply may be
  // changing it, and is never dereferenced (hence no TSan: the racy read is
  // the point).
  void prefetch_head(uint64_t h) const { prefetch_entry<1>(h); }

  // For a reader outside the gleaners' epoch lock (a scan whose keys miss
  // the frontend): the chain's head under the structure lock, and with
  // `entry`, its first entry's header, key and value, read-only.
  void prefetch_for_read(uint64_t h, bool entry);

  // --- exclusive: no apply or get may run ---
  // Splits buckets until the load factor is at most 1 (or max_splits done).
  Status split_as_needed(uint64_t max_splits);
  // Forgets ghosts older than min_live_seq (no record older can remain)
  // and, when `older_in_logs` is given, each newer ghost for whose key it
  // says no record older than the ghost is left in the logs (key, ghost's
  // sequence number). A ghost only keeps such a record from bringing its
  // key back when it is applied or replayed.
  Status purge_ghosts(uint64_t min_live_seq,
                      const std::function<bool(std::string_view, uint64_t)>& older_in_logs = {});
  // Writes the live counters into the root (before a commit).
  void store_counters();

  // Visits live entries with the prefix (in no order), in batches copied
  // out of the table, so fn may call into the store. Stops when fn returns false.
  // Each key present for the whole scan is visited exactly once, whatever
  // splits run meanwhile; keys changed meanwhile may or may not be.
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn);

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t ghosts() const { return ghosts_.load(std::memory_order_relaxed); }
  uint64_t buckets() const { return (kSegBuckets << root_->level) + root_->split; }
  // Read lock for callers that combine several gets consistently.
  std::shared_mutex& structure_mutex() { return struct_mu_; }

 private:
  Backend(pm::Container* c, BackendRoot* r);
  uint64_t bucket_of(uint64_t h) const;
  template <int kWrite>
  __attribute__((no_sanitize("thread"))) void prefetch_entry(uint64_t h) const {
    BackendEntry* head = *const_cast<BackendEntry* const volatile*>(slot(bucket_of(h)));
    if (is_chain_end(head)) return;
    const char* e = reinterpret_cast<const char*>(head);
    __builtin_prefetch(e, kWrite);
    __builtin_prefetch(e + 64, kWrite);
    __builtin_prefetch(e + 128, kWrite);
  }
  BackendEntry** slot(uint64_t b) const { return &root_->segs[b / kSegBuckets][b % kSegBuckets]; }
  std::mutex& stripe(uint64_t b) { return stripes_[b % kStripes]; }
  // Finds the key's entry and the link that points to it (the chain's end
  // when absent). REQUIRES: stripe lock.
  Result<BackendEntry**> find_link(uint64_t b, std::string_view key);
  // kCorruption when an entry of bucket b holds a key of another bucket: a
  // damaged byte in the key sought, or in its length, would make it a miss.
  Status check_passed_keys(uint64_t b) const;
  Result<BackendEntry*> new_entry(std::string_view key, std::string_view value, uint64_t seq,
                                  bool ghost);
  // What ends bucket b's chain: its mark, or 0 in an older store.
  BackendEntry* end_of(uint64_t b) const { return ends_marked() ? chain_end(b) : nullptr; }
  // kCorruption unless `end`, where a walk of bucket b stopped, is its end.
  Status check_end(uint64_t b, const BackendEntry* end) const;
  Status add_index();        // upgrade(): a version 1 or 2 root into a 3
  Status mark_chain_ends();  // upgrade(): a version 3 root into a 4
  void link_ghost(BackendEntry* e);
  // kCorruption when e may not be read.
  Status check_entry(const BackendEntry* e) const;
  // kCorruption when a value read from e would not be what was written.
  Status check_sum(const BackendEntry* e) const;

  static constexpr int kStripes = 256;
  pm::Container* c_;
  BackendRoot* root_;
  std::shared_mutex struct_mu_;  // shared: get/apply; exclusive: split, purge
  std::mutex stripes_[kStripes];
  std::mutex ghost_mu_;  // the ghost list
  std::atomic<uint64_t> count_{0}, ghosts_{0};
  // Changed with the entry that makes a key live or dead, in the same
  // working view, under the same commit (ordered_index.h).
  std::unique_ptr<OrderedIndex> index_;
  Status index_status_;
};

}  // namespace kv

#endif  // KVSTORE_BACKEND_H_
