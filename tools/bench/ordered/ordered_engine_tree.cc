// The version tree (kvstore/version_tree.h) as a `pm bench ordered` engine.
#include <memory>

#include "bench/ordered/ordered_engine.h"
#include "kvstore/version_tree.h"

namespace pm::bench {

namespace {

class TreeEngine final : public OrderedEngine {
 public:
  TreeEngine(std::unique_ptr<kv::VersionTree> t, int batch) : t_(std::move(t)), batch_(batch) {}

  Status put(std::string_view key, std::string_view value) override {
    PM_TRY(t_->put(key, value));
    return written();
  }
  Status get(std::string_view key, std::string* value) override {
    Result<std::string> r = t_->get(key);
    if (!r.ok()) return r.status();
    *value = std::move(*r);
    return Status();
  }
  Status del(std::string_view key) override {
    PM_TRY(t_->del(key));
    return written();
  }
  Result<int> scan(std::string_view from, int n) override {
    int got = 0;
    Status s = t_->scan(nullptr, from, {}, static_cast<size_t>(n),
                        [&](std::string_view, std::string_view) {
                          got++;
                          return true;
                        });
    if (!s.ok()) return s;
    return got;
  }
  Status flush() override {
    pending_ = 0;
    return t_->commit();
  }

 private:
  Status written() {
    if (++pending_ < batch_) return Status();
    return flush();
  }
  std::unique_ptr<kv::VersionTree> t_;
  int batch_;
  int pending_ = 0;
};

}  // namespace

Result<std::unique_ptr<OrderedEngine>> make_tree_engine(const std::string& dir, int batch) {
  kv::VersionTreeOptions o;
  o.key_max = 16;
  o.value_max = 100;
  o.initial_nodes = 1024;
  Result<std::unique_ptr<kv::VersionTree>> t = kv::VersionTree::create(dir + "/tree", o);
  if (!t.ok()) return t.status();
  return std::unique_ptr<OrderedEngine>(new TreeEngine(std::move(*t), batch));
}

}  // namespace pm::bench
