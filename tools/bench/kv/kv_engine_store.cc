#include "bench/kv/kv_engine_store.h"

#include <algorithm>
#include <cstring>

#include "bench/common/workload.h"
#include "kvstore/store_impl.h"

namespace pm::bench {

namespace {

constexpr uint64_t kMiB = 1ull << 20;

}  // namespace

kv::StoreOptions kvstore_options(Emulation emulation, uint64_t dram_budget_bytes) {
  kv::StoreOptions o;
  o.emulate_read_ns = emulation.read_ns;
  o.dram_budget_bytes = dram_budget_bytes;
  return o;
}

Result<std::unique_ptr<StoreEngine>> StoreEngine::create(const std::string& path, uint64_t keys,
                                                         const kv::StoreOptions& options) {
  std::unique_ptr<StoreEngine> e(new StoreEngine(path, options));
  kv::StoreOptions& o = e->options_;
  // Backend entries of 24 + 116 bytes and 8-byte bucket slots with slack:
  // the heap does not grow during the cells.
  o.initial_heap_bytes = (keys * 256 + 64 * kMiB + kMiB - 1) / kMiB * kMiB;
  o.max_heap_bytes = std::max<uint64_t>(o.max_heap_bytes,
                                        (o.initial_heap_bytes * 4 + (1ull << 30) - 1) >> 30 << 30);
  PM_TRY(kv::check_store_options(o));
  Result<std::unique_ptr<Container>> c =
      Container::create(e->file_.path(), kv::container_options(o));
  if (!c.ok()) return c.status().with_context("kvstore create " + path);
  PM_TRY(kv::format_store(c->get(), o));
  PM_TRY((*c)->commit());
  Result<std::unique_ptr<kv::Store>> s = kv::open_store_on(c->get(), o);
  if (!s.ok()) return s.status().with_context("kvstore open " + path);
  e->container_ = std::move(*c);
  e->store_ = std::move(*s);
  return e;
}

Status StoreEngine::prefill(uint64_t n) {
  // Transactions, not single puts: on a file system each durable put is an
  // msync (~150 us here), and a 1M-key prefill took minutes.
  constexpr uint64_t kBatch = 256;
  unsigned char key[kKeyBytes], value[kValueBytes];
  for (uint64_t i = 0; i < n;) {
    kv::Transaction t(store_.get());
    for (const uint64_t end = std::min(n, i + kBatch); i < end; i++) {
      make_key(i, key);
      make_value(i, value);
      PM_TRY(t.put(bytes_view(key, kKeyBytes), bytes_view(value, kValueBytes)));
    }
    PM_TRY(t.commit());
  }
  return settle();
}

StoreEngine::~StoreEngine() {
  store_.reset();
  container_.reset();  // both closed before file_ removes the file
}

Result<Recovery> StoreEngine::reopen() {
  Recovery r;
  store_.reset();
  container_.reset();
  kv::StoreOptions o = options_;
  o.background = false;
  const uint64_t t0 = now_ns();
  Result<std::unique_ptr<kv::Store>> s = kv::Store::open(file_.path(), o);
  r.open_ms = double(now_ns() - t0) / 1e6;
  if (!s.ok()) return s.status().with_context("kvstore reopen");
  store_ = std::move(*s);
  r.after = store_->stats();
  return r;
}

}  // namespace pm::bench
