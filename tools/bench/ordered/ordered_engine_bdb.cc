// Berkeley DB's B-tree (Debian's libdb5.3-dev) as a `pm bench ordered`
// engine: the paper's baseline. Durable: a transactional environment (log,
// locks, a 256 MiB cache) and one transaction per write, committed with the
// default synchronous log flush. Non-transactional: the same B-tree with no
// environment, no log and no syncs.
#include <db.h>

#include <cstring>
#include <memory>

#include "bench/ordered/ordered_engine.h"

namespace pm::bench {

namespace {

constexpr uint32_t kCacheBytes = 256u << 20;

Status bdb_error(const char* what, int rc) {
  return Status::io_error(std::string("Berkeley DB ") + what + ": " + db_strerror(rc));
}

DBT dbt(std::string_view s) {
  DBT d;
  std::memset(&d, 0, sizeof d);
  d.data = const_cast<char*>(s.data());
  d.size = static_cast<uint32_t>(s.size());
  return d;
}

DBT user_buffer(char* buf, uint32_t len) {
  DBT d;
  std::memset(&d, 0, sizeof d);
  d.data = buf;
  d.ulen = len;
  d.flags = DB_DBT_USERMEM;
  return d;
}

class BdbEngine final : public OrderedEngine {
 public:
  ~BdbEngine() override {
    if (db_) db_->close(db_, 0);
    if (env_) env_->close(env_, 0);
  }

  Status open(const std::string& dir, bool durable) {
    int rc;
    if (durable) {
      if ((rc = db_env_create(&env_, 0)) != 0) return bdb_error("env create", rc);
      env_->set_cachesize(env_, 0, kCacheBytes, 1);
      rc = env_->open(env_, dir.c_str(),
                      DB_CREATE | DB_INIT_LOCK | DB_INIT_LOG | DB_INIT_MPOOL | DB_INIT_TXN |
                          DB_PRIVATE,
                      0);
      if (rc != 0) return bdb_error("env open", rc);
    }
    if ((rc = db_create(&db_, env_, 0)) != 0) return bdb_error("create", rc);
    if (!durable) db_->set_cachesize(db_, 0, kCacheBytes, 1);
    const std::string file = durable ? "t.db" : dir + "/t.db";
    rc = db_->open(db_, nullptr, file.c_str(), nullptr, DB_BTREE,
                   DB_CREATE | (durable ? DB_AUTO_COMMIT : 0), 0644);
    if (rc != 0) return bdb_error("open", rc);
    return Status();
  }

  Status put(std::string_view key, std::string_view value) override {
    DBT k = dbt(key), v = dbt(value);
    return in_txn("put", [&](DB_TXN* t) { return db_->put(db_, t, &k, &v, 0); });
  }
  Status get(std::string_view key, std::string* value) override {
    DBT k = dbt(key);
    DBT v = user_buffer(buf_, sizeof buf_);
    const int rc = db_->get(db_, nullptr, &k, &v, 0);
    if (rc == DB_NOTFOUND) return Status::not_found("no such key");
    if (rc != 0) return bdb_error("get", rc);
    value->assign(buf_, v.size);
    return Status();
  }
  Status del(std::string_view key) override {
    DBT k = dbt(key);
    return in_txn("del", [&](DB_TXN* t) { return db_->del(db_, t, &k, 0); });
  }
  Result<int> scan(std::string_view from, int n) override {
    DBC* c = nullptr;
    int rc = db_->cursor(db_, nullptr, &c, 0);
    if (rc != 0) return bdb_error("cursor", rc);
    std::memcpy(kbuf_, from.data(), from.size());
    DBT k = user_buffer(kbuf_, sizeof kbuf_);
    k.size = static_cast<uint32_t>(from.size());
    DBT v = user_buffer(buf_, sizeof buf_);
    int got = 0;
    for (rc = c->get(c, &k, &v, DB_SET_RANGE); rc == 0 && got < n;
         rc = c->get(c, &k, &v, DB_NEXT)) {
      got++;
    }
    c->close(c);
    if (rc != 0 && rc != DB_NOTFOUND) return bdb_error("cursor get", rc);
    return got;
  }

 private:
  template <typename Op>
  Status in_txn(const char* what, const Op& op) {
    if (env_ == nullptr) {
      const int rc = op(nullptr);
      return rc == 0 ? Status() : bdb_error(what, rc);
    }
    DB_TXN* t = nullptr;
    int rc = env_->txn_begin(env_, nullptr, &t, 0);
    if (rc != 0) return bdb_error("txn begin", rc);
    rc = op(t);
    if (rc != 0) {
      t->abort(t);
      return bdb_error(what, rc);
    }
    rc = t->commit(t, 0);  // synchronous: the log is flushed
    return rc == 0 ? Status() : bdb_error("commit", rc);
  }

  DB_ENV* env_ = nullptr;
  DB* db_ = nullptr;
  char buf_[4096];
  char kbuf_[256];
};

}  // namespace

Result<std::unique_ptr<OrderedEngine>> make_bdb_engine(const std::string& dir, bool durable) {
  auto e = std::make_unique<BdbEngine>();
  PM_TRY(e->open(dir, durable));
  return std::unique_ptr<OrderedEngine>(std::move(e));
}

}  // namespace pm::bench
