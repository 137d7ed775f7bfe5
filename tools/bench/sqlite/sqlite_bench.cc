#include "bench/sqlite/sqlite_bench.h"

#include <sqlite3.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/common/child_process.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"
#include "pmsqlite/vfs.h"

namespace pm::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Engine {
  const char* name;
  const char* vfs;  // nullptr: SQLite's default
  const char* journal_mode;
  const char* synchronous;
  bool durable;  // every acknowledged commit survives a power failure
};
// The pm VFS in SQLite's default journal mode (its journal a DRAM file the
// VFS keeps, referring to committed pages) and in MEMORY (SQLite's own
// heap): both durable, since the container commits atomically.
constexpr std::array<Engine, 5> kEngines = {{
    {"SQLite VFS, WAL, synchronous=FULL", nullptr, "WAL", "FULL", true},
    {"SQLite VFS, WAL, synchronous=NORMAL", nullptr, "WAL", "NORMAL", false},
    {"SQLite VFS, rollback journal, FULL", nullptr, "DELETE", "FULL", true},
    {"pm VFS, journal_mode=DELETE (default)", PMSQLITE_VFS_NAME, "DELETE", "FULL", true},
    {"pm VFS, journal_mode=MEMORY", PMSQLITE_VFS_NAME, "MEMORY", "FULL", true},
}};
constexpr size_t kPm = 3;  // the first pm engine; those before it are SQLite's own VFS

enum CellId { kInsert1, kInsert1000, kSelect, kUpdate, kScan, kCells };
constexpr std::array<const char*, kCells> kCellTitle = {
    "insert, 1 row/txn (txn/s)", "insert, 1000 rows/txn (rows/s)", "point select (/s)",
    "update by key, 1 row/txn (txn/s)", "range scan, 100 rows (/s)"};
constexpr std::array<const char*, kCells> kCellKey = {"insert_1", "insert_1000", "select",
                                                      "update_1", "scan_100"};
constexpr int kMaxRepeats = 16;

// What one directory's child measured (trivially copyable: it crosses a pipe).
struct DirResult {
  double load_rows_s[kEngines.size()];
  double file_mib[kEngines.size()];
  double ops[kCells][kEngines.size()][kMaxRepeats];
  double floor[kMaxRepeats];  // durable 4 KiB writes/s (file system only)
  int repeats;
  bool is_pmem;
};

