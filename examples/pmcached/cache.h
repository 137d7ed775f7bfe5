// pmcached::Cache: memcached's item semantics on a kv::Store. Every
// command that changes an item is one store update (put or remove), so it
// is as durable as the store makes it when the call returns; a DRAM index
// (sizes, expiry, last access) answers the questions the store cannot
// cheaply: bytes held, which items to evict, which have expired.
//
// Item value in the store: a 32-byte header (version, client flags, expiry
// as unix seconds, CAS unique, time stored) followed by the data. Keys are
// memcached's (1..250 bytes, no control characters); the cache's own
// records live under keys that start with a NUL byte, which no client key
// can.
//
// Thread safety: every method may be called from any thread. Commands on
// one key are serialised (a stripe lock held across their read and write),
// so add/cas/incr/append are atomic, as in memcached.
#ifndef PMCACHED_CACHE_H_
#define PMCACHED_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <condition_variable>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/store.h"

namespace pmcached {

using pm::Result;
using pm::Status;

inline constexpr size_t kMaxKey = 250;
// memcached: an expiry above 30 days is an absolute unix time.
inline constexpr int64_t kRelativeExpiryMax = 60 * 60 * 24 * 30;

struct CacheOptions {
  uint64_t memory_limit = 64ull << 20;  // -m: item bytes kept before eviction
  uint32_t item_max = 1u << 20;         // -I: largest value
  bool evict = true;                    // -M turns it off: writes fail instead
  // Store durability: kSyncOnPmem makes a write durable before it returns
  // on pmem; elsewhere the server group-commits with sync() before replying.
  kv::Durability durability = kv::Durability::kSyncOnPmem;
  // Seconds since the epoch; tests substitute a clock they move.
  std::function<int64_t()> clock;
  // false: no background thread (expiry sweeps, eviction past the limit);
  // for tests of what a request does alone.
  bool background = true;
  pm::Logger logger;
};

// What the meta protocol keeps with an item (stored with it, so it survives
// a restart as the item does).
inline constexpr uint32_t kStale = 1;      // invalidated (md I, ms I): served with X until replaced
inline constexpr uint32_t kTokenSent = 2;  // a client won its recache (W); the others see Z
inline constexpr uint32_t kKeyBinary = 4;  // stored by ms with a base64 key (b): replies show it so

struct Item {
  uint32_t flags = 0;
  int64_t exptime = 0;  // unix seconds; 0: never
  uint64_t cas = 0;
  uint32_t state = 0;   // kStale, kTokenSent, kKeyBinary
  std::string data;
};

enum class StoreMode { kSet, kAdd, kReplace, kAppend, kPrepend, kCas };
enum class StoreResult { kStored, kNotStored, kExists, kNotFound, kTooLarge, kNoMemory };
enum class DeltaResult { kOk, kNotFound, kNonNumeric, kExists, kCreated, kNoMemory };
enum class DeleteResult { kDeleted, kNotFound, kExists };

// The meta protocol's extras for incr/decr (ma).
struct DeltaOptions {
  std::optional<uint64_t> compare_cas;  // only if the item's CAS is this (else kExists)
  // A missing item is created with `initial` (kCreated; with -M and no
  // room, kNoMemory).
  bool vivify = false;
  int64_t vivify_exptime = 0;
  uint64_t initial = 0;
  const int64_t* touch = nullptr;  // new expiry (a created item's too when touch_last)
  bool touch_last = false;         // T comes after N: a created item takes T's expiry
  int64_t* exptime_before = nullptr;  // out: the item's expiry before `touch`
};

// mg's extras (the meta get): what it may change, and what it reports as
// it was before the command.
struct MetaGet {
  const int64_t* touch = nullptr;  // T: new expiry (protocol form)
  bool vivify = false;             // N: a miss creates an empty item...
  int64_t vivify_exptime = 0;      //    ...expiring so (protocol form)
  bool touch_last = false;         // T comes after N: a created item takes T's expiry
  std::optional<int64_t> recache;  // R: win if the item expires before this (protocol form)
  bool recache_after_touch = false;  // R comes after T: it sees T's expiry
  bool bump = true;                // u turns it off: the access is not recorded
  bool grant = true;               // false: no recache token is given (an error reply)
  bool access = false;             // h or l: fill in fetched and idle
  // Out:
  bool created = false;   // by N (the client won it: W)
  bool won = false;       // W: this client recaches the item
  bool fetched = false;   // h: the item had been read before
  int64_t idle = 0;       // l: seconds since its last access
  int64_t exptime_before = 0;  // its expiry before T or N changed it
};

struct CacheStats {
  uint64_t curr_items = 0, total_items = 0, bytes = 0;
  uint64_t get_hits = 0, get_misses = 0, get_expired = 0, get_flushed = 0;
  uint64_t cmd_get = 0, cmd_set = 0, cmd_touch = 0, cmd_flush = 0;
  uint64_t touch_hits = 0, touch_misses = 0, delete_hits = 0, delete_misses = 0;
  uint64_t incr_hits = 0, incr_misses = 0, decr_hits = 0, decr_misses = 0;
  uint64_t cas_hits = 0, cas_misses = 0, cas_badval = 0;
  uint64_t evictions = 0, reclaimed = 0;
  bool index_ready = false;  // the DRAM index covers every stored item
};

class Cache {
 public:
  // Opens (or creates) the store at `path` and starts rebuilding the index
  // in the background: the cache serves at once.
  static Result<std::unique_ptr<Cache>> open(const std::string& path, const CacheOptions& o);
  ~Cache();
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  // The item, or nothing (absent, expired, flushed). With `touch`, sets its
  // expiry to *touch first (gat).
  Result<bool> get(std::string_view key, Item* out, const int64_t* touch = nullptr);
  // The meta get: get, plus recache tokens (N, R, stale items) and what the
  // item's access record said before (h, l). True when there is an item
  // (found or created).
  Result<bool> meta_get(std::string_view key, Item* out, MetaGet* m);
  // The item's access record for me (meta debug): fetched before, seconds
  // since its last access; false when there is none.
  Result<bool> debug(std::string_view key, Item* out, bool* fetched, int64_t* idle);
  // `exptime` as the protocol gives it (relative, absolute or negative);
  // With `cas` (required by kCas; the meta protocol's C flag for the
  // others), only an item whose CAS unique is *cas is changed, else
  // kExists. As memcached: 0 matches no item for kCas, and compares
  // nothing for the other modes.
  // *cas_out: the stored item's CAS unique.
  // `state`: kKeyBinary for ms with b; with kStale (ms I), a kCas whose
  // unique is older than the item's stores the data as stale, keeping the
  // item's expiry and token.
  Result<StoreResult> store(StoreMode mode, std::string_view key, uint32_t flags,
                            int64_t exptime, std::string_view data,
                            std::optional<uint64_t> cas = std::nullopt,
                            uint64_t* cas_out = nullptr, uint32_t state = 0);
  // Removes the item; with `cas`, only if its CAS unique is *cas.
  // `count` false: not a delete command (the old value a set too large to
  // store removes, which memcached does not count).
  Result<DeleteResult> remove(std::string_view key, std::optional<uint64_t> cas = std::nullopt,
                              bool count = true);
  // md I: marks the item stale instead (a new CAS unique, the recache token
  // free again), with `touch` a new expiry.
  Result<DeleteResult> invalidate(std::string_view key, std::optional<uint64_t> cas,
                                  const int64_t* touch);
  Result<bool> touch(std::string_view key, int64_t exptime);
  // incr (or decr): *value is the new value; *result (if given) the item.
  Result<DeltaResult> delta(std::string_view key, bool incr, uint64_t by, uint64_t* value,
                            const DeltaOptions& o = {}, Item* result = nullptr);
  // Every item stored until now (delay 0) or until `delay` seconds from now
  // becomes invalid (from then on).
  Status flush_all(int64_t delay);

