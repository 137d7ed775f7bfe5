// cuckoo and tbb: two well-kept concurrent DRAM hash tables as anchors for
// the kvstore's frontend (the `volatile` engine): libcuckoo's
// cuckoohash_map and oneTBB's concurrent_hash_map, with the same 16-byte
// keys, the same hash (kv::hash_key, XXH3) and std::string values. A put
// overwrites the value in place where the table allows it (no allocation
// when the size does not change); a get copies the value out.
#include <cstring>

#include "bench/kv/kv_engine.h"
#include "bench/common/workload.h"
#include "kvstore/frontend.h"  // kv::hash_key

#ifdef PM_BENCH_CUCKOO
#include <libcuckoo/cuckoohash_map.hh>
#endif
#ifdef PM_BENCH_TBB
#include <oneapi/tbb/concurrent_hash_map.h>
#endif

namespace pm::bench {

namespace {

struct Key16 {
  unsigned char b[kKeyBytes];
  bool operator==(const Key16& o) const { return std::memcmp(b, o.b, sizeof b) == 0; }
};

struct Key16Hash {
  size_t operator()(const Key16& k) const {
    return kv::hash_key({reinterpret_cast<const char*>(k.b), sizeof k.b});
  }
};

// The bench's keys are all kKeyBytes long.
Status to_key(std::string_view s, Key16* k) {
  if (s.size() != sizeof k->b) return Status::invalid_argument("keys are 16 bytes here");
  std::memcpy(k->b, s.data(), sizeof k->b);
  return Status();
}

#ifdef PM_BENCH_CUCKOO
class CuckooEngine final : public KvEngine {
 public:
  Status get(std::string_view key, std::string* value) override {
    Key16 k;
    PM_TRY(to_key(key, &k));
    return map_.find(k, *value) ? Status() : Status::not_found("no such key");
  }

  Status put(std::string_view key, std::string_view value) override {
    Key16 k;
    PM_TRY(to_key(key, &k));
    map_.upsert(k, [&](std::string& v) { v.assign(value); }, value);
    return Status();
  }

 private:
  libcuckoo::cuckoohash_map<Key16, std::string, Key16Hash> map_;
};
#endif

#ifdef PM_BENCH_TBB
class TbbEngine final : public KvEngine {
 public:
  Status get(std::string_view key, std::string* value) override {
    Key16 k;
    PM_TRY(to_key(key, &k));
    Map::const_accessor a;
    if (!map_.find(a, k)) return Status::not_found("no such key");
    value->assign(a->second);
    return Status();
  }

  Status put(std::string_view key, std::string_view value) override {
    Key16 k;
    PM_TRY(to_key(key, &k));
    Map::accessor a;
    map_.insert(a, k);
    a->second.assign(value);
    return Status();
  }

 private:
  struct HashCompare {
    static size_t hash(const Key16& k) { return Key16Hash()(k); }
    static bool equal(const Key16& a, const Key16& b) { return a == b; }
  };
  using Map = tbb::concurrent_hash_map<Key16, std::string, HashCompare>;
  Map map_;
};
#endif

}  // namespace

Result<std::unique_ptr<KvEngine>> make_cuckoo_engine() {
#ifdef PM_BENCH_CUCKOO
  return std::unique_ptr<KvEngine>(new CuckooEngine);
#else
  return Status::not_supported(
      "cuckoo: not built (libcuckoo-dev was not found when CMake ran; tools/install-deps.sh "
      "installs it)");
#endif
}

Result<std::unique_ptr<KvEngine>> make_tbb_engine() {
#ifdef PM_BENCH_TBB
  return std::unique_ptr<KvEngine>(new TbbEngine);
#else
  return Status::not_supported(
      "tbb: not built (libtbb-dev was not found when CMake ran; tools/install-deps.sh installs "
      "it)");
#endif
}

}  // namespace pm::bench
