// The engines of `pm bench ordered`: ordered key-value stores behind one
// interface, each in its own directory. Every operation is durable on return
// unless the engine batches (then at flush() or every `batch` operations) or
// is not durable at all; `durable()` says which.
#ifndef TOOLS_BENCH_ORDERED_ORDERED_ENGINE_H_
#define TOOLS_BENCH_ORDERED_ORDERED_ENGINE_H_

#include <memory>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pm::bench {

class OrderedEngine {
 public:
  virtual ~OrderedEngine() = default;
  virtual Status put(std::string_view key, std::string_view value) = 0;
  // kNotFound when absent.
  virtual Status get(std::string_view key, std::string* value) = 0;
  virtual Status del(std::string_view key) = 0;
  // Reads up to n entries in key order from the first key >= from; returns
  // how many it read.
  virtual Result<int> scan(std::string_view from, int n) = 0;
  // Ends a batch (engines that group writes); no-op otherwise.
  virtual Status flush() { return Status(); }
  // Whether put() may run in one thread while scan() runs in another.
  virtual bool concurrent() const { return false; }
};

// Creates a fresh store in `dir` (an empty directory). `batch` > 1 groups
// that many writes per commit or transaction.
Result<std::unique_ptr<OrderedEngine>> make_tree_engine(const std::string& dir, int batch);
// kv::Store through its ordered index; every put and delete durable.
Result<std::unique_ptr<OrderedEngine>> make_store_engine(const std::string& dir);
// Berkeley DB's B-tree: with `durable`, a transactional environment whose
// log lives in `dir`, one synchronous transaction per write; else a plain
// database, no transactions, no syncs.
Result<std::unique_ptr<OrderedEngine>> make_bdb_engine(const std::string& dir, bool durable);
// LMDB, one write transaction per `batch` writes (synchronous commits).
Result<std::unique_ptr<OrderedEngine>> make_lmdb_engine(const std::string& dir, int batch);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_ORDERED_ORDERED_ENGINE_H_