class Db {
 public:
  Db(const std::string& path, const Engine& e) {
    rc_ = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, e.vfs);
    if (rc_ == SQLITE_OK) {
      rc_ = sqlite3_exec(db_,
                         fmt::format("PRAGMA journal_mode={}; PRAGMA synchronous={};"
                                     "PRAGMA mmap_size=2147418112",
                                     e.journal_mode, e.synchronous)
                             .c_str(),
                         nullptr, nullptr, nullptr);
    }
  }
  ~Db() {
    for (sqlite3_stmt* s : stmts_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }
  Status status(const std::string& what) const {
    return rc_ == SQLITE_OK ? Status()
                            : Status::io_error(fmt::format("sqlite: {}: {}", what, sqlite3_errmsg(db_)));
  }
  Status exec(const char* sql) {
    rc_ = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    return status(sql);
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    rc_ = sqlite3_prepare_v2(db_, sql, -1, &s, nullptr);
    stmts_.push_back(s);
    return s;
  }
  // Binds integers (and the row text for a "?" after them), runs to the end.
  Status run(sqlite3_stmt* s, int64_t a, int64_t b = 0, const std::string* text = nullptr) {
    sqlite3_bind_int64(s, 1, a);
    if (sqlite3_bind_parameter_count(s) >= 2) {
      if (text != nullptr) {
        sqlite3_bind_text(s, 2, text->data(), static_cast<int>(text->size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_int64(s, 2, b);
      }
    }
    while ((rc_ = sqlite3_step(s)) == SQLITE_ROW) {
    }
    sqlite3_reset(s);
    return rc_ == SQLITE_DONE ? Status() : status(sqlite3_sql(s));
  }

 private:
  sqlite3* db_ = nullptr;
  int rc_ = SQLITE_OK;
  std::vector<sqlite3_stmt*> stmts_;
};

// 100 letters, 13 from each draw (26^13 < 2^64): a draw per letter cost
// about 0.4 us a row, which every engine's one-row cells paid.
std::string row_text(std::mt19937_64& rng) {
  std::string t(100, 'x');
  uint64_t bits = 0;
  for (size_t i = 0; i < t.size(); i++) {
    if (i % 13 == 0) bits = rng();
    t[i] = static_cast<char>('a' + bits % 26);
    bits /= 26;
  }
  return t;
}

// One configuration's database, its statements, and the next new key.
struct Bench {
  std::unique_ptr<Db> db;
  sqlite3 *raw = nullptr;
  sqlite3_stmt *insert, *select, *update, *scan;
  int64_t next_key;
};

Status insert_rows(Bench& b, std::mt19937_64& rng, int64_t n) {
  PM_TRY(b.db->exec("BEGIN"));
  for (int64_t i = 0; i < n; i++) {
    const std::string t = row_text(rng);
    PM_TRY(b.db->run(b.insert, b.next_key++, 0, &t));
  }
  return b.db->exec("COMMIT");
}

// Runs `op` for `seconds`; returns ops/s (op returns how many it did).
Result<double> timed(double seconds, const std::function<Result<int64_t>()>& op) {
  const auto t0 = Clock::now();
  int64_t done = 0;
  double elapsed = 0;
  do {
    Result<int64_t> n = op();
    if (!n.ok()) return n.status();
    done += *n;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds);
  return static_cast<double>(done) / elapsed;
}

// What the device allows a transaction: one 4 KiB page written in place
// and made durable (pwrite, fdatasync) per second, in a preallocated file.
// A durable one-row transaction needs at least that on a file system, in
// any VFS, so it bounds the ratio any VFS can reach against WAL there.
Result<double> durable_page_writes(const std::string& dir, double seconds) {
  const std::string path = dir + "/device-floor";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::from_errno("open " + path, errno);
  constexpr int kPages = 64;
  std::vector<char> page(4096, 'p');
  Status s;
  for (int i = 0; i < kPages && s.ok(); i++) {
    if (::pwrite(fd, page.data(), page.size(), off_t{4096} * i) != 4096) {
      s = Status::from_errno("write " + path, errno);
    }
  }
  if (s.ok() && ::fsync(fd) != 0) s = Status::from_errno("fsync " + path, errno);
  Result<double> rate = s;
  if (s.ok()) {
    int64_t i = 0;
    rate = timed(seconds, [&]() -> Result<int64_t> {
      page[0] = static_cast<char>(i);
      if (::pwrite(fd, page.data(), page.size(), off_t{4096} * (i++ % kPages)) != 4096 ||
          ::fdatasync(fd) != 0) {
        return Status::from_errno("write and fdatasync " + path, errno);
      }
      return 1;
    });
  }
  ::close(fd);
  ::unlink(path.c_str());
  return rate;
}

Result<double> run_cell(Bench& b, CellId cell, const SqliteConfig& cfg, std::mt19937_64& rng) {
  const int64_t rows = static_cast<int64_t>(cfg.rows);
  auto key = [&] { return 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows)); };
  switch (cell) {
    case kInsert1:
      return timed(cfg.seconds, [&]() -> Result<int64_t> {
        const std::string t = row_text(rng);
        PM_TRY(b.db->run(b.insert, b.next_key++, 0, &t));  // autocommit: one transaction
        return 1;
      });
    case kInsert1000:
      return timed(cfg.seconds, [&]() -> Result<int64_t> {
        PM_TRY(insert_rows(b, rng, 1000));
        return 1000;
      });
    case kSelect:
      return timed(cfg.seconds, [&]() -> Result<int64_t> {
        for (int i = 0; i < 100; i++) PM_TRY(b.db->run(b.select, key()));
        return 100;
      });
    case kUpdate:
      return timed(cfg.seconds, [&]() -> Result<int64_t> {
        const std::string t = row_text(rng);
        PM_TRY(b.db->run(b.update, key(), 0, &t));
        return 1;
      });
    case kScan:
      return timed(cfg.seconds, [&]() -> Result<int64_t> {
        for (int i = 0; i < 10; i++) PM_TRY(b.db->run(b.scan, key()));
        return 10;
      });
    default:
      return Status::invalid_argument("no such cell");
  }
}

