// The pm VFS through SQLite's API: transactions, rollbacks, several
// connections, bad files and limits.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "mem_file.h"
#include "pm/container.h"
#include "test_db.h"
#include "testutil/temp_dir.h"

namespace pmsqlite::test {
namespace {

using pm::test::TempDir;

TEST(SqliteVfsTest, CommittedRowsSurviveReopen) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  {
    Db db(path);
    ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
    ASSERT_EQ(db.exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)"), SQLITE_OK) << db.error();
    ASSERT_EQ(db.exec("BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<5000)"
                      " INSERT INTO t SELECT i, printf('%0100d', i) FROM n; COMMIT"),
              SQLITE_OK)
        << db.error();
    EXPECT_EQ(db.one("PRAGMA journal_mode"), "delete");
  }
  Db db(path);
  ASSERT_EQ(db.rc(), SQLITE_OK);
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "5000");
  EXPECT_EQ(db.one("SELECT v FROM t WHERE k=4321"), std::string(96, '0') + "4321");
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
  // The file is a container: pm's own tools can read it.
  pm::Options o;
  EXPECT_EQ(pm::Container::open(path, o).status().code(), pm::Code::kBusy);  // we hold it
}

TEST(SqliteVfsTest, RollbackStatementRollbackAndSavepointsWork) {
  TempDir dir;
  Db db(dir.file("r.db"));
  ASSERT_EQ(db.exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB UNIQUE)"), SQLITE_OK);
  ASSERT_EQ(db.exec("INSERT INTO t VALUES(1, 'one')"), SQLITE_OK);
  // ROLLBACK after the cache spilled pages into the file (tiny cache).
  ASSERT_EQ(db.exec("PRAGMA cache_size=2; BEGIN; "
                    "WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM n WHERE i<3000)"
                    " INSERT INTO t SELECT i, randomblob(200) FROM n"),
            SQLITE_OK);
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "3000");
  ASSERT_EQ(db.exec("ROLLBACK"), SQLITE_OK);
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "1");
  // A statement that fails halfway is undone; its transaction goes on.
  ASSERT_EQ(db.exec("BEGIN; INSERT INTO t VALUES(2, 'two')"), SQLITE_OK);
  EXPECT_EQ(db.exec("INSERT INTO t VALUES(3, 'three'), (4, 'one')"), SQLITE_CONSTRAINT);
  ASSERT_EQ(db.exec("SAVEPOINT s; INSERT INTO t VALUES(5, 'five'); ROLLBACK TO s; COMMIT"), SQLITE_OK);
  EXPECT_EQ(db.one("SELECT group_concat(k) FROM t"), "1,2");
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
}

// Runs body in a child (with limits of its own, say) and expects exit 0;
// body returns the number of the step that failed.
void run_in_child(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the step that failed";
}

// A database of 512-byte pages for MemFile alone: page i is all 'a' + i.
class FakeOldPages final : public OldPages {
 public:
  uint64_t committed_state() const override { return state; }
  pm::Status read_committed(void* buf, size_t n, uint64_t off, uint64_t at) const override {
    if (at != state) return pm::Status::io_error("replaced");
    for (size_t i = 0; i < n; i++) static_cast<char*>(buf)[i] = char('a' + (off + i) / 512);
    return pm::Status();
  }
  uint64_t state = 7;
};

std::string read_all(const MemFile& f) {
  std::string out(f.size(), '?');
  pm::Result<size_t> n = f.read(out.data(), out.size(), 0);
  return n.ok() ? out : "error: " + n.status().message();
}

// A record: the page number (big endian), then the page.
void write_record(MemFile& f, uint64_t off, uint32_t pgno, const std::string& page) {
  const char be[4] = {char(pgno >> 24), char(pgno >> 16), char(pgno >> 8), char(pgno)};
  f.write(be, 4, off);
  f.write(page.data(), page.size(), off + 4);
}

TEST(MemFileTest, PageRecordsEqualToCommittedPagesAreReferences) {
  auto pages = std::make_shared<FakeOldPages>();
  MemFile f;
  f.write("header", 6, 0);
  f.set_old_pages(pages);
  const uint64_t at = MemFile::kCopiedBytes;  // records before it are copies
  write_record(f, at - 516, 2, std::string(512, 'b'));
  write_record(f, at + 100, 2, std::string(512, 'b'));  // page 2 as committed
  write_record(f, at + 616, 3, std::string(512, 'x'));  // not as committed: kept
  write_record(f, at + 1132, 0, std::string(512, 'a'));  // no page 0: kept
  EXPECT_EQ(f.size(), at + 1132 + 516);
  const uint64_t holes = (at - 516 - 6) + 100;
  EXPECT_EQ(f.held_bytes(), f.size() - holes - 512);  // not the holes, not the reference
  std::string want = "header" + std::string(at - 516 - 6, '\0') + std::string("\0\0\0\2", 4) +
                     std::string(512, 'b') + std::string(100, '\0') +
                     std::string("\0\0\0\2", 4) + std::string(512, 'b') +
                     std::string("\0\0\0\3", 4) + std::string(512, 'x') + std::string(4, '\0') +
                     std::string(512, 'a');
  ASSERT_EQ(want.size(), f.size());
  EXPECT_EQ(read_all(f), want);
  // Overwrites and a truncation cut references and bytes alike.
  f.write("HEAD", 4, 0);
  f.write("zz", 2, at + 300);
  f.write("yyy", 3, at + 1130);
  want.replace(0, 4, "HEAD").replace(at + 300, 2, "zz").replace(at + 1130, 3, "yyy");
  EXPECT_EQ(read_all(f), want);
  f.truncate(at + 400);
  want.resize(at + 400);
  EXPECT_EQ(read_all(f), want);
  f.write("\xd9\xd5\x05\xf9\x20\xa1\x63\xd7", 8, at + 400);
  EXPECT_TRUE(f.names_super_journal());
  want += "\xd9\xd5\x05\xf9\x20\xa1\x63\xd7";
  // A reference is good only for the commit it was made at; copies are
  // good for ever.
  pages->state++;
  EXPECT_EQ(read_all(f).rfind("error: ", 0), 0u);
  pages->state--;
  ASSERT_TRUE(f.keep_old_pages().ok());
  EXPECT_EQ(f.held_bytes(), f.size() - holes);
  pages->state++;
  EXPECT_EQ(read_all(f), want);
  EXPECT_FALSE(MemFile().names_super_journal());
}

