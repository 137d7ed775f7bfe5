// `pm bench sqlite`: SQLite's own VFS (WAL with synchronous FULL and
// NORMAL, and the rollback journal) against the pm VFS (examples/sqlite),
// on emulated pmem (/dev/shm, PMEM_IS_PMEM_FORCE=1) and on an ordinary file
// system, in one run: a table of (integer key, 100-byte text) loaded with
// 1,000 rows per transaction, then one-row and 1,000-row insert
// transactions, point selects, one-row updates by key and 100-row range
// scans, each cell run on each configuration in turn and repeated. Every
// configuration reads through mmap (PRAGMA mmap_size). Each directory runs
// in a child process: the pmem emulation is a process-wide switch.
#ifndef TOOLS_BENCH_SQLITE_SQLITE_BENCH_H_
#define TOOLS_BENCH_SQLITE_SQLITE_BENCH_H_

#include <cstdint>
#include <string>

#include "pm/status.h"

namespace pm::bench {

struct SqliteConfig {
  std::string pmem_dir = "/dev/shm/pm-bench-sqlite";
  std::string fs_dir = "/var/tmp/pm-bench-sqlite";  // "" skips the file system
  uint64_t rows = 1'000'000;
  double seconds = 1;  // per cell, configuration and repeat
  int repeats = 3;

  static SqliteConfig smoke_sized() {
    SqliteConfig c;
    c.rows = 3000;
    c.seconds = 0.03;
    c.repeats = 1;
    return c;
  }
};

Status run_sqlite_bench(const SqliteConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_SQLITE_SQLITE_BENCH_H_
