#include "crash/kv_workloads.h"

#include <xxhash.h>

#include <map>
#include <string>
#include <thread>

#include "kv/store.h"
#include "kvstore/store_impl.h"

namespace pm::crash {

kv::StoreOptions crash_store_options() {
  kv::StoreOptions o;
  o.logs = 2;
  o.log_bytes = 64 << 10;
  o.max_key_bytes = 32;
  o.max_value_bytes = 4096;
  o.initial_heap_bytes = 1 << 20;
  o.max_heap_bytes = 1ull << 30;
  o.background = false;  // the workload drives gleaning: deterministic
  return o;
}

Status on_new_thread(const std::function<Status()>& op) {
  Status s;
  std::thread t([&] { s = op(); });
  t.join();
  return s;
}

namespace {

uint64_t digest_of(const std::map<std::string, std::string>& m) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [k, v] : m) {
    uint64_t n[2] = {k.size(), v.size()};
    XXH3_64bits_update(st, n, sizeof n);
    XXH3_64bits_update(st, k.data(), k.size());
    XXH3_64bits_update(st, v.data(), v.size());
  }
  uint64_t d = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return d;
}

class KvWorkload final : public Workload {
 public:
  explicit KvWorkload(bool async) : async_(async), options_(crash_store_options()) {
    if (async) options_.durability = kv::Durability::kAsync;
  }
  std::string name() const override { return async_ ? "kvstore_async" : "kvstore"; }
  Options options() const override { return kv::container_options(options_); }

  // The harness reuses a workload for several runs (a dry run, then each
  // killed child): start from nothing. The old store's container is closed
  // already; its destructor does not touch it.
  Status setup(Container& c, std::mt19937_64&) override {
    store_.reset();
    model_.clear();
    live_ = &c;
    live_generation_ = c.generation();
    return kv::format_store(&c, options_);
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    if (store_ == nullptr) {  // opening commits (a new session): state unchanged
      PM_TRY(log.durable(digest_of(model_), [&] {
        Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
        if (!s.ok()) return s.status();
        store_ = std::move(*s);
        return Status();
      }));
    }
    const int kind = static_cast<int>(rng() % 20);
    std::string key = "key" + std::to_string(rng() % 40);
    if (kind < 10) {
      std::string value(rng() % 2000, static_cast<char>('a' + rng() % 26));
      auto after = model_;
      after[key] = value;
      PM_TRY(log.durable(digest_of(after), [&] {
        return synced(on_new_thread([&] { return store_->put(key, value); }));
      }));
      model_ = std::move(after);
    } else if (kind < 13) {
      auto after = model_;
      const bool present = after.erase(key) > 0;
      PM_TRY(log.durable(digest_of(after), [&] {
        Status s = on_new_thread([&] { return store_->remove(key); });
        return synced(s.is_not_found() && !present ? Status() : s);
      }));
      model_ = std::move(after);
    } else if (kind < 15) {  // a transaction: all or nothing
      auto after = model_;
      auto t = store_->begin();
      for (int i = 0, n = 2 + static_cast<int>(rng() % 3); i < n; i++) {
        std::string k = "key" + std::to_string(rng() % 40);
        if (rng() % 3 == 0) {
          PM_TRY(t->remove(k));
          after.erase(k);
        } else {
          std::string v(rng() % 500, static_cast<char>('A' + rng() % 26));
          PM_TRY(t->put(k, v));
          after[k] = v;
        }
      }
      PM_TRY(log.durable(digest_of(after),
                         [&] { return synced(on_new_thread([&] { return t->commit(); })); }));
      model_ = std::move(after);
    } else if (kind < 19) {  // some gleaning, sometimes an epoch
      const uint64_t n = rng() % 6;
      const bool epoch = rng() % 2 == 0;
      PM_TRY(log.durable(digest_of(model_), [&] {
        Result<uint64_t> g = store_->glean(n);
        if (!g.ok()) return g.status();
        return epoch ? store_->advance_epoch() : Status();
      }));
    } else {
      PM_TRY(log.durable(digest_of(model_), [&] { return store_->checkpoint(); }));
    }
    return Status();
  }

  // The live container: the model. A recovered one: open a store on it
  // (log replay) and read everything.
  uint64_t digest(Container& c) override {
    // (A later container may reuse the address: the generation tells.)
    if (&c == live_ && c.generation() == live_generation_) return digest_of(model_);
    Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(&c, options_);
    if (!s.ok()) return 0xbad0;
    std::map<std::string, std::string> m;
    Status st = (*s)->scan("", [&](std::string_view k, std::string_view v) {
      m.emplace(k, v);
      return true;
    });
    if (!st.ok()) return 0xbad1;
    return digest_of(m);
  }

 private:
  // An update is durable when it returns (kSync), or once sync() returned.
  Status synced(Status s) { return s.ok() && async_ ? store_->sync() : s; }

  const bool async_;
  kv::StoreOptions options_;
  Container* live_ = nullptr;
  uint64_t live_generation_ = 0;
  std::unique_ptr<kv::Store> store_;
  std::map<std::string, std::string> model_;
};

}  // namespace

std::unique_ptr<Workload> make_kv_workload() { return std::make_unique<KvWorkload>(false); }
std::unique_ptr<Workload> make_kv_async_workload() { return std::make_unique<KvWorkload>(true); }

}  // namespace pm::crash