// The journal's page records refer to the committed pages instead of
// copying them (mem_file.h): a large update keeps little in DRAM, and
// ROLLBACK, ROLLBACK TO and a commit that fails for want of room all get
// the old pages back.
TEST(SqliteVfsTest, ALargeUpdatesJournalRefersToCommittedPages) {
  TempDir dir;
  const std::string path = dir.file("u.db");
  const std::string rows = "SELECT count(*), sum(length(v)), sum(substr(v, 1, 1) = 'a') FROM t";
  std::string before;
  {
    Db db(path);
    ASSERT_EQ(db.exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<6000)"
                      " INSERT INTO t SELECT i, 'a' || printf('%0999d', i) FROM n"),
              SQLITE_OK)
        << db.error();
    before = db.one(rows);
    ASSERT_EQ(db.exec("PRAGMA cache_size=20; BEGIN; UPDATE t SET v = 'b' || substr(v, 2)"),
              SQLITE_OK)
        << db.error();
    auto journal = mem_files::open(path + "-journal", false);
    ASSERT_NE(journal, nullptr);
    EXPECT_GT(journal->size(), 6000u * 1000);
    EXPECT_LT(journal->held_bytes(), journal->size() / 16) << "old pages copied into DRAM";
    EXPECT_LT(journal->dram_bytes(), journal->size() / 16) << "room reserved past the copies";
    ASSERT_EQ(db.exec("SAVEPOINT s; DELETE FROM t WHERE k % 2 = 0; ROLLBACK TO s; RELEASE s"),
              SQLITE_OK);
    EXPECT_EQ(db.one("SELECT count(*) FROM t WHERE substr(v, 1, 1) = 'b'"), "6000");
    ASSERT_EQ(db.exec("ROLLBACK"), SQLITE_OK);
    EXPECT_EQ(db.one(rows), before);
    EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
  }
  // The same update, in a process that may not grow the file: the commit
  // fails (its journal needs room), and SQLite rolls back from the journal.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  run_in_child([&] {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
    setrlimit(RLIMIT_FSIZE, &lim);
    Db db(path);
    // Each row twice as long: the heap must grow too.
    if (db.exec("PRAGMA cache_size=20; UPDATE t SET v = 'c' || substr(v, 2) || v") !=
        SQLITE_FULL) {
      return 2;
    }
    if (db.one(rows) != before || db.one("PRAGMA integrity_check") != "ok") return 3;
    return 0;
  });
  Db db(path);
  EXPECT_EQ(db.one(rows), before);
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
}

