// kill -9 during SQLite transactions on the pm VFS, many rounds on one
// database: after each, the database must pass integrity_check and hold
// exactly the transactions the killed process saw committed (and perhaps
// the one in flight), with money neither made nor lost.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "test_db.h"
#include "testutil/temp_dir.h"

namespace pmsqlite::test {
namespace {

constexpr int kAccounts = 50;
constexpr int kStart = 1000;

int rounds() {
  const char* r = getenv("PM_KILL_ROUNDS");
  return r ? std::max(4, atoi(r) / 2) : 60;
}

// The child: transfers until killed; writes each committed sequence number
// to `ack` after COMMIT returned. Some transactions are rolled back on
// purpose, some with a cache small enough to spill into the file first.
[[noreturn]] void transfer_forever(const std::string& path, int ack, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Db db(path);
  if (db.rc() != SQLITE_OK) _exit(10);
  const char* modes[] = {"PRAGMA journal_mode=DELETE", "PRAGMA journal_mode=MEMORY"};
  const char* syncs[] = {"PRAGMA synchronous=FULL", "PRAGMA synchronous=OFF"};
  db.one(modes[rng() % 2]);
  db.exec(syncs[rng() % 2]);
  if (rng() % 3 == 0) db.exec("PRAGMA cache_size=4");
  long seq = std::stol(db.one("SELECT coalesce(max(seq), 0) FROM ledger"));
  for (;;) {
    const int src = static_cast<int>(rng() % kAccounts), dst = static_cast<int>(rng() % kAccounts);
    const int amount = static_cast<int>(rng() % 100);
    const bool rollback = rng() % 8 == 0;
    const std::string sql =
        "BEGIN; UPDATE accounts SET balance = balance - " + std::to_string(amount) + " WHERE id = " +
        std::to_string(src) + "; UPDATE accounts SET balance = balance + " + std::to_string(amount) +
        " WHERE id = " + std::to_string(dst) + "; INSERT INTO ledger VALUES(" +
        std::to_string(rollback ? seq + 1000000 : seq + 1) + ", " + std::to_string(src) + ", " +
        std::to_string(dst) + ", " + std::to_string(amount) + ", randomblob(" +
        std::to_string(rng() % 3000) + ")); " + (rollback ? "ROLLBACK" : "COMMIT");
    if (db.exec(sql) != SQLITE_OK) _exit(11);
    if (rollback) continue;
    seq++;
    if (write(ack, &seq, sizeof seq) != sizeof seq) _exit(12);
  }
}

TEST(SqliteKillTest, EveryRoundRecoversExactlyTheCommittedTransfers) {
  pm::test::TempDir dir;
  const std::string path = dir.file("ledger.db");
  {
    Db db(path);
    ASSERT_EQ(db.exec("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER);"
                      "CREATE TABLE ledger(seq INTEGER PRIMARY KEY, src, dst, amount, memo BLOB);"
                      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i<" +
                      std::to_string(kAccounts - 1) + ") INSERT INTO accounts SELECT i, " +
                      std::to_string(kStart) + " FROM n"),
              SQLITE_OK)
        << db.error();
  }
  std::mt19937_64 rng(42);
  long acked = 0;
  for (int round = 0; round < rounds(); round++) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      transfer_forever(path, fds[1], rng());
    }
    close(fds[1]);
    const int wait_for = static_cast<int>(rng() % 200);
    long seq = 0;
    for (int i = 0; i < wait_for && read(fds[0], &seq, sizeof seq) == sizeof seq; i++) acked = seq;
    if (rng() % 2) usleep(static_cast<useconds_t>(rng() % 3000));
    kill(pid, SIGKILL);
    while (read(fds[0], &seq, sizeof seq) == sizeof seq) acked = seq;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": child exited " << WEXITSTATUS(status);

    Db db(path);
    ASSERT_EQ(db.rc(), SQLITE_OK) << "round " << round << ": " << db.error();
    ASSERT_EQ(db.one("PRAGMA integrity_check"), "ok") << "round " << round;
    const long found = std::stol(db.one("SELECT coalesce(max(seq), 0) FROM ledger"));
    ASSERT_TRUE(found == acked || found == acked + 1)
        << "round " << round << ": acknowledged " << acked << ", recovered " << found;
    acked = found;
    EXPECT_EQ(db.one("SELECT count(*) FROM ledger"), std::to_string(found)) << "a lost or rolled-back row";
    EXPECT_EQ(db.one("SELECT sum(balance) FROM accounts"), std::to_string(kAccounts * kStart));
    EXPECT_EQ(db.one("SELECT count(*) FROM accounts a WHERE balance != " + std::to_string(kStart) +
                     " + coalesce((SELECT sum(amount) FROM ledger WHERE dst = a.id), 0)"
                     " - coalesce((SELECT sum(amount) FROM ledger WHERE src = a.id), 0)"),
              "0");
  }
  std::printf("kill test: sqlite: %d kills, %ld transactions committed\n", rounds(), acked);
}

}  // namespace
}  // namespace pmsqlite::test
