// A small RAII wrapper over an SQLite connection for the pm VFS tests.
#ifndef PMSQLITE_TEST_DB_H_
#define PMSQLITE_TEST_DB_H_

#include <sqlite3.h>

#include <string>

#include "pmsqlite/vfs.h"

namespace pmsqlite::test {

class Db {
 public:
  // Opens `path` with the pm VFS (URI filenames allowed); rc() says how it went.
  explicit Db(const std::string& path, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    pmsqlite_register(0);
    rc_ = sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_URI, PMSQLITE_VFS_NAME);
    if (db_ != nullptr) sqlite3_busy_timeout(db_, 0);
  }
  ~Db() { sqlite3_close_v2(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  int rc() const { return rc_; }
  sqlite3* get() const { return db_; }
  std::string error() const { return db_ ? sqlite3_errmsg(db_) : "no connection"; }

  // Runs SQL; returns the SQLite code (the message is in error()).
  int exec(const std::string& sql) { return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }

  // The first column of the first row as text ("" when there is none), or
  // "error: ..." when the statement fails.
  std::string one(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return "error: " + error();
    std::string out;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      out = "error: " + error();
    }
    sqlite3_finalize(st);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
  int rc_ = SQLITE_OK;
};

}  // namespace pmsqlite::test

#endif  // PMSQLITE_TEST_DB_H_