Result<DirResult> run_dir(const SqliteConfig& cfg, const std::string& dir, bool pmem) {
  if (pmem) {
    ::setenv("PMEM_IS_PMEM_FORCE", "1", 1);
  } else {
    ::unsetenv("PMEM_IS_PMEM_FORCE");
  }
  if (pmsqlite_register(0) != SQLITE_OK) return Status::io_error("cannot register the pm VFS");
  DirResult r{};
  r.repeats = std::min(cfg.repeats, kMaxRepeats);
  r.is_pmem = pmem;
  const Progress progress;
  std::vector<Bench> benches(kEngines.size());
  for (size_t e = 0; e < kEngines.size(); e++) {
    Bench& b = benches[e];
    b.db = std::make_unique<Db>(fmt::format("{}/db{}.sqlite", dir, e), kEngines[e]);
    PM_TRY(b.db->status("open"));
    PM_TRY(b.db->exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)"));
    b.insert = b.db->prepare("INSERT INTO t VALUES(?, ?)");
    b.select = b.db->prepare("SELECT v FROM t WHERE k = ?");
    b.update = b.db->prepare("UPDATE t SET v = ?2 WHERE k = ?1");
    b.scan = b.db->prepare("SELECT sum(length(v)) FROM t WHERE k BETWEEN ?1 AND ?1 + 99");
    PM_TRY(b.db->status("prepare"));
    progress.step(fmt::format("{}: loading {} rows into {}", dir, cfg.rows, kEngines[e].name));
    b.next_key = 1;
    std::mt19937_64 rng(1);
    const auto t0 = Clock::now();
    for (uint64_t done = 0; done < cfg.rows; done += 1000) {
      PM_TRY(insert_rows(b, rng, static_cast<int64_t>(std::min<uint64_t>(1000, cfg.rows - done))));
    }
    r.load_rows_s[e] = static_cast<double>(cfg.rows) /
                       std::chrono::duration<double>(Clock::now() - t0).count();
  }
  for (int c = 0; c < kCells; c++) {
    progress.step(fmt::format("{}: {}", dir, kCellTitle[c]));
    for (int rep = 0; rep < r.repeats; rep++) {
      for (size_t e = 0; e < kEngines.size(); e++) {  // interleaved
        std::mt19937_64 rng(static_cast<uint64_t>(100 * c + rep));
        Result<double> ops = run_cell(benches[e], static_cast<CellId>(c), cfg, rng);
        if (!ops.ok()) return ops.status().with_context(kEngines[e].name);
        r.ops[c][e][rep] = *ops;
      }
      if (c == kInsert1 && !pmem) {
        Result<double> floor = durable_page_writes(dir, cfg.seconds);
        if (!floor.ok()) return floor.status();
        r.floor[rep] = *floor;
      }
    }
  }
  benches.clear();
  std::error_code ec;
  for (size_t e = 0; e < kEngines.size(); e++) {
    uint64_t bytes = 0;
    for (const char* suffix : {"", "-wal", "-journal"}) {
      const auto p = fmt::format("{}/db{}.sqlite{}", dir, e, suffix);
      if (std::filesystem::exists(p, ec)) bytes += std::filesystem::file_size(p, ec);
    }
    r.file_mib[e] = static_cast<double>(bytes) / (1 << 20);
  }
  return r;
}

double med(const DirResult& r, int c, size_t e) {
  return median(std::vector<double>(r.ops[c][e], r.ops[c][e] + r.repeats));
}

// The fastest durable configuration of SQLite's own VFS in a cell.
double best_durable_default(const DirResult& r, int c) {
  double best = 0;
  for (size_t e = 0; e < kPm; e++) {
    if (kEngines[e].durable) best = std::max(best, med(r, c, e));
  }
  return best;
}

double best_default(const DirResult& r, int c) {
  double best = 0;
  for (size_t e = 0; e < kPm; e++) best = std::max(best, med(r, c, e));
  return best;
}

// The faster pm configuration in a cell (every one is durable).
double best_pm(const DirResult& r, int c) {
  double best = 0;
  for (size_t e = kPm; e < kEngines.size(); e++) best = std::max(best, med(r, c, e));
  return best;
}

