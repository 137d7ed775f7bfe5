// LMDB (Debian's liblmdb-dev) as a `pm bench ordered` engine: one write
// transaction per `batch` writes, committed with LMDB's default sync
// (fdatasync); reads in a read-only transaction renewed per operation.
#include <lmdb.h>

#include <memory>

#include "bench/ordered/ordered_engine.h"

namespace pm::bench {

namespace {

Status lmdb_error(const char* what, int rc) {
  return Status::io_error(std::string("LMDB ") + what + ": " + mdb_strerror(rc));
}

MDB_val val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

class LmdbEngine final : public OrderedEngine {
 public:
  explicit LmdbEngine(int batch) : batch_(batch) {}
  ~LmdbEngine() override {
    if (wtxn_) mdb_txn_abort(wtxn_);
    if (rtxn_) mdb_txn_abort(rtxn_);
    if (env_) mdb_env_close(env_);
  }

  Status open(const std::string& dir) {
    int rc = mdb_env_create(&env_);
    if (rc == 0) rc = mdb_env_set_mapsize(env_, size_t{16} << 30);
    if (rc == 0) rc = mdb_env_open(env_, dir.c_str(), MDB_NOTLS, 0644);
    if (rc != 0) return lmdb_error("open", rc);
    MDB_txn* t = nullptr;
    if ((rc = mdb_txn_begin(env_, nullptr, 0, &t)) != 0) return lmdb_error("txn", rc);
    if ((rc = mdb_dbi_open(t, nullptr, 0, &dbi_)) != 0) {
      mdb_txn_abort(t);
      return lmdb_error("dbi open", rc);
    }
    if ((rc = mdb_txn_commit(t)) != 0) return lmdb_error("commit", rc);
    if ((rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &rtxn_)) != 0) return lmdb_error("txn", rc);
    mdb_txn_reset(rtxn_);
    return Status();
  }

  Status put(std::string_view key, std::string_view value) override {
    PM_TRY(begin_write());
    MDB_val k = val(key), v = val(value);
    const int rc = mdb_put(wtxn_, dbi_, &k, &v, 0);
    if (rc != 0) return lmdb_error("put", rc);
    return written();
  }
  Status get(std::string_view key, std::string* value) override {
    int rc = mdb_txn_renew(rtxn_);
    if (rc != 0) return lmdb_error("txn renew", rc);
    MDB_val k = val(key), v;
    rc = mdb_get(rtxn_, dbi_, &k, &v);
    if (rc == 0) value->assign(static_cast<const char*>(v.mv_data), v.mv_size);
    mdb_txn_reset(rtxn_);
    if (rc == MDB_NOTFOUND) return Status::not_found("no such key");
    return rc == 0 ? Status() : lmdb_error("get", rc);
  }
  Status del(std::string_view key) override {
    PM_TRY(begin_write());
    MDB_val k = val(key);
    const int rc = mdb_del(wtxn_, dbi_, &k, nullptr);
    if (rc != 0) return lmdb_error("del", rc);
    return written();
  }
  Result<int> scan(std::string_view from, int n) override {
    int rc = mdb_txn_renew(rtxn_);
    if (rc != 0) return lmdb_error("txn renew", rc);
    MDB_cursor* c = nullptr;
    if ((rc = mdb_cursor_open(rtxn_, dbi_, &c)) != 0) {
      mdb_txn_reset(rtxn_);
      return lmdb_error("cursor", rc);
    }
    MDB_val k = val(from), v;
    int got = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0 && got < n;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
      got++;
    }
    mdb_cursor_close(c);
    mdb_txn_reset(rtxn_);
    if (rc != 0 && rc != MDB_NOTFOUND) return lmdb_error("cursor get", rc);
    return got;
  }
  Status flush() override {
    pending_ = 0;
    if (wtxn_ == nullptr) return Status();
    const int rc = mdb_txn_commit(wtxn_);
    wtxn_ = nullptr;
    return rc == 0 ? Status() : lmdb_error("commit", rc);
  }

 private:
  Status begin_write() {
    if (wtxn_ != nullptr) return Status();
    const int rc = mdb_txn_begin(env_, nullptr, 0, &wtxn_);
    return rc == 0 ? Status() : lmdb_error("txn begin", rc);
  }
  Status written() {
    if (++pending_ < batch_) return Status();
    return flush();
  }

  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  MDB_txn* wtxn_ = nullptr;
  MDB_txn* rtxn_ = nullptr;
  int batch_;
  int pending_ = 0;
};

}  // namespace

Result<std::unique_ptr<OrderedEngine>> make_lmdb_engine(const std::string& dir, int batch) {
  auto e = std::make_unique<LmdbEngine>(batch);
  PM_TRY(e->open(dir));
  return std::unique_ptr<OrderedEngine>(std::move(e));
}

}  // namespace pm::bench
