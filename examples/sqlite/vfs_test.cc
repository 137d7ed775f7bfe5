// The pm VFS through SQLite's API: transactions, rollbacks, several
// connections, bad files and limits.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>
#include <vector>
#include <fstream>
#include <memory>
#include <string>

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
    EXPECT_TRUE(mem_files::known(path + "-journal"));
    ASSERT_EQ(db.exec("PRAGMA mmap_size=1048576"), SQLITE_OK);
    EXPECT_EQ(db.one("PRAGMA mmap_size"), "1048576");
  }
  EXPECT_FALSE(mem_files::known(path + "-journal"));
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
  // Still an ordinary, intact SQLite database.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(plain.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "SELECT * FROM t", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
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
  }
  sqlite3_close(src);
  Db db(dir.file("copy.db"));
  ASSERT_EQ(db.rc(), SQLITE_OK) << db.error();
  EXPECT_EQ(db.one("SELECT count(*) FROM a"), "2");
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
