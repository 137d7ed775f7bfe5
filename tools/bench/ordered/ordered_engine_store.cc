// kv::Store (its ordered index, kvstore/ordered_index.h) as a `pm bench
// ordered` engine: puts and deletes durable on return (one log record's
// persist on pmem), gets from the DRAM frontend, scans through the index
// merged with what the logs hold unapplied (Store::scan).
#include <memory>

#include "bench/ordered/ordered_engine.h"
#include "kv/store.h"

namespace pm::bench {

namespace {

class StoreEngine final : public OrderedEngine {
 public:
  explicit StoreEngine(std::unique_ptr<kv::Store> s) : s_(std::move(s)) {}

  Status put(std::string_view key, std::string_view value) override { return s_->put(key, value); }
  Status get(std::string_view key, std::string* value) override { return s_->get(key, value); }
  Status del(std::string_view key) override { return s_->remove(key); }
  Result<int> scan(std::string_view from, int n) override {
    int got = 0;
    Status s = s_->scan(from, {}, static_cast<uint64_t>(n), [&](std::string_view, std::string_view) {
      got++;
      return true;
    });
    if (!s.ok()) return s;
    return got;
  }
  bool concurrent() const override { return true; }

 private:
  std::unique_ptr<kv::Store> s_;
};

}  // namespace

Result<std::unique_ptr<OrderedEngine>> make_store_engine(const std::string& dir) {
  kv::StoreOptions o;
  o.max_key_bytes = 16;
  o.max_value_bytes = 100;
  o.initial_heap_bytes = 256ull << 20;  // the bench measures puts, not growth
  o.durability = kv::Durability::kSync;
  Result<std::unique_ptr<kv::Store>> s = kv::Store::open(dir + "/kv.pm", o);
  if (!s.ok()) return s.status();
  return std::unique_ptr<OrderedEngine>(new StoreEngine(std::move(*s)));
}

}  // namespace pm::bench