  // Makes every change so far durable (group commit for kAsync stores).
  Status sync();
  // Applies the logs to the backend (a clean stop: the next open replays nothing).
  Status checkpoint();

  CacheStats stats();
  void reset_stats();
  const CacheOptions& options() const { return o_; }
  kv::StoreStats store_stats() { return store_->stats(); }
  int64_t now() const { return o_.clock(); }
  // An expiry as the protocol gives it (0 never, up to 30 days relative,
  // beyond a unix time, negative expired) as a unix time; -1: expired.
  int64_t absolute(int64_t exptime) const;

  // What the dumps of memcached (lru_crawler metadump, stats cachedump)
  // print of an item: all from the DRAM index, nothing read from the store.
  struct DumpedItem {
    std::string_view key;  // the client's key
    int64_t exptime;       // unix time, 0: never
    int64_t last_access;   // unix time
    uint64_t cas;
    bool fetched;          // read since stored
    uint64_t bytes;        // key + item header + data
    uint64_t data_bytes;
  };
  // Calls fn for each live item of index shard `shard` (0 to
  // kDumpShards - 1), under that shard's lock. Items written meanwhile to
  // shards dumped already are not seen, as in memcached's crawl; while the
  // index is being rebuilt (stats: index_ready 0) only the items indexed so
  // far are.
  static constexpr size_t kDumpShards = 1024;
  void dump(size_t shard, const std::function<void(const DumpedItem&)>& fn);

