// volatile: the kvstore's DRAM frontend (kv::Frontend) alone, the upper
// bound of Bullet's Figure 5. A put overwrites the key's item (or replaces
// it, when the value outgrows it) under the bucket lock; a get is the
// lock-free seqlock read the store's gets use.
#include "bench/kv/kv_engine.h"
#include "kvstore/frontend.h"

namespace pm::bench {

namespace {

class VolatileEngine final : public KvEngine {
 public:
  // The store's own frontend starts at this size and grows.
  VolatileEngine() : fe_(1 << 16) {}
  // Frees what the exited worker threads retired (the store's maintenance
  // thread does this for the kvstore).
  ~VolatileEngine() override { kv::Reclaimer::collect(); }

  Status get(std::string_view key, std::string* value) override {
    kv::Reclaimer::Guard g;
    bool hit =
        fe_.read(key, kv::hash_key(key), [&](const kv::Item& it) { value->assign(it.value()); });
    return hit ? Status() : Status::not_found("no such key");
  }

  Status put(std::string_view key, std::string_view value) override {
    const uint64_t h = kv::hash_key(key);
    {
      // No sequence number: the hash table needs none (the store's is its
      // own cost, measured in the kvstore engine).
      kv::Frontend::Locked lk(&fe_, h);
      lk.install(lk.find(key, h), h, 0, 0, key, value, false);
    }
    // The store grows from its maintenance thread; here the writer does it.
    if (fe_.wants_growth()) fe_.grow();
    return Status();
  }

 private:
  kv::Frontend fe_;
};

}  // namespace

std::unique_ptr<KvEngine> make_volatile_engine() { return std::make_unique<VolatileEngine>(); }

}  // namespace pm::bench