// A transaction over two databases that fails at the second's commit rolls
// the first back after the first committed: its journal kept copies of the
// old pages before that commit, as references would name what it replaced.
// With a main database on a file, SQLite names a super-journal at the end
// of each journal; with a main database in memory it does not, and the
// other database's write lock tells.
TEST(SqliteVfsTest, ATransactionOverTwoDatabasesRollsBackTheOneThatCommitted) {
  for (bool main_in_memory : {false, true}) {
    TempDir dir;
    const std::string a = dir.file("a.db"), b = dir.file("b.db");
    auto fill = [](int rows) {
      return "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE n(i) AS (SELECT 1 "
             "UNION ALL SELECT i+1 FROM n WHERE i<" + std::to_string(rows) +
             ") INSERT INTO t SELECT i, printf('%01000d', i) FROM n";
    };
    {
      Db da(a), db(b);
      ASSERT_EQ(da.exec(fill(3000)), SQLITE_OK);
      ASSERT_EQ(db.exec(fill(30000)), SQLITE_OK);
    }
    struct stat sa {}, sb {};
    ASSERT_EQ(::stat(a.c_str(), &sa), 0);
    ASSERT_EQ(::stat(b.c_str(), &sb), 0);
    const std::string ta = main_in_memory ? "a.t" : "main.t";
    const std::string a_whole = "SELECT count(*) FROM " + ta + " WHERE v = printf('%01000d', k)";
    run_in_child([&] {
      // Room for a's commit, not for b's (30 MB of changed bytes to journal).
      signal(SIGXFSZ, SIG_IGN);
      const auto most = static_cast<rlim_t>(std::max(sa.st_size, sb.st_size) + (2 << 20));
      rlimit lim{most, most};
      setrlimit(RLIMIT_FSIZE, &lim);
      Db db(main_in_memory ? ":memory:" : a);
      const std::string attach_a = main_in_memory ? "ATTACH 'file:" + a + "?vfs=pm' AS a; " : "";
      const std::string sa_ = main_in_memory ? "a" : "main";
      // Caches that hold each update whole: the pages reach the files at
      // the commit, a's first, and only b's commit fails.
      if (db.exec(attach_a + "ATTACH 'file:" + b + "?vfs=pm' AS b; PRAGMA " + sa_ +
                  ".cache_size=-200000; PRAGMA b.cache_size=-200000") != SQLITE_OK) {
        return 2;
      }
      int rc = db.exec("BEGIN; UPDATE " + ta + " SET v = 'x' || substr(v, 2) WHERE k <= 1000; "
                       "UPDATE b.t SET v = hex(randomblob(500)); COMMIT");
      if (rc != SQLITE_FULL) {
        fprintf(stderr, "commit: %d %s\n", rc, db.error().c_str());
        return 3;
      }
      (void)db.exec("ROLLBACK");
      if (db.one(a_whole) != "3000") return 4;
      if (db.one("SELECT count(*) FROM b.t WHERE v = printf('%01000d', k)") != "30000") return 5;
      return 0;
    });
    Db db(a);
    EXPECT_EQ(db.one("SELECT count(*) FROM t WHERE v = printf('%01000d', k)"), "3000")
        << (main_in_memory ? "main in memory" : "main on a file");
    EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
  }
}

// Journal modes that keep a journal across transactions: the references a
// committed transaction left must never be read by a later rollback (they
// name pages that commit replaced).
TEST(SqliteVfsTest, AJournalKeptAcrossTransactionsNeverReadsStaleReferences) {
  for (const char* mode : {"PRAGMA journal_mode=PERSIST", "PRAGMA journal_mode=TRUNCATE",
                           "PRAGMA locking_mode=EXCLUSIVE"}) {
    TempDir dir;
    Db db(dir.file("p.db"));
    ASSERT_EQ(db.exec(std::string(mode) + "; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<3000)"
                      " INSERT INTO t SELECT i, printf('%01000d', i) FROM n"),
              SQLITE_OK)
        << mode;
    ASSERT_EQ(db.exec("UPDATE t SET v = 'x' || substr(v, 2)"), SQLITE_OK) << mode;
    ASSERT_EQ(db.exec("BEGIN; UPDATE t SET v = 'y' WHERE k = 7; ROLLBACK"), SQLITE_OK)
        << mode << ": " << db.error();
    ASSERT_EQ(db.exec("BEGIN; UPDATE t SET v = 'z' || substr(v, 2); ROLLBACK"), SQLITE_OK)
        << mode << ": " << db.error();
    EXPECT_EQ(db.one("SELECT count(*) FROM t WHERE v = 'x' || substr(printf('%01000d', k), 2)"),
              "3000")
        << mode;
    EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok") << mode;
  }
}

// A database file renamed or removed while open: writes are refused, as
// SQLite's own VFS refuses them (they went on into the moved file).
TEST(SqliteVfsTest, AFileMovedWhileOpenRefusesWrites) {
  TempDir dir;
  const std::string path = dir.file("m.db");
  Db db(path);
  ASSERT_EQ(db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1)"), SQLITE_OK);
  ASSERT_EQ(::rename(path.c_str(), (path + ".old").c_str()), 0);
  EXPECT_EQ(db.exec("INSERT INTO t VALUES(2)"), SQLITE_READONLY) << db.error();
  EXPECT_EQ(sqlite3_extended_errcode(db.get()), SQLITE_READONLY_DBMOVED);
  EXPECT_EQ(db.one("SELECT sum(x) FROM t"), "1");  // reads go on
  ASSERT_EQ(::rename((path + ".old").c_str(), path.c_str()), 0);
  EXPECT_EQ(db.exec("INSERT INTO t VALUES(2)"), SQLITE_OK) << db.error();
}

// The check SQLite makes before each write transaction looks the path up
// only when the file's ctime changed since a lookup (shared_db.cc, moved()):
// each way of moving the file must still be seen once that ctime has
// settled and the fast path answers.
TEST(SqliteVfsTest, AFileMovedAfterQuietWritesIsStillSeen) {
  TempDir dir;
  const std::string path = dir.file("q.db");
  Db db(path);
  ASSERT_EQ(db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1)"), SQLITE_OK);
  auto settle = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ASSERT_EQ(db.exec("INSERT INTO t VALUES(1)"), SQLITE_OK) << db.error();  // a lookup, settled
    ASSERT_EQ(db.exec("INSERT INTO t VALUES(1)"), SQLITE_OK) << db.error();  // the fast path
  };
  auto refused = [&] {
    EXPECT_EQ(db.exec("INSERT INTO t VALUES(2)"), SQLITE_READONLY) << db.error();
    EXPECT_EQ(sqlite3_extended_errcode(db.get()), SQLITE_READONLY_DBMOVED);
  };
  settle();
  ASSERT_EQ(::rename(path.c_str(), (path + ".old").c_str()), 0);  // renamed
  refused();
  ASSERT_EQ(::rename((path + ".old").c_str(), path.c_str()), 0);
  settle();
  ASSERT_EQ(::link(path.c_str(), (path + ".link").c_str()), 0);  // removed, another link kept
  ASSERT_EQ(::unlink(path.c_str()), 0);
  refused();
  ASSERT_EQ(::rename((path + ".link").c_str(), path.c_str()), 0);
  settle();
  ::close(::open((path + ".new").c_str(), O_CREAT | O_WRONLY, 0644));
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);  // replaced
  refused();
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "7");  // reads go on
}