  // Removes expired and flushed items; returns how many. The background
  // thread runs it every second over a share of the index.
  uint64_t sweep(size_t first_shard, size_t shards);
  // Waits until the index covers every item (tests).
  void wait_for_index();
  // Why the index could not be rebuilt from the store (a damaged or failing
  // store: the server stops), or OK.
  Status index_error();
  // Calls `f` (from the rebuild's thread, or now) once the rebuild has
  // ended; nullptr unsets it, after which it is not running and not called.
  void on_index_done(std::function<void()> f);

 private:
  struct Entry {
    uint32_t bytes;    // key + header + data
    uint32_t atime;    // seconds since start, for eviction and mg l
    bool fetched;      // read since stored (mg h)
    int64_t exptime;   // 0: never
    int64_t time;      // stored at
    uint64_t cas;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry> index;
    // Keys removed while the index is being rebuilt: the rebuild must not
    // bring them back.
    std::unordered_set<std::string> removed_during_rebuild;
  };
  static constexpr size_t kShards = kDumpShards;

  Cache(std::unique_ptr<kv::Store> store, const CacheOptions& o);
  Status init();
  Shard& shard_of(std::string_view key);
  bool dead(int64_t exptime, int64_t time, uint64_t cas) const;
  // Reads the key's live item under its shard lock (removing it if dead);
  // `bump` records the access (a get's, not a write's).
  Result<bool> read_locked(Shard& s, std::string_view key, Item* out, int64_t* time,
                           bool bump = false);
  // `fresh`: a new item, not yet read (a set); else the item changed in
  // place (touch, incr, invalidation) and keeps its access record.
  Status write_locked(Shard& s, std::string_view key, const Item& it, int64_t time,
                      bool fresh = true);
  Status remove_locked(Shard& s, std::string_view key);
  Result<StoreResult> no_memory(Shard& s, StoreMode mode, std::string_view key);
  Result<uint64_t> next_cas();
  // Evicts until the items fit the memory limit, or items of twice
  // `added` bytes went (a write passes what it added: so none waits long,
  // even after a restart with a smaller -m left the cache far over it;
  // the background thread evicts the rest). Never `keep`, the item just
  // stored (memcached's is at the head of its LRU). Access times are in
  // seconds: without it, a set among items used in the same second could
  // evict its own item, and the get right after it missed.
  Status evict_if_over(std::string_view keep, uint64_t added);
  // meta_get and delta under the key's stripe lock (store keys); their
  // callers evict for a created item once it is released.
  Result<bool> meta_get_locked(std::string_view key, Item* out, MetaGet* m);
  Result<DeltaResult> delta_locked(std::string_view key, bool incr, uint64_t by, uint64_t* value,
                                   const DeltaOptions& o, Item* result);
  void rebuild_index();
  void background();

  std::unique_ptr<kv::Store> store_;
  CacheOptions o_;
  std::string path_;  // the store's, for messages
  const int64_t start_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> bytes_{0}, items_{0};
  std::atomic<bool> index_ready_{false};

  // CAS uniques: handed out from a block whose end is stored first, so
  // that none is reused after a restart.
  std::mutex cas_mu_;
  uint64_t cas_next_ = 1, cas_end_ = 0;
  // flush_all: items with cas <= flush_cas_ are gone; items stored before
  // flush_time_ are gone once that time has come. Stored (survive restart).
  std::atomic<uint64_t> flush_cas_{0};
  std::atomic<int64_t> flush_time_{0};

  struct Counters;
  std::unique_ptr<Counters> n_;

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  std::atomic<bool> stopping_{false};
  bool rebuild_done_ = false;  // guarded by bg_mu_
  Status rebuild_error_;       // guarded by bg_mu_
  std::function<void()> index_done_;  // guarded by bg_mu_
  std::thread rebuild_, background_;
};

// Parses a decimal uint64 as memcached's safe_strtoull does: strtoull's
// syntax (leading white space, a '+', leading zeros), then the end or white
// space (what follows is ignored); no '-', fits 64 bits.
bool parse_u64(std::string_view s, uint64_t* out);

}  // namespace pmcached

#endif  // PMCACHED_CACHE_H_
