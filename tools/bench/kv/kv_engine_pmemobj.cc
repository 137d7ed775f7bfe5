// pmemobj: the PMDK baseline, bench/hashmap_pmemobj.h's chained hash map
// (16-byte keys, 100-byte values in place), one libpmemobj transaction per
// put. It cannot be slowed by the PM emulation (libpmemobj has no hook).
//
// Concurrency: the map has none of its own. Here a lock stripe per bucket
// group serialises the operations on a bucket (a get must not read a value
// a transaction is copying, nor a chain it is rolling back), and puts that
// insert a new key (and so change the map's shared count) also hold
// insert_mu_. The timed cells only overwrite prefilled keys, so two
// threads' operations on different stripes run in parallel.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#include "bench/container/hashmap_pmemobj.h"
#include "bench/kv/kv_engine.h"
#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"

namespace pm::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPrefillBatch = 1000;
constexpr size_t kStripes = 256;  // divides the bucket count: a bucket has one stripe

class PmemobjEngine final : public KvEngine {
 public:
  explicit PmemobjEngine(std::string path) : file_(std::move(path)) {}
  ~PmemobjEngine() override { map_.reset(); }  // closed before file_ removes it

  Status open(uint64_t keys) {
    const uint64_t nbuckets = std::max<uint64_t>(kStripes, pow2_at_least(keys));
    // Buckets, 136-byte nodes with allocator headers and slack, as the
    // container suite sizes its pool.
    const uint64_t pool =
        std::max<uint64_t>(PMEMOBJ_MIN_POOL, nbuckets * 16 + keys * 256 + 64 * kMiB);
    Result<std::unique_ptr<PmemobjHashMap>> m =
        PmemobjHashMap::create(file_.path(), pool, nbuckets);
    if (!m.ok()) return m.status();
    map_ = std::move(*m);
    return Status();
  }

  Status get(std::string_view key, std::string* value) override {
    const auto* k = reinterpret_cast<const unsigned char*>(key.data());
    std::lock_guard<std::mutex> s(stripe(k));
    const unsigned char* v = map_->get(k);
    if (v == nullptr) return Status::not_found("no such key");
    value->assign(reinterpret_cast<const char*>(v), kValueBytes);
    return Status();
  }

  Status put(std::string_view key, std::string_view value) override {
    if (key.size() != kKeyBytes || value.size() != kValueBytes) {
      return Status::invalid_argument("pmemobj engine: keys are 16 bytes, values 100");
    }
    const auto* k = reinterpret_cast<const unsigned char*>(key.data());
    const auto* v = reinterpret_cast<const unsigned char*>(value.data());
    {
      std::lock_guard<std::mutex> s(stripe(k));
      if (map_->get(k) != nullptr) return map_->insert(k, v);  // overwrite in place
    }
    std::lock_guard<std::mutex> i(insert_mu_);  // lock order: insert_mu_, then a stripe
    std::lock_guard<std::mutex> s(stripe(k));
    return map_->insert(k, v);
  }

  Status prefill(uint64_t n) override {
    for (uint64_t i = 0; i < n; i += kPrefillBatch) {
      PM_TRY(map_->insert_range(i, std::min(kPrefillBatch, n - i)));
    }
    return Status();
  }

  std::string prefill_method() const override {
    return fmt::format("{} puts per transaction", kPrefillBatch);
  }

 private:
  std::mutex& stripe(const unsigned char* key) { return stripes_[hash_key(key) & (kStripes - 1)]; }

  ScopedFile file_;
  std::unique_ptr<PmemobjHashMap> map_;
  std::mutex insert_mu_;
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace

Result<std::unique_ptr<KvEngine>> make_pmemobj_engine(const std::string& path, uint64_t keys) {
  auto e = std::make_unique<PmemobjEngine>(path);
  Status s = e->open(keys);
  if (!s.ok()) return s.with_context("pmemobj " + path);
  return std::unique_ptr<KvEngine>(std::move(e));
}

}  // namespace pm::bench
