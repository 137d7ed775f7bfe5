// rocksdb: RocksDB with default options, every put with WriteOptions::sync
// (an fsync of its write-ahead log before it returns), the ordinary-disk
// reference. Built only when CMake found librocksdb-dev (PM_BENCH_ROCKSDB).
#include "bench/kv/kv_engine.h"

#ifdef PM_BENCH_ROCKSDB

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "bench/common/workload.h"

namespace pm::bench {

namespace {

constexpr uint64_t kPrefillBatch = 1000;

Status from_rocksdb(const rocksdb::Status& s) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found("no such key");
  return Status::io_error("rocksdb: " + s.ToString());
}

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

class RocksdbEngine final : public KvEngine {
 public:
  explicit RocksdbEngine(std::string path) : path_(std::move(path)) { sync_.sync = true; }
  ~RocksdbEngine() override {
    db_.reset();
    (void)rocksdb::DestroyDB(path_, rocksdb::Options());
  }

  Status open() {
    (void)rocksdb::DestroyDB(path_, rocksdb::Options());  // a leftover of an interrupted run
    rocksdb::Options o;
    o.create_if_missing = true;
    o.error_if_exists = true;
    rocksdb::DB* db = nullptr;
    PM_TRY(from_rocksdb(rocksdb::DB::Open(o, path_, &db)));
    db_.reset(db);
    return Status();
  }

  Status get(std::string_view key, std::string* value) override {
    return from_rocksdb(db_->Get(rocksdb::ReadOptions(), slice(key), value));
  }

  Status put(std::string_view key, std::string_view value) override {
    return from_rocksdb(db_->Put(sync_, slice(key), slice(value)));
  }

  // Batches without sync, then one sync of the whole log.
  Status prefill(uint64_t n) override {
    unsigned char key[kKeyBytes], value[kValueBytes];
    for (uint64_t i = 0; i < n; i += kPrefillBatch) {
      rocksdb::WriteBatch batch;
      for (uint64_t j = i; j < std::min(n, i + kPrefillBatch); j++) {
        make_key(j, key);
        make_value(j, value);
        PM_TRY(from_rocksdb(
            batch.Put(slice(bytes_view(key, kKeyBytes)), slice(bytes_view(value, kValueBytes)))));
      }
      PM_TRY(from_rocksdb(db_->Write(rocksdb::WriteOptions(), &batch)));
    }
    return from_rocksdb(db_->FlushWAL(true));
  }

  std::string prefill_method() const override {
    return "1000 puts per write batch, one WAL sync at the end";
  }

 private:
  std::string path_;
  rocksdb::WriteOptions sync_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace

bool rocksdb_built() { return true; }

Result<std::unique_ptr<KvEngine>> make_rocksdb_engine(const std::string& path) {
  auto e = std::make_unique<RocksdbEngine>(path);
  Status s = e->open();
  if (!s.ok()) return s.with_context("rocksdb " + path);
  return std::unique_ptr<KvEngine>(std::move(e));
}

}  // namespace pm::bench

#else  // !PM_BENCH_ROCKSDB

namespace pm::bench {

bool rocksdb_built() { return false; }

Result<std::unique_ptr<KvEngine>> make_rocksdb_engine(const std::string&) {
  return Status::not_supported("rocksdb: not built (install librocksdb-dev and reconfigure)");
}

}  // namespace pm::bench

#endif  // PM_BENCH_ROCKSDB