void tabulate(const SqliteConfig& cfg, const DirResult& r, const std::string& where,
              std::vector<Table>* tables, std::vector<Target>* goals) {
  Table t;
  t.title = fmt::format("SQLite on {}: {} rows of (integer key, 100-byte text), median of {}",
                        where, cfg.rows, r.repeats);
  t.columns = {{"configuration", "configuration"}, {"durable", "durable"},
               {"load rows/s", "load_rows_per_s", Format::kRate}};
  for (int c = 0; c < kCells; c++) t.columns.push_back({kCellTitle[c], kCellKey[c], Format::kRate});
  t.columns.push_back({"file MiB", "file_mib", Format::kMiB});
  // Rows built cell by cell: GCC 12 warns (maybe-uninitialized) on
  // initializer lists of variants that hold strings.
  auto text_row = [](const char* a, const char* b) {
    std::vector<Cell> row;
    row.emplace_back(std::string(a));
    row.emplace_back(std::string(b));
    return row;
  };
  for (size_t e = 0; e < kEngines.size(); e++) {
    std::vector<Cell> row = text_row(kEngines[e].name, kEngines[e].durable ? "yes" : "no");
    row.emplace_back(r.load_rows_s[e]);
    for (int c = 0; c < kCells; c++) row.emplace_back(med(r, c, e));
    row.emplace_back(r.file_mib[e]);
    t.add_row(std::move(row));
  }
  if (!r.is_pmem) {
    std::vector<Cell> row = text_row("device: one 4 KiB write + fdatasync", "yes");
    row.emplace_back();
    row.emplace_back(median(std::vector<double>(r.floor, r.floor + r.repeats)));
    for (int c = 1; c <= kCells; c++) row.emplace_back();  // other cells, file MiB
    t.add_row(std::move(row));
    t.notes.push_back("the device row is no VFS: at most that many durable one-row "
                      "transactions a second, for any VFS on this file system");
  }
  for (const bool durable_only : {true, false}) {
    std::vector<Cell> row = text_row(durable_only ? "faster pm VFS vs fastest durable SQLite VFS"
                                                  : "faster pm VFS vs fastest SQLite VFS", "");
    row.emplace_back();
    for (int c = 0; c < kCells; c++) {
      row.push_back(
          ratio(best_pm(r, c), durable_only ? best_durable_default(r, c) : best_default(r, c)));
    }
    row.emplace_back();
    t.add_row(std::move(row));
  }
  t.notes.push_back("every configuration reads through mmap (PRAGMA mmap_size); WAL with "
                    "synchronous=NORMAL may lose its last commits at a power failure");
  if (r.is_pmem) {
    t.notes.push_back("pmem emulated: PMEM_IS_PMEM_FORCE=1 (cache flushes, no msync); "
                      "SQLite's fsync on tmpfs costs next to nothing");
  }
  tables->push_back(std::move(t));
  // Named by the pm configuration that reached it (the default one may not).
  size_t best = kPm;
  for (size_t e = kPm; e < kEngines.size(); e++) {
    if (med(r, kInsert1, e) > med(r, kInsert1, best)) best = e;
  }
  Target one = Target::at_least_of(
      fmt::format("1-row transactions, {} vs fastest durable SQLite VFS ({})",
                  kEngines[best].name, where),
      1.83, "x");
  one.goal = ">= 1.83x";
  one.measured = best_pm(r, kInsert1) / best_durable_default(r, kInsert1);
  if (!r.is_pmem) {
    // A goal above what the device allows any VFS is reported as such.
    const double bound = median(std::vector<double>(r.floor, r.floor + r.repeats)) /
                         best_durable_default(r, kInsert1);
    if (bound < 1.83) {
      one.not_applicable = fmt::format(
          "beyond this device: one durable 4 KiB write a transaction allows at most {:.2f}x",
          bound);
    }
  }
  goals->push_back(one);
  for (int c : {kSelect, kScan}) {
    Target g = Target::at_least_of(fmt::format("{} vs SQLite VFS with mmap ({})", kCellKey[c], where),
                                   1.0, "x");
    g.goal = ">= 1.0x";
    g.measured = best_pm(r, c) / best_default(r, c);
    goals->push_back(g);
  }
}

}  // namespace

Status run_sqlite_bench(const SqliteConfig& cfg, bool json) {
  const Environment env = collect_environment();
  std::vector<Table> tables;
  std::vector<Target> goals;
  for (const auto& [dir, pmem, where] :
       {std::tuple<std::string, bool, std::string>{cfg.pmem_dir, true, "pmem (emulated)"},
        {cfg.fs_dir, false, "a file system (msync, fdatasync)"}}) {
    if (dir.empty()) continue;
    // The databases in a directory of this run's own (dir_cleanup.h).
    Result<std::unique_ptr<RunDir>> run = RunDir::make(dir, "pm-bench-sqlite");
    if (!run.ok()) return run.status();
    const std::string in_run = (*run)->path();
    Result<DirResult> r = run_in_child<DirResult>([&] { return run_dir(cfg, in_run, pmem); });
    if (!r.ok()) return r.status().with_context(dir);
    tabulate(cfg, *r, where, &tables, &goals);
  }
  print_suite("sqlite", env, tables, goals, json);
  return Status();
}

}  // namespace pm::bench