TEST(SqliteVfsTest, TheJournalLivesInDramAndWalIsRefused) {
  TempDir dir;
  const std::string path = dir.file("j.db");
  Db db(path);
  ASSERT_EQ(db.exec("CREATE TABLE t(x); BEGIN; INSERT INTO t VALUES(1)"), SQLITE_OK);
  EXPECT_NE(access((path + "-journal").c_str(), F_OK), 0);  // nothing on disk
  ASSERT_EQ(db.exec("COMMIT"), SQLITE_OK);
  EXPECT_EQ(db.exec("PRAGMA journal_mode=WAL"), SQLITE_ERROR);
  EXPECT_NE(db.error().find("not available with the pm VFS"), std::string::npos) << db.error();
  EXPECT_EQ(db.one("PRAGMA journal_mode=MEMORY"), "memory");
  ASSERT_EQ(db.exec("BEGIN; INSERT INTO t VALUES(2); ROLLBACK"), SQLITE_OK);
  EXPECT_EQ(db.one("SELECT sum(x) FROM t"), "1");
}

// An existing empty file is an empty database, with or without
// SQLITE_OPEN_CREATE (as with SQLite's own VFS), and keeps its permissions.
TEST(SqliteVfsTest, AnEmptyFileIsAnEmptyDatabase) {
  TempDir dir;
  const std::string path = dir.file("e.db");
  ::close(::open(path.c_str(), O_CREAT | O_WRONLY, 0640));
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);  // whatever the umask
  {
    Db db(path, SQLITE_OPEN_READWRITE);
    ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
    ASSERT_EQ(db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(3)"), SQLITE_OK);
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  Db db(path, SQLITE_OPEN_READONLY);
  EXPECT_EQ(db.one("SELECT x FROM t"), "3");
}

// A child after fork() writing through its parent's connection (which
// SQLite warns against) gets an error, and the parent's database is whole:
// a user trial's child once left it malformed, or holding only its rows.
TEST(SqliteVfsTest, AForkedChildCannotWriteThroughItsParentsConnection) {
  TempDir dir;
  const std::string path = dir.file("f.db");
  Db db(path);
  ASSERT_EQ(db.exec("CREATE TABLE t(x INTEGER PRIMARY KEY, who TEXT)"), SQLITE_OK);
  const pid_t pid = fork();
  if (pid == 0) {
    int failed = 0;
    for (int i = 0; i < 50; i++) {
      const int rc = db.exec("INSERT INTO t(who) VALUES('child')");
      failed += (rc & 0xff) == SQLITE_IOERR;  // an I/O error, not "not a database"
    }
    _exit(failed == 50 ? 0 : 2);
  }
  for (int i = 0; i < 50; i++) ASSERT_EQ(db.exec("INSERT INTO t(who) VALUES('parent')"), SQLITE_OK);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child's write went through";
  Db again(path);
  EXPECT_EQ(again.one("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(again.one("SELECT count(*) FROM t WHERE who = 'parent'"), "50");
  EXPECT_EQ(again.one("SELECT count(*) FROM t WHERE who = 'child'"), "0");
}

// A new database gets SQLite's permissions, 0644 less the umask.
TEST(SqliteVfsTest, ANewDatabaseHasSqlitesPermissions) {
  TempDir dir;
  const std::string path = dir.file("n.db");
  const mode_t old = umask(022);
  { Db db(path); EXPECT_EQ(db.exec("CREATE TABLE t(x)"), SQLITE_OK); }
  umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

// journal_mode=PERSIST never deletes its journal: the last close drops it
// from DRAM. PRAGMA mmap_size says what SQLite set.
TEST(SqliteVfsTest, APersistedJournalGoesWithTheLastCloseAndMmapSizeReads) {
  TempDir dir;
  const std::string path = dir.file("p.db");
  {
    Db db(path);
    ASSERT_EQ(db.exec("PRAGMA journal_mode=PERSIST; CREATE TABLE t(x); INSERT INTO t VALUES(1)"),
              SQLITE_OK);
    EXPECT_NE(mem_files::presence(path + "-journal"), mem_files::Presence::kUnknown);
    ASSERT_EQ(db.exec("PRAGMA mmap_size=1048576"), SQLITE_OK);
    EXPECT_EQ(db.one("PRAGMA mmap_size"), "1048576");
  }
  EXPECT_EQ(mem_files::presence(path + "-journal"), mem_files::Presence::kUnknown);
  Db db(path);
  EXPECT_EQ(db.one("SELECT x FROM t"), "1");
}

// PRAGMA journal_mode=WAL without a schema name reaches an attached pm
// database unasked: its log cannot open, and says so (not "not a database").
TEST(SqliteVfsTest, WalReachingAnAttachedDatabaseCannotOpenAndIsUndone) {
  TempDir dir;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("main.db").c_str(), &db), SQLITE_OK);
  pmsqlite_register(0);
  auto exec = [&](const std::string& sql) {
    return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  };
  ASSERT_EQ(exec("ATTACH 'file:" + dir.file("aux.db") + "?vfs=pm' AS aux"), SQLITE_OK);
  ASSERT_EQ(exec("CREATE TABLE aux.t(x); PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL"),
            SQLITE_OK);
  EXPECT_EQ(exec("INSERT INTO aux.t VALUES(1)"), SQLITE_CANTOPEN);
  EXPECT_EQ(exec("PRAGMA aux.journal_mode=DELETE; INSERT INTO aux.t VALUES(1)"), SQLITE_OK);
  sqlite3_close(db);
}

TEST(SqliteVfsTest, ConnectionsInOneProcessShareTheFileWithSqliteLocking) {
  TempDir dir;
  const std::string path = dir.file("c.db");
  Db a(path), b(path);
  ASSERT_EQ(a.rc(), SQLITE_OK);
  ASSERT_EQ(b.rc(), SQLITE_OK) << b.error();
  ASSERT_EQ(a.exec("CREATE TABLE t(x); INSERT INTO t VALUES(1)"), SQLITE_OK);
  EXPECT_EQ(b.one("SELECT count(*) FROM t"), "1");
  // b reads inside a transaction; a cannot commit a write meanwhile.
  ASSERT_EQ(b.exec("BEGIN; SELECT * FROM t"), SQLITE_OK);
  ASSERT_EQ(a.exec("BEGIN; INSERT INTO t VALUES(2)"), SQLITE_OK);
  EXPECT_EQ(a.exec("COMMIT"), SQLITE_BUSY);
  ASSERT_EQ(b.exec("COMMIT"), SQLITE_OK);
  ASSERT_EQ(a.exec("COMMIT"), SQLITE_OK) << a.error();
  EXPECT_EQ(b.one("SELECT count(*) FROM t"), "2");
  // Two writers: the second waits for the first.
  ASSERT_EQ(a.exec("BEGIN IMMEDIATE"), SQLITE_OK);
  EXPECT_EQ(b.exec("BEGIN IMMEDIATE"), SQLITE_BUSY);
  ASSERT_EQ(a.exec("COMMIT"), SQLITE_OK);
  EXPECT_EQ(b.exec("BEGIN IMMEDIATE; COMMIT"), SQLITE_OK);
}

// Connections come and go on several threads (a pool, say): an open that
// races with the last close of the same file waits for that close, rather
// than finding the container still locked.
TEST(SqliteVfsTest, ThreadsOpeningAndClosingOneFileNeverFindItLocked) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  { Db db(path); ASSERT_EQ(db.exec("CREATE TABLE t(x)"), SQLITE_OK); }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; i++) {
        Db db(path);
        if (db.rc() != SQLITE_OK) {
          failures++;
          continue;
        }
        sqlite3_busy_timeout(db.get(), 10000);
        if (db.exec("INSERT INTO t VALUES(" + std::to_string(t * 1000 + i) + ")") != SQLITE_OK) failures++;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  Db db(path);
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "400");
}

