#include "crash/sqlite_workloads.h"

#include <fmt/format.h>
#include <sqlite3.h>
#include <xxhash.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "pmsqlite/vfs.h"

namespace pm::crash {

namespace {

constexpr int kAccounts = 16;
constexpr int64_t kStart = 1000;

struct Row {
  int64_t src, dst, amount, memo;
};

// The logical database: balances and ledger rows (memo bytes are random,
// their lengths are modelled).
struct Model {
  std::array<int64_t, kAccounts> balance{};
  std::map<int64_t, Row> ledger;

  uint64_t digest() const {
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, balance.data(), sizeof balance);
    for (const auto& [seq, r] : ledger) {
      const int64_t v[5] = {seq, r.src, r.dst, r.amount, r.memo};
      XXH3_64bits_update(st, v, sizeof v);
    }
    const uint64_t d = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return d;
  }
};

// Each container is served under a name of its own.
std::string name_for(const Container& c) { return fmt::format("/pm-crash-sqlite/{}.db", fmt::ptr(&c)); }

class Connection {
 public:
  explicit Connection(const std::string& name) {
    rc_ = sqlite3_open_v2(name.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                          PMSQLITE_VFS_NAME);
  }
  ~Connection() { sqlite3_close_v2(db_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Status status() const { return rc_ == SQLITE_OK ? Status() : error("open"); }

  Status exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK ? Status()
                                                                                   : error(sql);
  }

  // Runs a query, calling `row` with each row's integers.
  Status query(const std::string& sql, const std::function<void(const std::vector<int64_t>&)>& row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return error(sql);
    int rc;
    std::vector<int64_t> v;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      v.resize(static_cast<size_t>(sqlite3_column_count(st)));
      for (size_t i = 0; i < v.size(); i++) v[i] = sqlite3_column_int64(st, static_cast<int>(i));
      row(v);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? Status() : error(sql);
  }

  bool in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }
  bool failed_on_constraint() const { return sqlite3_errcode(db_) == SQLITE_CONSTRAINT; }

  std::string text(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return out;
  }

 private:
  Status error(const std::string& what) const {
    return Status::io_error(fmt::format("sqlite: {}: {}", what.substr(0, 80),
                                        db_ ? sqlite3_errmsg(db_) : "no connection"));
  }

  sqlite3* db_ = nullptr;
  int rc_ = SQLITE_OK;
};

// Reads the database into a model; integrity_check first.
Status read_model(Connection& db, Model* m) {
  const std::string ok = db.text("PRAGMA integrity_check");
  if (ok != "ok") return Status::corruption("integrity_check: " + ok);
  *m = Model();
  PM_TRY(db.query("SELECT id, balance FROM accounts ORDER BY id", [&](const std::vector<int64_t>& v) {
    if (v[0] >= 0 && v[0] < kAccounts) m->balance[static_cast<size_t>(v[0])] = v[1];
  }));
  return db.query("SELECT seq, src, dst, amount, length(memo) FROM ledger ORDER BY seq",
                  [&](const std::vector<int64_t>& v) { m->ledger[v[0]] = {v[1], v[2], v[3], v[4]}; });
}

class SqliteWorkload final : public Workload {
 public:
  SqliteWorkload() { pmsqlite_register(0); }
  ~SqliteWorkload() override { end_session(); }

  std::string name() const override { return "sqlite"; }
  Options options() const override {
    Options o = Workload::options();
    o.tracker = TrackerKind::kHints;  // as the VFS opens its containers: only announced bytes commit
    return o;
  }

  Status setup(Container& c, std::mt19937_64& rng) override {
    model_ = Model();
    model_.balance.fill(kStart);
    PM_TRY(start_session(c, rng, nullptr));
    PM_TRY(db_->exec(
        "PRAGMA auto_vacuum=FULL;"
        "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);"
        "CREATE TABLE ledger(seq INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, amount INTEGER, memo BLOB);"
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < " +
        std::to_string(kAccounts - 1) + ") INSERT INTO accounts SELECT i, " + std::to_string(kStart) +
        " FROM n"));
    return Status();
  }

  Status resume(Container& c, CommitLog& log) override {
    std::mt19937_64 rng(c.generation());
    PM_TRY(start_session(c, rng, &log));
    return read_model(*db_, &model_);
  }

  Status close(CommitLog&) override {
    end_session();
    return Status();
  }

  Status step(Container& c, std::mt19937_64& rng, CommitLog& log) override {
    if (db_ == nullptr) PM_TRY(start_session(c, rng, &log));
    log_ = &log;
    const int kind = static_cast<int>(rng() % 20);
    if (kind < 13) return transfer(rng, /*rollback=*/false, /*failing_statement=*/false);
    if (kind < 15) return transfer(rng, true, false);
    if (kind < 17) return transfer(rng, false, true);
    if (kind < 19) return prune(rng);
    return run(model_, "VACUUM");
  }

  uint64_t digest(Container& c) override {
    if (&c == live_ && c.generation() == live_generation_ && db_ != nullptr) return model_.digest();
    const std::string name = name_for(c);
    if (!pmsqlite::bind(name, &c).ok()) return 0xbad0;
    Model m;
    uint64_t d = 0xbad1;
    {
      Connection db(name);
      if (db.status().ok() && read_model(db, &m).ok()) d = m.digest();
    }
    (void)pmsqlite::unbind(name);
    return d;
  }

