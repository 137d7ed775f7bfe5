// phash: the kvstore's persistent backend hash table (kv::Backend) alone in
// a libpm container, with a commit() after every put: a PM-only store, the
// lower bound of Bullet's Figure 5. Gets read the backend directly.
//
// Concurrency: puts and gets hold mu_ shared; the linear-hashing split
// (which must run alone) takes it exclusively when the table is over load.
// Each put's commit makes that put (and any other thread's finished apply)
// durable; commits of two threads serialise inside the container.
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>

#include "bench/kv/kv_engine.h"
#include "bench/common/scoped_file.h"
#include "bench/common/workload.h"
#include "kvstore/backend.h"
#include "kvstore/frontend.h"  // kv::hash_key

namespace pm::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPrefillBatch = 1000;

class PhashEngine final : public KvEngine {
 public:
  PhashEngine(std::string path, Emulation e) : file_(std::move(path)), emulation_(e) {}
  ~PhashEngine() override {
    be_.reset();
    c_.reset();  // closed before file_ removes it
  }

  Status open(uint64_t keys) {
    Options o;
    // Entries of 24 + 116 bytes, 8-byte bucket slots, room for the allocator.
    o.initial_size = (keys * 200 + 64 * kMiB + kMiB - 1) / kMiB * kMiB;
    o.max_size =
        std::max<uint64_t>(1ull << 30, (o.initial_size * 4 + (1ull << 30) - 1) >> 30 << 30);
    o.tracker = TrackerKind::kHints;  // the backend announces every write
    Result<std::unique_ptr<Container>> c = Container::create(file_.path(), o);
    if (!c.ok()) return c.status();
    c_ = std::move(*c);
    kv::Geometry g;
    g.nlogs = 1;  // no logs: the geometry is only recorded in the root
    g.max_key = kKeyBytes;
    g.max_value = kValueBytes;
    Result<std::unique_ptr<kv::Backend>> b = kv::Backend::create(c_.get(), g);
    if (!b.ok()) return b.status();
    be_ = std::move(*b);
    return c_->commit();
  }

  Status get(std::string_view key, std::string* value) override {
    busy_wait_ns(emulation_.read_ns);
    std::shared_lock<std::shared_mutex> l(mu_);
    Result<kv::Backend::Found> f = be_->get(key, kv::hash_key(key), value);
    if (!f.ok()) return f.status();
    return f->present ? Status() : Status::not_found("no such key");
  }

  Status put(std::string_view key, std::string_view value) override {
    PM_TRY(apply(key, value));
    return commit();
  }

  Status prefill(uint64_t n) override {
    unsigned char key[kKeyBytes], value[kValueBytes];
    for (uint64_t i = 0; i < n; i++) {
      make_key(i, key);
      make_value(i, value);
      PM_TRY(apply(bytes_view(key, kKeyBytes), bytes_view(value, kValueBytes)));
      if ((i + 1) % kPrefillBatch == 0 || i + 1 == n) PM_TRY(commit());
    }
    return Status();
  }

  std::string prefill_method() const override {
    return fmt::format("{} puts per commit", kPrefillBatch);
  }

 private:
  Status apply(std::string_view key, std::string_view value) {
    bool over_load;
    {
      std::shared_lock<std::shared_mutex> l(mu_);
      over_load = be_->count() > be_->buckets();
    }
    if (over_load) PM_TRY(split());
    busy_wait_ns(emulation_.read_ns);  // the lookup of the key's entry
    std::shared_lock<std::shared_mutex> l(mu_);
    MutationGuard mg(*c_);
    PM_TRY(be_->apply_put(key, kv::hash_key(key), value, seq_.fetch_add(1)));
    std::lock_guard<std::mutex> cl(counters_mu_);
    be_->store_counters();
    return Status();
  }

  Status split() {
    std::unique_lock<std::shared_mutex> l(mu_);
    MutationGuard mg(*c_);
    return be_->split_as_needed(1 << 16);
  }

  Status commit() {
    PM_TRY(c_->commit());
    return Status();
  }

  ScopedFile file_;
  Emulation emulation_;
  std::unique_ptr<Container> c_;
  std::unique_ptr<kv::Backend> be_;
  std::shared_mutex mu_;
  std::mutex counters_mu_;
  std::atomic<uint64_t> seq_{1};
};

}  // namespace

Result<std::unique_ptr<KvEngine>> make_phash_engine(const std::string& path, uint64_t keys,
                                                    Emulation emulation) {
  auto e = std::make_unique<PhashEngine>(path, emulation);
  Status s = e->open(keys);
  if (!s.ok()) return s.with_context("phash " + path);
  return std::unique_ptr<KvEngine>(std::move(e));
}

}  // namespace pm::bench