TEST(SqliteVfsTest, AnotherProcessGetsBusy) {
  TempDir dir;
  const std::string path = dir.file("p.db");
  Db db(path);
  ASSERT_EQ(db.exec("CREATE TABLE t(x)"), SQLITE_OK);
  pid_t pid = fork();
  if (pid == 0) {
    Db other(path);
    _exit(other.rc() == SQLITE_BUSY ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(SqliteVfsTest, FilesThatAreNotOurDatabasesAreRefusedAndLeftAlone) {
  TempDir dir;
  // An ordinary SQLite database.
  const std::string plain = dir.file("plain.db");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(plain.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  EXPECT_EQ(Db(plain).rc(), SQLITE_NOTADB);
  // A container of another program.
  const std::string other = dir.file("other.pm");
  pm::Options o;
  o.layout = "someone-else";
  o.initial_size = 1 << 20;
  ASSERT_TRUE(pm::Container::create(other, o).ok());
  EXPECT_EQ(Db(other).rc(), SQLITE_NOTADB);
  // A damaged container: its superblock alone is read from the copy.
  const std::string damaged = dir.file("damaged.db");
  { Db db(damaged); ASSERT_EQ(db.exec("CREATE TABLE t(x)"), SQLITE_OK); }
  {
    int fd = open(damaged.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "garbage!", 8, 0), 8);
    close(fd);
  }
  EXPECT_EQ(Db(damaged).exec("SELECT * FROM t"), SQLITE_OK);
  {
    int fd = open(damaged.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    // The superblock and its copy (one alone is read from the other).
    ASSERT_EQ(pwrite(fd, "garbage!garbage!", 16, 16), 16);
    ASSERT_EQ(pwrite(fd, "garbage!garbage!", 16, 4096 - 512 + 16), 16);
    close(fd);
  }
  EXPECT_EQ(Db(damaged).rc(), SQLITE_CORRUPT);
  // Missing, without SQLITE_OPEN_CREATE.
  EXPECT_EQ(Db(dir.file("missing.db"), SQLITE_OPEN_READWRITE).rc(), SQLITE_CANTOPEN);
  // A FIFO, which reads as empty, and a directory: an empty file is an
  // empty database, and a FIFO (or /dev/null) was replaced by one.
  const std::string fifo = dir.file("fifo.db"), sub = dir.file("dir.db");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  EXPECT_EQ(Db(fifo).rc(), SQLITE_CANTOPEN);
  EXPECT_EQ(Db(sub).rc(), SQLITE_CANTOPEN);
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // Still an ordinary, intact SQLite database.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(plain.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "SELECT * FROM t", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
}

// A user trial: a database whose superblock was damaged opened, was
// repaired from the superblock's copy, and nothing told the program. The
// repair reaches SQLite's error log (SQLITE_CONFIG_LOG), once.
TEST(SqliteVfsTest, ARepairedSuperblockIsLoggedToSqlite) {
  TempDir dir;
  const std::string path = dir.file("sb.db");
  {
    Db db(path);
    ASSERT_EQ(db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(7)"), SQLITE_OK);
  }
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "\xff\xff\xff\xff", 4, 64), 4);
  ::close(fd);
  pid_t pid = fork();
  if (pid == 0) {  // SQLite takes a log callback only before it initializes
    static std::string logged;
    sqlite3_shutdown();
    sqlite3_config(SQLITE_CONFIG_LOG, +[](void*, int, const char* msg) { logged += msg; }, nullptr);
    sqlite3_initialize();
    {
      Db db(path);
      if (db.one("SELECT x FROM t") != "7") _exit(2);
    }
    if (logged.find(path + ": superblock damaged") == std::string::npos) _exit(3);
    if (logged.find("rewrote the superblock from its copy") == std::string::npos) _exit(4);
    logged.clear();
    Db again(path);
    _exit(again.one("SELECT x FROM t") == "7" && logged.empty() ? 0 : 5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SqliteVfsTest, ReadOnlyOpenReadsAndRefusesWrites) {
  TempDir dir;
  const std::string path = dir.file("ro.db");
  { Db db(path); ASSERT_EQ(db.exec("CREATE TABLE t(x); INSERT INTO t VALUES(3)"), SQLITE_OK); }
  Db db(path, SQLITE_OPEN_READONLY);
  ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
  EXPECT_EQ(db.one("SELECT x FROM t"), "3");
  EXPECT_EQ(db.exec("INSERT INTO t VALUES(4)"), SQLITE_READONLY);
}

// A file system that fills up (here: a file-size limit) fails the
// transaction with SQLITE_FULL; what was committed before stays, and the
// database goes on working.
TEST(SqliteVfsTest, AFullFileSystemFailsTheTransactionAndLosesNothing) {
  TempDir dir;
  const std::string path = dir.file("full.db");
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{48u << 20, 48u << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    Db db("file:" + path + "?initial_size=4M");
    if (db.exec("CREATE TABLE t(x BLOB); INSERT INTO t VALUES(zeroblob(1000))") != SQLITE_OK) _exit(2);
    int rc = SQLITE_OK;
    for (int i = 0; i < 200 && rc == SQLITE_OK; i++) rc = db.exec("INSERT INTO t VALUES(randomblob(1000000))");
    if (rc != SQLITE_FULL) _exit(3);
    const std::string rows = db.one("SELECT count(*) FROM t");
    // Small transactions still commit. (Debian's SQLite zeroes freed pages,
    // secure_delete, which would make the delete as big as the data.)
    if (db.exec("INSERT INTO t VALUES(zeroblob(10)); PRAGMA secure_delete=OFF;"
                "DELETE FROM t WHERE length(x) != 1000") != SQLITE_OK) {
      fprintf(stderr, "delete: %s\n", db.error().c_str());
      _exit(4);
    }
    if (db.one("PRAGMA integrity_check") != "ok") _exit(5);
    std::ofstream(path + ".rows") << rows;
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  Db db(path);
  ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db.one("SELECT count(*) FROM t"), "1");
}

// A user trial: a container filled to its max_size, half its rows
// deleted, VACUUM: the next large insert failed with SQLITE_FULL once (and
// went in when tried again). VACUUM trims the file after its commit; the
// heap reuses the blocks a trim frees only once it is committed, and the
// trim rode with the next commit, too late for that transaction. Filling
// 1 GiB (the smallest max_size) is the opt-in test above's work: here the
// trim must be committed, its blocks free, when the next write begins.
TEST(SqliteVfsTest, AfterAVacuumTheBlocksItFreedAreFreeForTheNextTransaction) {
  TempDir dir;
  auto c = pm::Container::create(dir.file("vacuum.pm"), pm::Options{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::string name = dir.file("vacuum.db");
  ASSERT_TRUE(bind(name, c->get()).ok());
  {
    Db db(name);
    ASSERT_EQ(db.exec("PRAGMA secure_delete=OFF; CREATE TABLE t(x BLOB)"), SQLITE_OK);
    for (int i = 0; i < 24; i++) {
      ASSERT_EQ(db.exec("INSERT INTO t VALUES(randomblob(1000000))"), SQLITE_OK) << db.error();
    }
    ASSERT_EQ(db.exec("DELETE FROM t WHERE rowid % 2 = 0; VACUUM"), SQLITE_OK) << db.error();
    const uint64_t released = (*c)->heap_counters().released;
    ASSERT_EQ(db.exec("BEGIN IMMEDIATE"), SQLITE_OK) << db.error();
    EXPECT_EQ((*c)->heap_counters().released, released + 1)
        << "the blocks VACUUM's trim freed are not allocatable when the next write begins";
    ASSERT_EQ(db.exec("INSERT INTO t VALUES(randomblob(1000000)); COMMIT"), SQLITE_OK);
    EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(db.one("SELECT count(*) FROM t"), "13");
  }
  ASSERT_TRUE(unbind(name).ok());
}

// A transaction larger than SQLite's page cache writes pages into the file
// before its commit (a spill); one that then fails (SQLITE_FULL) gives up
// its lock unsynced, with its journal in DRAM. A kill then (before another
// statement replays that journal) must find the last commit, not part of
// the failed transaction; so must a close in locking_mode=EXCLUSIVE, which
// unlocks only then, after earlier transactions synced.
TEST(SqliteVfsTest, ASpillThatFailsLeavesNoPartOfItsTransaction) {
  TempDir dir;
  for (const std::string mode : {"NORMAL", "EXCLUSIVE"}) {
    const std::string path = dir.file(mode + ".db");
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGXFSZ, SIG_IGN);
      auto db = std::make_unique<Db>("file:" + path + "?initial_size=4M");
      const std::string n = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<";
      if (db->exec("PRAGMA locking_mode=" + mode + ";"
                   "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER, pad BLOB);"
                   "CREATE TABLE big(x BLOB); CREATE TABLE filler(id INTEGER PRIMARY KEY, pad BLOB);" +
                   n + "20000) INSERT INTO acct SELECT i, 0, randomblob(150) FROM n;" + n +
                   "40000) INSERT INTO filler SELECT i, randomblob(150) FROM n;"
                   "BEGIN; UPDATE acct SET pad=randomblob(150); UPDATE filler SET pad=randomblob(150);"
                   "COMMIT") != SQLITE_OK) {
        _exit(2);  // (the last transaction leaves the container room for the next)
      }
      struct stat st {};
      stat(path.c_str(), &st);
      rlimit lim{static_cast<rlim_t>(st.st_size), static_cast<rlim_t>(st.st_size)};
      setrlimit(RLIMIT_FSIZE, &lim);  // the disk is full now
      if (db->exec("PRAGMA cache_size=20; BEGIN; UPDATE acct SET bal=bal+1, pad=randomblob(170)") !=
          SQLITE_OK) {
        _exit(3);
      }
      int rc = SQLITE_OK;
      for (int i = 0; i < 3000 && rc == SQLITE_OK; i++) {
        rc = db->exec("INSERT INTO big VALUES(randomblob(8000))");
      }
      if (mode == "EXCLUSIVE") db.reset();  // a close; NORMAL: as a kill, no statement after
      _exit(rc == SQLITE_FULL ? 0 : 4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << mode << ": signal " << WTERMSIG(status);
    ASSERT_EQ(WEXITSTATUS(status), 0) << mode;
    Db db(path);
    ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
    EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok") << mode;
    EXPECT_EQ(db.one("SELECT sum(bal) FROM acct"), "0") << mode;
  }
}

// Without the unlock's commit, synchronous=OFF still commits each
// transaction (SQLite sends SQLITE_FCNTL_SYNC all the same), in either
// locking mode: a kill after it loses nothing.
TEST(SqliteVfsTest, SynchronousOffTransactionsSurviveAKill) {
  TempDir dir;
  for (const char* mode : {"NORMAL", "EXCLUSIVE"}) {
    const std::string path = dir.file(std::string(mode) + ".db");
    pid_t pid = fork();
    if (pid == 0) {
      Db db(path);
      const int rc = db.exec(std::string("PRAGMA synchronous=OFF; PRAGMA locking_mode=") + mode +
                             "; CREATE TABLE t(x); INSERT INTO t VALUES(7)");
      _exit(rc == SQLITE_OK ? 0 : 2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << mode;
    Db db(path);
    EXPECT_EQ(db.one("SELECT x FROM t"), "7") << mode;
  }
}

// Fills a 1 GiB container: 2 GiB of memory and file, so opt-in
// (PM_SQLITE_LONG=1); the file-size test above covers the same path.
TEST(SqliteVfsTest, ADatabaseLargerThanMaxSizeGetsFull) {
  if (getenv("PM_SQLITE_LONG") == nullptr) GTEST_SKIP() << "set PM_SQLITE_LONG=1";
  TempDir dir;
  Db db("file:" + dir.file("max.db") + "?max_size=1G&initial_size=4M");
  ASSERT_EQ(db.exec("CREATE TABLE t(x BLOB)"), SQLITE_OK);
  int rc = SQLITE_OK;
  int rows = 0;
  for (; rows < 2000 && rc == SQLITE_OK; rows++) {
    rc = db.exec("INSERT INTO t VALUES(zeroblob(4000000))");
  }
  EXPECT_EQ(rc, SQLITE_FULL) << db.error();
  EXPECT_GT(rows, 100);
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db.exec("DELETE FROM t; VACUUM"), SQLITE_OK) << db.error();
}

TEST(SqliteVfsTest, VacuumIntoCopiesAnOrdinaryDatabaseIn) {
  TempDir dir;
  const std::string plain = dir.file("plain.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(plain.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr), SQLITE_OK);
  pmsqlite_register(0);
  const std::string sql = "CREATE TABLE t(x); INSERT INTO t VALUES(42); VACUUM INTO 'file:" +
                          dir.file("copy.db") + "?vfs=pm'";
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  Db db(dir.file("copy.db"));
  EXPECT_EQ(db.one("SELECT x FROM t"), "42");
}

// A size parameter that is not one is a clear CANTOPEN, not "file is not a
// database" (what the container's own check of the value turned into), and
// nothing is created.
TEST(SqliteVfsTest, BadSizeParametersAreRefusedByName) {
  TempDir dir;
  for (const char* q : {"initial_size=64K", "initial_size=1.5G", "max_size=-1",
                        "max_size=100000000000G", "initial_size=abc",
                        "initial_size=2G&max_size=1G"}) {
    const std::string path = dir.file("p.db");
    Db db("file:" + path + "?" + q);
    EXPECT_EQ(db.rc(), SQLITE_CANTOPEN) << q;
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << q << " created the file";
  }
  Db ok("file:" + dir.file("ok.db") + "?initial_size=2M&max_size=2G");
  EXPECT_EQ(ok.rc(), SQLITE_OK) << ok.error();
  // max_size is rounded up to whole GiB before initial_size (8M) meets it.
  Db small("file:" + dir.file("small.db") + "?max_size=1K");
  EXPECT_EQ(small.rc(), SQLITE_OK) << small.error();
}

// The backup API copies page 1 of a WAL database as it is (format bytes 18
// and 19 = 2); the copy must open on the pm VFS, which has no WAL.
TEST(SqliteVfsTest, ABackupOfAWalDatabaseOpensInRollbackMode) {
  TempDir dir;
  sqlite3* src = nullptr;
  ASSERT_EQ(sqlite3_open(dir.file("w.db").c_str(), &src), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(src, "PRAGMA journal_mode=WAL; CREATE TABLE a(x); INSERT INTO a VALUES(1),(2)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  {
    Db dst(dir.file("copy.db"));
    ASSERT_EQ(dst.rc(), SQLITE_OK);
    sqlite3_backup* b = sqlite3_backup_init(dst.get(), "main", src, "main");
    ASSERT_NE(b, nullptr) << dst.error();
    EXPECT_EQ(sqlite3_backup_step(b, -1), SQLITE_DONE);
    EXPECT_EQ(sqlite3_backup_finish(b), SQLITE_OK);
    // The connection that restored it reads it on at once (its cache held
    // the copied first page, which wanted a write-ahead log).
    EXPECT_EQ(dst.one("SELECT count(*) FROM a"), "2");
    EXPECT_EQ(dst.exec("INSERT INTO a VALUES(3)"), SQLITE_OK) << dst.error();
  }
  sqlite3_close(src);
  Db db(dir.file("copy.db"));
  ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
  EXPECT_EQ(db.one("SELECT count(*) FROM a"), "3");
  EXPECT_EQ(db.one("PRAGMA journal_mode"), "delete");
  EXPECT_EQ(db.one("PRAGMA integrity_check"), "ok");
}

// A transaction over a pm database and an attached ordinary one: SQLite's
// super-journal must be a file on the disk, where the ordinary database's
// hot journal looks for it after a crash (in DRAM, a kill left that
// database half updated). Seen here through the VFS's open of one.
TEST(SqliteVfsTest, ASuperJournalIsAFileOnTheDisk) {
  TempDir dir;
  pmsqlite_register(0);
  sqlite3_vfs* vfs = sqlite3_vfs_find(PMSQLITE_VFS_NAME);
  ASSERT_NE(vfs, nullptr);
  std::vector<char> mem(static_cast<size_t>(vfs->szOsFile));
  auto* f = reinterpret_cast<sqlite3_file*>(mem.data());
  const std::string name = dir.file("m.db-mj0123ABCD");
  int out = 0;
  ASSERT_EQ(vfs->xOpen(vfs, name.c_str(), f,
                       SQLITE_OPEN_SUPER_JOURNAL | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &out),
            SQLITE_OK);
  EXPECT_EQ(f->pMethods->xWrite(f, "names", 5, 0), SQLITE_OK);
  EXPECT_EQ(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_OK);
  EXPECT_EQ(::access(name.c_str(), F_OK), 0) << "the super-journal is not on the disk";
  f->pMethods->xClose(f);
  int exists = 0;
  EXPECT_EQ(vfs->xAccess(vfs, name.c_str(), SQLITE_ACCESS_EXISTS, &exists), SQLITE_OK);
  EXPECT_EQ(exists, 1);
  EXPECT_EQ(vfs->xDelete(vfs, name.c_str(), 0), SQLITE_OK);
}

}  // namespace
}  // namespace pmsqlite::test
