// KvEngine: one key-value engine of `pm bench kv` (volatile, phash, kvstore,
// pmemobj, rocksdb), one file each (kv_engine_<name>.cc). The suite loads
// keys with prefill(), then times get() and put() from worker threads.
//
// Thread safety: get and put may be called from several threads at once;
// prefill runs alone. An engine removes its files when destroyed.
#ifndef TOOLS_BENCH_KV_KV_ENGINE_H_
#define TOOLS_BENCH_KV_KV_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pm::bench {

class KvEngine {
 public:
  virtual ~KvEngine() = default;

  // kNotFound when the key is absent; other errors from the engine.
  virtual Status get(std::string_view key, std::string* value) = 0;
  // Inserts or overwrites; durable on return for every persistent engine
  // (kvstore: as its default durability gives, see kv/store.h).
  virtual Status put(std::string_view key, std::string_view value) = 0;

  // Loads keys [0, n) with their workload values (untimed for the cells;
  // engines may group the writes). Default: one put each.
  virtual Status prefill(uint64_t n);
  // How prefill writes, for the report: "one put each", ...
  virtual std::string prefill_method() const { return "one put each"; }

  // Finishes, untimed, the work a cell left behind (the kvstore's log
  // backlog), so that the next cell does not inherit it. Default: none.
  virtual Status settle() { return Status(); }

 protected:
  KvEngine() = default;
};

inline std::string_view bytes_view(const unsigned char* p, size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

// Slower-PM read emulation of our engines (kv::StoreOptions::emulate_read_ns):
// a busy-wait per PM read. Barriers are slowed for every engine alike, by
// bench/barrier_delay.h.
struct Emulation {
  uint32_t read_ns = 0;
};

// Busy-waits ns nanoseconds (0: returns at once).
void busy_wait_ns(uint32_t ns);

// The DRAM frontend hash table of the kvstore alone: no persistence.
std::unique_ptr<KvEngine> make_volatile_engine();

// The kvstore's persistent backend hash table alone, in a container at
// `path` with a commit() after every put; the emulation adds a read delay
// per lookup.
Result<std::unique_ptr<KvEngine>> make_phash_engine(const std::string& path, uint64_t keys,
                                                    Emulation emulation);

// DRAM anchors for the frontend: libcuckoo's cuckoohash_map and oneTBB's
// concurrent_hash_map (kNotSupported, saying why, when not built).
Result<std::unique_ptr<KvEngine>> make_cuckoo_engine();
Result<std::unique_ptr<KvEngine>> make_tbb_engine();

// A libpmemobj chained hash map (bench/hashmap_pmemobj.h), one transaction
// per put.
Result<std::unique_ptr<KvEngine>> make_pmemobj_engine(const std::string& path, uint64_t keys);

// Whether this build has the rocksdb engine (librocksdb-dev found by CMake).
bool rocksdb_built();
// RocksDB in directory `path`, every put with WriteOptions::sync. Without
// rocksdb_built(): kNotSupported.
Result<std::unique_ptr<KvEngine>> make_rocksdb_engine(const std::string& path);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_ENGINE_H_