  // A recovered database must take a transaction.
  Status write_probe(Container& c) override {
    const std::string name = name_for(c);
    PM_TRY(pmsqlite::bind(name, &c));
    Status s;
    {
      Connection db(name);
      s = db.status();
      if (s.ok()) s = db.exec("UPDATE accounts SET balance = balance WHERE id = 0");
    }
    (void)pmsqlite::unbind(name);
    return s;
  }

 private:
  // Serves `c` to SQLite, its commits going through the harness's model.
  Status start_session(Container& c, std::mt19937_64& rng, CommitLog* log) {
    end_session();
    live_ = &c;
    live_generation_ = c.generation();
    log_ = log;
    name_ = name_for(c);
    PM_TRY(pmsqlite::bind(name_, &c, [this](Container& box) { return commit(box); }));
    db_ = std::make_unique<Connection>(name_);
    PM_TRY(db_->status());
    const char* journal[] = {"DELETE", "MEMORY", "TRUNCATE"};
    PM_TRY(db_->exec(fmt::format("PRAGMA journal_mode={}; PRAGMA synchronous={}; PRAGMA cache_size={}",
                                 journal[rng() % 3], rng() % 2 ? "FULL" : "OFF",
                                 rng() % 2 ? 4 : 2000)));
    return Status();
  }

  void end_session() {
    db_.reset();
    if (!name_.empty()) (void)pmsqlite::unbind(name_);
    name_.clear();
    live_ = nullptr;
  }

  // The VFS commits here: the transaction makes the database `after_`. If
  // the commit fails SQLite rolls the transaction back, and commits that.
  Status commit(Container& c) {
    if (log_ == nullptr) return c.commit();  // setup: the harness takes the state after it
    Status s = log_->durable(after_, [&] { return c.commit(); });
    if (!s.ok()) after_ = model_.digest();
    return s;
  }

  // Runs a transaction whose commit makes the database `after`. One that
  // fails (a full file system, an I/O error) is rolled back, if SQLite
  // left it open, and the model stays.
  Status run(const Model& after, const std::string& sql) {
    after_ = after.digest();
    Status s = db_->exec(sql);
    if (s.ok()) model_ = after;
    after_ = model_.digest();
    if (!s.ok()) rollback_open_transaction();
    return s;
  }

  void rollback_open_transaction() {
    after_ = model_.digest();
    if (db_->in_transaction()) (void)db_->exec("ROLLBACK");
  }

  Status transfer(std::mt19937_64& rng, bool rollback, bool failing_statement) {
    const int64_t src = static_cast<int64_t>(rng() % kAccounts), dst = static_cast<int64_t>(rng() % kAccounts);
    const int64_t amount = static_cast<int64_t>(rng() % 50);
    const int64_t memo = std::array<int64_t, 4>{1, 100, 3000, 7000}[rng() % 4];
    const int64_t seq = (model_.ledger.empty() ? 0 : model_.ledger.rbegin()->first) + 1;
    Model after = model_;
    after.balance[static_cast<size_t>(src)] -= amount;
    after.balance[static_cast<size_t>(dst)] += amount;
    after.ledger[seq] = {src, dst, amount, memo};
    std::string sql = fmt::format(
        "BEGIN; UPDATE accounts SET balance = balance - {2} WHERE id = {0};"
        "UPDATE accounts SET balance = balance + {2} WHERE id = {1};"
        "INSERT INTO ledger VALUES({3}, {0}, {1}, {2}, randomblob({4}));",
        src, dst, amount, seq, memo);
    if (failing_statement) {
      // Two rows, the second a duplicate: the statement is undone whole.
      sql += fmt::format("INSERT INTO ledger VALUES({0}, 0, 0, 0, randomblob(5000)), ({1}, 0, 0, 0, NULL);",
                         seq + 1, seq);
      Status s = db_->exec(sql);
      if (s.ok()) return Status::corruption("a duplicate key was accepted");
      if (!db_->failed_on_constraint()) {  // failed before it got there
        rollback_open_transaction();
        return s;
      }
      return run(after, "COMMIT");
    }
    if (rollback) return run(model_, sql + "ROLLBACK");
    return run(after, sql + "COMMIT");
  }

  Status prune(std::mt19937_64& rng) {
    if (model_.ledger.empty()) return Status();
    const int64_t upto = model_.ledger.begin()->first + static_cast<int64_t>(rng() % 8);
    Model after = model_;
    after.ledger.erase(after.ledger.begin(), after.ledger.upper_bound(upto));
    return run(after, fmt::format("DELETE FROM ledger WHERE seq <= {}", upto));
  }

  Model model_;
  Container* live_ = nullptr;
  uint64_t live_generation_ = 0;
  CommitLog* log_ = nullptr;
  uint64_t after_ = 0;
  std::string name_;
  std::unique_ptr<Connection> db_;
};

}  // namespace

std::unique_ptr<Workload> make_sqlite_workload() { return std::make_unique<SqliteWorkload>(); }

}  // namespace pm::crash
