// pmcached::PrefixStats: memcached's `stats detail` (on, off, dump): while
// it is on, gets, hits, sets and deletes are counted per key prefix, the
// part of a key before its first ':' (keys without one are not counted).
// The classic commands count (get, gets, gat, gats per key; the storage
// commands; delete), the meta commands do not, as in memcached 1.6.18.
//
// Thread safety: every member may be called from any thread.
#ifndef PMCACHED_PREFIX_STATS_H_
#define PMCACHED_PREFIX_STATS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace pmcached {

class PrefixStats {
 public:
  void enable(bool on) { on_.store(on, std::memory_order_relaxed); }
  void record_get(std::string_view key, bool hit);
  void record_set(std::string_view key);
  void record_delete(std::string_view key);
  // "PREFIX <prefix> get <n> hit <n> set <n> del <n>\r\n" per prefix (in
  // key order; memcached's is its hash table's), then "END\r\n".
  void dump(std::string* out) const;
  void clear();  // stats reset

 private:
  struct Counts {
    uint64_t gets = 0, hits = 0, sets = 0, deletes = 0;
  };
  // The key's prefix's counts, or nullptr (off, or no ':'). REQUIRES: mu_.
  Counts* find(std::string_view key);

  std::atomic<bool> on_{false};
  mutable std::mutex mu_;
  std::map<std::string, Counts, std::less<>> prefixes_;
};

}  // namespace pmcached

#endif  // PMCACHED_PREFIX_STATS_H_
