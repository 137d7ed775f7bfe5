// kvstore: the full kv::Store (background gleaners on, default durability)
// as a `pm bench kv` engine, plus what only it reports: its stats (DRAM and
// container bytes) and the time to reopen it after a close without a
// checkpoint.
//
// Thread safety: as KvEngine; stats() and reopen() run alone.
#ifndef TOOLS_BENCH_KV_KV_ENGINE_STORE_H_
#define TOOLS_BENCH_KV_KV_ENGINE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "bench/kv/kv_engine.h"
#include "bench/common/scoped_file.h"
#include "kv/store.h"
#include "pm/container.h"

namespace pm::bench {

struct Recovery {
  double open_ms = 0;    // kv::Store::open, timed here
  kv::StoreStats after;  // stats right after the reopen (log_used_bytes: what was replayed)
};

class StoreEngine final : public KvEngine {
 public:
  // Creates a store at `path` (removed when the engine is destroyed) for
  // `keys` keys. Errors: from pm::Container and the store.
  //
  // The heap is created big enough for `keys`, so that no cell pays for
  // growing it (the store itself would grow it as it fills).
  static Result<std::unique_ptr<StoreEngine>> create(const std::string& path, uint64_t keys,
                                                     const kv::StoreOptions& options);
  ~StoreEngine() override;

  Status get(std::string_view key, std::string* value) override { return store_->get(key, value); }
  Status put(std::string_view key, std::string_view value) override {
    return store_->put(key, value);
  }

  // Transactions of 256 puts, then checkpoint(), so that the first timed
  // cell does not share the cores with gleaning the prefill's backlog.
  Status prefill(uint64_t n) override;
  std::string prefill_method() const override {
    return "transactions of 256 puts, then checkpoint()";
  }
  // checkpoint(): glean and commit the whole log backlog.
  Status settle() override { return store_->checkpoint(); }

  kv::StoreStats stats() { return store_->stats(); }

  // Closes the store as it is (no sync, no checkpoint: the logs keep what
  // was not yet applied) and opens it again, timing open(). The reopened
  // store runs without background threads, so that its stats show the
  // replayed state as found (recovery itself does not depend on them).
  Result<Recovery> reopen();

 private:
  StoreEngine(std::string path, const kv::StoreOptions& o) : file_(std::move(path)), options_(o) {}

  ScopedFile file_;
  kv::StoreOptions options_;
  std::unique_ptr<Container> container_;  // the first session's (see create); then null
  std::unique_ptr<kv::Store> store_;      // closed before container_
};

// The options the kvstore engine runs with: the defaults (background
// threads, Durability::kSync, 8 logs of 8 MiB) plus the emulation and the
// DRAM budget. (create() also sizes the heap.)
kv::StoreOptions kvstore_options(Emulation emulation, uint64_t dram_budget_bytes);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_KV_KV_ENGINE_STORE_H_
