#include "bench/ordered/ordered_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/common/child_process.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/ordered/ordered_engine.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"

namespace pm::bench {

namespace {

using Clock = std::chrono::steady_clock;

enum EngineId { kTree1, kTree1000, kStore, kBdbDurable, kBdbPlain, kLmdb1, kLmdb1000, kEngines };
struct EngineInfo {
  const char* name;
  const char* durable;
};
constexpr std::array<EngineInfo, kEngines> kInfo = {{
    {"version tree, commit per write", "each write"},
    {"version tree, commit per 1000", "per 1000"},
    {"kvstore, ordered index", "each write"},
    {"Berkeley DB B-tree, txn per write", "each write"},
    {"Berkeley DB B-tree, no txn", "no"},
    {"LMDB, txn per write", "each write"},
    {"LMDB, txn per 1000", "per 1000"},
}};

enum Phase { kPut, kGet, kScan, kDel, kPhases };
constexpr std::array<const char*, kPhases> kPhaseTitle = {"put/s", "get/s", "scan 100/s",
                                                          "delete/s"};
constexpr std::array<const char*, kPhases> kPhaseKey = {"put_per_s", "get_per_s",
                                                        "scan_100_per_s", "delete_per_s"};
constexpr int kMaxRepeats = 16;

// What the child measured (trivially copyable: it crosses a pipe).
struct Measured {
  double ops[kEngines][kPhases][kMaxRepeats];
  // Engines that take a writer beside a reader: scans of 100 keys per
  // second with one thread overwriting keys meanwhile, and its puts/s.
  double scans_beside[kEngines][kMaxRepeats];
  double writer_puts[kEngines][kMaxRepeats];
  bool built[kEngines];
  int repeats;
};

Result<std::unique_ptr<OrderedEngine>> make_engine(int e, const std::string& dir) {
  switch (e) {
    case kTree1:
      return make_tree_engine(dir, 1);
    case kTree1000:
      return make_tree_engine(dir, 1000);
    case kStore:
      return make_store_engine(dir);
#ifdef PM_BENCH_BDB
    case kBdbDurable:
      return make_bdb_engine(dir, true);
    case kBdbPlain:
      return make_bdb_engine(dir, false);
#endif
#ifdef PM_BENCH_LMDB
    case kLmdb1:
      return make_lmdb_engine(dir, 1);
    case kLmdb1000:
      return make_lmdb_engine(dir, 1000);
#endif
    default:
      return Status::not_supported("not built");
  }
}

// 16 bytes, spread over the key space so that insertion order is random.
std::string key_of(uint64_t i) {
  return fmt::format("{:016x}", (i + 1) * 0x9E3779B97F4A7C15ull);
}

Result<double> timed(uint64_t n, const std::function<Status(uint64_t)>& op) {
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < n; i++) PM_TRY(op(i));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(n) / s;
}

// Scans as in the scan phase (a twentieth as many) while another thread
// overwrites random keys as fast as it can: what the records a writer
// keeps unapplied in the logs cost an ordered read.
Status scans_beside_writer(OrderedEngine& db, const OrderedConfig& cfg, int e, int rep,
                           const std::string& value, Measured* r) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts{0};
  std::atomic<bool> writer_done{false};
  Status failed;
  std::thread writer([&] {
    struct Done {
      std::atomic<bool>& d;
      ~Done() { d = true; }
    } done{writer_done};
    std::mt19937_64 wr(static_cast<uint64_t>(rep) + 1000);
    while (!stop.load(std::memory_order_relaxed)) {
      if (Status s = db.put(key_of(wr() % cfg.keys), value); !s.ok()) {
        failed = s;
        return;
      }
      puts.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::mt19937_64 rng(static_cast<uint64_t>(rep) + 2000);
  const uint64_t n = std::max<uint64_t>(cfg.scans / 20, 1);
  while (puts.load() < 1000 && !writer_done.load()) std::this_thread::yield();  // under way
  const uint64_t puts0 = puts.load();
  const auto t0 = Clock::now();
  Result<double> x = timed(n, [&](uint64_t) -> Status {
    Result<int> got = db.scan(key_of(rng() % cfg.keys), 100);
    return got.ok() ? Status() : got.status();
  });
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  writer.join();
  const std::string what = fmt::format("{} scans beside a writer", kInfo[e].name);
  if (!x.ok()) return x.status().with_context(what);
  if (!failed.ok()) return failed.with_context(what);
  r->scans_beside[e][rep] = *x;
  r->writer_puts[e][rep] = static_cast<double>(puts.load() - puts0) / secs;
  return Status();
}

// One engine, one repeat: every phase on a fresh store.
Status run_engine(int e, const OrderedConfig& cfg, int rep, Measured* r) {
  const std::string dir = fmt::format("{}/e{}", cfg.dir, e);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::io_error(fmt::format("mkdir {}: {}", dir, ec.message()));
  Result<std::unique_ptr<OrderedEngine>> made = make_engine(e, dir);
  if (!made.ok()) return made.status();
  OrderedEngine& db = **made;
  std::vector<uint64_t> order(cfg.keys);
  for (uint64_t i = 0; i < cfg.keys; i++) order[i] = i;
  std::mt19937_64 rng(static_cast<uint64_t>(rep) + 1);
  std::shuffle(order.begin(), order.end(), rng);
  const std::string value(100, 'v');
  std::string got;
  auto rate = [&](Phase p, Result<double> x) -> Status {
    if (!x.ok()) return x.status().with_context(fmt::format("{} {}", kInfo[e].name, kPhaseKey[p]));
    r->ops[e][p][rep] = *x;
    return Status();
  };
  PM_TRY(rate(kPut, timed(cfg.keys + 1, [&](uint64_t i) {
                return i < cfg.keys ? db.put(key_of(order[i]), value) : db.flush();
              })));
  std::shuffle(order.begin(), order.end(), rng);
  PM_TRY(rate(kGet, timed(cfg.keys, [&](uint64_t i) { return db.get(key_of(order[i]), &got); })));
  PM_TRY(rate(kScan, timed(cfg.scans, [&](uint64_t) -> Status {
                Result<int> n = db.scan(key_of(rng() % cfg.keys), 100);
                return n.ok() ? Status() : n.status();
              })));
  if (db.concurrent()) PM_TRY(scans_beside_writer(db, cfg, e, rep, value, r));
  std::shuffle(order.begin(), order.end(), rng);
  PM_TRY(rate(kDel, timed(cfg.keys + 1, [&](uint64_t i) {
                return i < cfg.keys ? db.del(key_of(order[i])) : db.flush();
              })));
  made->reset();
  std::filesystem::remove_all(dir, ec);
  return Status();
}

Result<Measured> run_all(const OrderedConfig& cfg) {
  ::setenv("PMEM_IS_PMEM_FORCE", "1", 1);
  Measured r{};
  r.repeats = std::min(cfg.repeats, kMaxRepeats);
  const Progress progress;
  for (int e = 0; e < kEngines; e++) {
    std::error_code ec;
    std::filesystem::create_directories(fmt::format("{}/probe{}", cfg.dir, e), ec);
    r.built[e] = make_engine(e, fmt::format("{}/probe{}", cfg.dir, e)).ok();
    std::filesystem::remove_all(fmt::format("{}/probe{}", cfg.dir, e), ec);
  }
  for (int rep = 0; rep < r.repeats; rep++) {
    for (int e = 0; e < kEngines; e++) {  // interleaved: noise lands on every engine
      if (!r.built[e]) continue;
      progress.step(fmt::format("repeat {}: {}", rep + 1, kInfo[e].name));
      PM_TRY(run_engine(e, cfg, rep, &r));
    }
  }
  return r;
}

double med(const Measured& r, const double (&x)[kMaxRepeats]) {
  return median(std::vector<double>(x, x + r.repeats));
}

double med(const Measured& r, int e, int p) { return r.built[e] ? med(r, r.ops[e][p]) : 0; }

// The engines that took a writer beside their scans.
Table beside_writer_table(const Measured& r) {
  Table t;
  t.title = "scans of 100 keys beside one writer overwriting random keys, median";
  t.columns = {{"engine", "engine"},
               {"scan 100/s", "scan_100_per_s", Format::kRate},
               {"alone", "scan_100_alone_per_s", Format::kRate},
               {"vs alone", "vs_alone", Format::kRatio},
               {"writer put/s", "writer_put_per_s", Format::kRate}};
  for (int e = 0; e < kEngines; e++) {
    if (!r.built[e] || r.scans_beside[e][0] == 0) continue;
    std::vector<Cell> row;
    row.emplace_back(kInfo[e].name);
    row.emplace_back(med(r, r.scans_beside[e]));
    row.emplace_back(med(r, e, kScan));
    row.push_back(ratio(med(r, r.scans_beside[e]), med(r, e, kScan)));
    row.emplace_back(med(r, r.writer_puts[e]));
    t.add_row(std::move(row));
  }
  t.notes.push_back("kvstore: a scan merges the index with the keys of the records the writer "
                    "has logged and no gleaner has applied yet; those are read from the logs "
                    "once, by the first scan that needs them");
  return t;
}

}  // namespace

Status run_ordered_bench(const OrderedConfig& cfg, bool json) {
  const Environment env = collect_environment();
  // The engines' files in a directory of this run's own (dir_cleanup.h).
  Result<std::unique_ptr<RunDir>> dir = RunDir::make(cfg.dir, "pm-bench-ordered");
  if (!dir.ok()) return dir.status();
  OrderedConfig in_run = cfg;
  in_run.dir = (*dir)->path();
  Result<Measured> got = run_in_child<Measured>([&] { return run_all(in_run); });
  if (!got.ok()) return got.status().with_context(cfg.dir);
  const Measured& r = *got;
  Table t;
  t.title = fmt::format("ordered stores on emulated pmem ({}): {} keys of 16 bytes, 100-byte "
                        "values, scans of 100 keys, median of {}",
                        cfg.dir, cfg.keys, r.repeats);
  t.columns = {{"engine", "engine"}, {"durable", "durable"}};
  for (int p = 0; p < kPhases; p++) {
    t.columns.push_back({kPhaseTitle[p], kPhaseKey[p], Format::kRate});
  }
  // Rows built cell by cell: GCC 12 warns (maybe-uninitialized) on
  // initializer lists of variants that hold strings.
  auto text_row = [](const std::string& a, const std::string& b) {
    std::vector<Cell> row;
    row.emplace_back(a);
    row.emplace_back(b);
    return row;
  };
  for (int e = 0; e < kEngines; e++) {
    std::vector<Cell> row = text_row(kInfo[e].name, r.built[e] ? kInfo[e].durable : "not built");
    for (int p = 0; p < kPhases; p++) {
      if (r.built[e]) {
        row.emplace_back(med(r, e, p));
      } else {
        row.emplace_back();
      }
    }
    t.add_row(std::move(row));
  }
  const std::array<std::pair<int, int>, 5> pairs = {{{kTree1, kBdbDurable},
                                                     {kTree1, kLmdb1},
                                                     {kTree1000, kLmdb1000},
                                                     {kStore, kBdbDurable},
                                                     {kStore, kLmdb1}}};
  for (const auto& [a, b] : pairs) {
    std::vector<Cell> row = text_row(fmt::format("{} vs {}", kInfo[a].name, kInfo[b].name), "");
    for (int p = 0; p < kPhases; p++) row.push_back(ratio(med(r, a, p), med(r, b, p)));
    t.add_row(std::move(row));
  }
  t.notes.push_back("PMEM_IS_PMEM_FORCE=1: the tree flushes cache lines; Berkeley DB and LMDB "
                    "sync with fsync/fdatasync, which cost little on tmpfs");
  t.notes.push_back("the tree's gets and scans read the working state; LMDB's and Berkeley DB's "
                    "read committed data (no write is open during those phases)");
  t.notes.push_back("kvstore: a put or delete returns once its log record is persisted; gets "
                    "read the DRAM frontend; scans merge the backend's ordered index with the "
                    "records not yet applied, and read each value as a get");
  std::vector<Target> goals;
  auto vs = [&](const char* name, int a, int b, Phase p, double x) {
    Target g = Target::at_least_of(name, x, "x");
    g.goal = fmt::format(">= {}x", x);
    g.available = r.built[a] && r.built[b];
    g.measured = g.available ? med(r, a, p) / med(r, b, p) : 0;
    goals.push_back(g);
  };
  vs("tree puts vs Berkeley DB durable (CDDS: +74%)", kTree1, kBdbDurable, kPut, 1.74);
  vs("tree gets vs Berkeley DB durable (CDDS: +138%)", kTree1, kBdbDurable, kGet, 2.38);
  vs("tree deletes vs Berkeley DB durable (CDDS: +503%)", kTree1, kBdbDurable, kDel, 6.0);
  vs("tree gets vs LMDB", kTree1, kLmdb1, kGet, 1.0);
  vs("tree scans vs LMDB", kTree1, kLmdb1, kScan, 1.0);
  vs("kvstore puts vs Berkeley DB durable", kStore, kBdbDurable, kPut, 1.74);
  vs("kvstore gets vs Berkeley DB durable", kStore, kBdbDurable, kGet, 2.38);
  vs("kvstore deletes vs Berkeley DB durable", kStore, kBdbDurable, kDel, 6.0);
  vs("kvstore scans vs LMDB", kStore, kLmdb1, kScan, 1.0);
  print_suite("ordered", env, {t, beside_writer_table(r)}, goals, json);
  return Status();
}

}  // namespace pm::bench
