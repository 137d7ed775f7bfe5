#include "bench/kv/kv_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/barrier_delay.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/kv/kv_engine.h"
#include "bench/kv/kv_engine_process.h"
#include "bench/kv/kv_engine_store.h"
#include "bench/kv/kv_plot.h"
#include "bench/kv/kv_recovery.h"
#include "bench/kv/kv_report.h"
#include "bench/kv/kv_runner.h"
#include "bench/kv/kv_workload.h"
#include "bench/common/progress.h"
#include "bench/common/workload.h"
#include "kvstore/frontend.h"  // sizeof(kv::Frontend::Bucket)

namespace pm::bench {

namespace {

// Keys read back after the kvstore's reopen (spread over the key space).
constexpr uint64_t kVerifyKeys = 100'000;

struct Context {
  const KvConfig& cfg;
  const DirInfo& dir;
  const KeyStreams& streams;
  const std::vector<CellSpec>& cells;
  const Progress& progress;
};

// One engine of the run: in a process of its own (proc), or here (the
// kvstore: its snapshot and reopen need it); its results, and what runs
// between its last two cells (the kvstore's snapshot).
struct Lane {
  std::string name;
  std::unique_ptr<EngineProcess> proc;
  std::unique_ptr<KvEngine> engine;
  std::function<Status()> before_last;
  EngineRun run;

  std::string prefill_method() const {
    return proc ? proc->prefill_method() : engine->prefill_method();
  }
  Status prefill(uint64_t keys) { return proc ? proc->prefill(keys) : engine->prefill(keys); }
  Result<CellResult> run_cell(const CellSpec& spec, const Context& ctx) {
    if (proc) return proc->run_cell(spec, ctx.cfg.seconds);
    return pm::bench::run_cell(*engine, spec, ctx.streams, ctx.cfg.seconds);
  }
  Status settle() { return proc ? proc->settle() : engine->settle(); }
};

std::string cell_name(const std::string& engine, const CellSpec& spec) {
  return fmt::format("{}, {} keys, {}% puts, {} thread(s)", engine, key_choice_name(spec.choice),
                     spec.put_percent, spec.threads);
}

// The repetition with the median throughput.
CellResult median(std::vector<CellResult> reps) {
  std::sort(reps.begin(), reps.end(),
            [](const CellResult& a, const CellResult& b) { return a.ops_per_s() < b.ops_per_s(); });
  return std::move(reps[reps.size() / 2]);
}

// Every engine is loaded first; then each cell runs on every engine in turn,
// `repeats` times, the engines' order rotating between repetitions, so that
// machine noise (another process, frequency changes) lands on every engine
// alike; a cell reports its median repetition. Each engine but the kvstore
// runs in a process of its own (kv_engine_process.h). An engine settles (untimed)
// after every run but its very last, whose backlog the kvstore's recovery
// measurement replays.
Status run_interleaved(std::vector<Lane>& lanes, const Context& ctx) {
  for (Lane& l : lanes) {
    l.run.name = l.name;
    l.run.prefill_method = l.prefill_method();
    ctx.progress.step(fmt::format("{}: prefill of {} keys", l.name, ctx.cfg.keys));
    const uint64_t t0 = now_ns();
    Status s = l.prefill(ctx.cfg.keys);
    if (!s.ok()) return s.with_context(l.name + ", prefill");
    l.run.prefill_seconds = double(now_ns() - t0) / 1e9;
  }
  const int repeats = std::max(1, ctx.cfg.repeats);
  for (const CellSpec& spec : ctx.cells) {
    const bool last_cell = &spec == &ctx.cells.back();
    if (last_cell) {
      for (Lane& l : lanes) {
        if (l.before_last) PM_TRY(l.before_last());
      }
    }
    std::vector<std::vector<CellResult>> reps(lanes.size());
    for (int r = 0; r < repeats; r++) {
      for (size_t k = 0; k < lanes.size(); k++) {
        const size_t i = (k + size_t(r)) % lanes.size();
        Lane& l = lanes[i];
        ctx.progress.step(cell_name(l.name, spec) +
                          (repeats > 1 ? fmt::format(" ({}/{})", r + 1, repeats) : ""));
        Result<CellResult> c = l.run_cell(spec, ctx);
        if (!c.ok()) return c.status().with_context(cell_name(l.name, spec));
        if (!(last_cell && r == repeats - 1)) {
          const uint64_t t1 = now_ns();
          PM_TRY(l.settle());
          c->settle_seconds = double(now_ns() - t1) / 1e9;
        }
        reps[i].push_back(std::move(*c));
      }
    }
    for (size_t i = 0; i < lanes.size(); i++) lanes[i].run.cells.push_back(median(std::move(reps[i])));
  }
  return Status();
}

// Reads keys back after the reopen: each must hold its own value.
Result<uint64_t> verify_keys(KvEngine& e, uint64_t keys) {
  const uint64_t n = std::min(keys, kVerifyKeys);
  unsigned char key[kKeyBytes];
  std::string got;
  for (uint64_t j = 0; j < n; j++) {
    const uint64_t i = j * keys / n;
    make_key(i, key);
    Status s = e.get(bytes_view(key, kKeyBytes), &got);
    if (!s.ok() || got.size() != kValueBytes ||
        value_id(reinterpret_cast<const unsigned char*>(got.data())) != i) {
      return Status::corruption(fmt::format("kvstore after reopen: key #{}: {}", i,
                                            s.ok() ? "a wrong value" : s.to_string()));
    }
  }
  return n;
}

// Memory and counters come from a snapshot before the last cell: stats()
// scans every key, and taken after the last cell it would give the
// gleaners time to empty the logs that the reopen is meant to replay.
void take_snapshot(StoreEngine& e, StoreFindings* f) {
  f->measured = true;
  f->snapshot = e.stats();
  f->frontend_bucket_bytes = f->snapshot.frontend_buckets * sizeof(kv::Frontend::Bucket);
}

// Right after the last cell: close (no checkpoint), reopen, read back.
Status recover(StoreEngine& e, const Context& ctx, StoreFindings* f) {
  ctx.progress.step("kvstore: close and reopen");
  f->closed_after = ctx.cells.back();
  Result<Recovery> r = e.reopen();
  if (!r.ok()) return r.status();
  f->recovery = *r;
  Result<uint64_t> v = verify_keys(e, ctx.cfg.keys);
  if (!v.ok()) return v.status();
  f->verified_after_reopen = *v;
  return Status();
}

// Empty when rocksdb runs here, else why not.
std::string rocksdb_skip_reason(const DirInfo& d) {
  if (!rocksdb_built()) {
    return "rocksdb: not built (librocksdb-dev was not found when CMake ran; "
           "tools/install-deps.sh installs it)";
  }
  if (d.fs_type == "tmpfs" || d.dir.rfind("/dev/shm", 0) == 0) {
    return fmt::format(
        "rocksdb: skipped: {} is on tmpfs, where a synced write costs nothing; "
        "give --dir on an ordinary disk to include it",
        d.dir);
  }
  return "";
}

// Starts an engine in a process of its own (kv_engine_process.h). An
// engine that cannot start is an error, or, when `optional`, a note.
Status spawn_lane(std::vector<Lane>* lanes, const std::string& name, const EngineProcess::Make& make,
                  const Context& ctx, bool optional, KvRun* run) {
  Result<std::unique_ptr<EngineProcess>> p = EngineProcess::start(make, ctx.streams);
  if (!p.ok() && optional) {
    run->skipped.push_back(p.status().message());
    return Status();
  }
  if (!p.ok()) return p.status().with_context(name);
  lanes->emplace_back();
  lanes->back().name = name;
  lanes->back().proc = std::move(*p);
  return Status();
}

Status run_all(const Context& ctx, KvRun* run) {
  const KvConfig& cfg = ctx.cfg;
  const std::string& dir = ctx.dir.dir;
  std::vector<Lane> lanes;
  // Every engine but the kvstore runs in a process of its own, started
  // before the kvstore (whose threads must not exist at a fork); the
  // kvstore's lane keeps its place in the report's order.
  auto spawn = [&](const std::string& name, const EngineProcess::Make& make, bool optional) {
    return cfg.wants(name) ? spawn_lane(&lanes, name, make, ctx, optional, run) : Status();
  };
  PM_TRY(spawn("volatile", [] { return Result<std::unique_ptr<KvEngine>>(make_volatile_engine()); },
               false));
  PM_TRY(spawn("cuckoo", make_cuckoo_engine, true));
  PM_TRY(spawn("tbb", make_tbb_engine, true));
  PM_TRY(spawn("phash", [&] {
    return make_phash_engine(dir + "/kv-phash.pm", cfg.keys, {cfg.emulate_read_ns});
  }, false));
  const size_t kvstore_at = lanes.size();
  // The store without its ordered index (StoreOptions::ordered = false):
  // what the index costs, side by side.
  PM_TRY(spawn("kvstore_hash", [&]() -> Result<std::unique_ptr<KvEngine>> {
    kv::StoreOptions o = kvstore_options({cfg.emulate_read_ns}, cfg.dram_budget_bytes);
    o.ordered = false;
    Result<std::unique_ptr<StoreEngine>> s = StoreEngine::create(dir + "/kv-store-hash.pm", cfg.keys, o);
    if (!s.ok()) return s.status();
    return std::unique_ptr<KvEngine>(std::move(*s));
  }, false));
  PM_TRY(spawn("pmemobj", [&] { return make_pmemobj_engine(dir + "/kv-pmemobj.pool", cfg.keys); },
               false));
  if (cfg.wants("rocksdb")) {
    const std::string skip = rocksdb_skip_reason(ctx.dir);
    if (skip.empty()) {
      PM_TRY(spawn("rocksdb", [&] { return make_rocksdb_engine(dir + "/kv-rocksdb"); }, false));
    } else {
      run->skipped.push_back(skip);
    }
  }
  StoreEngine* kvstore = nullptr;
  if (cfg.wants("kvstore")) {
    Result<std::unique_ptr<StoreEngine>> store = StoreEngine::create(
        dir + "/kv-store.pm", cfg.keys,
        kvstore_options({cfg.emulate_read_ns}, cfg.dram_budget_bytes));
    if (!store.ok()) return store.status();
    kvstore = store->get();
    Lane l;
    l.name = "kvstore";
    l.engine = std::move(*store);
    l.before_last = [&] {
      ctx.progress.step("kvstore: stats (scans every key)");
      take_snapshot(*kvstore, &run->store);
      return Status();
    };
    lanes.insert(lanes.begin() + static_cast<ptrdiff_t>(kvstore_at), std::move(l));
  }
  PM_TRY(run_interleaved(lanes, ctx));
  for (Lane& l : lanes) run->engines.push_back(std::move(l.run));
  return kvstore == nullptr ? Status() : recover(*kvstore, ctx, &run->store);
}

void print_config(const KvConfig& cfg, size_t ncells) {
  auto row = [](const char* k, const std::string& v) { fmt::print("{:<20}{}\n", k, v); };
  auto joined = [](const std::vector<int>& v) {
    std::string s;
    for (int x : v) {
      if (!s.empty()) s += '/';
      s += std::to_string(x);
    }
    return s;
  };
  const std::string puts = joined(cfg.put_percents), threads = joined(cfg.thread_counts);
  row("keys",
      fmt::format("{}{} prefilled, 16-byte keys, 100-byte values (--keys N; Bullet used "
                  "50 M)",
                  cfg.smoke ? "SMOKE (tiny sizes, numbers not meaningful): " : "", cfg.keys));
  row("cells", fmt::format("{} per engine, {:g} s each (--seconds): zipfian (theta {:g}) and "
                           "uniform keys x {} % puts x {} threads",
                           ncells, cfg.seconds, cfg.zipf_theta, puts, threads));
  row("", fmt::format("every engine loaded first, then each cell run on every engine in turn, "
                      "{} time(s) (--repeats), order rotating; the median is reported",
                      cfg.repeats));
  row("processes", "each engine in a process of its own (the kvstore in this one): engines "
                   "sharing a process change each other's speed through memory placement");
  row("kvstore",
      "kv::Store defaults: background gleaners, Durability::kSync, 8 logs of 8 MiB" +
          (cfg.dram_budget_bytes ? fmt::format(", DRAM budget {} MiB", cfg.dram_budget_bytes >> 20)
                                 : std::string()));
  row("", "heap created at its expected size (256 B per key + 64 MiB): no growth during the cells");
  std::ifstream loadavg("/proc/loadavg");
  std::string load1, load5;
  if (loadavg >> load1 >> load5) {
    row("load average", fmt::format("{} (1 min), {} (5 min) before the run", load1, load5));
  }
  if (cfg.emulated()) {
    row("emulation", fmt::format("ON: +{} ns per persist barrier (every engine: libpmem's "
                                 "pmem_drain is interposed), +{} ns per PM read (phash and "
                                 "kvstore only: pmemobj's reads cannot be slowed)",
                                 cfg.emulate_persist_ns, cfg.emulate_read_ns));
    fmt::print(
        "\n!!! EMULATED slower PM: every barrier waits; only phash and kvstore wait per "
        "read !!!\n");
  } else {
    row("emulation", "off (--emulate-persist-ns, --emulate-read-ns)");
  }
}

Status plot(const KvRun& run, const KvConfig& cfg, bool json) {
  if (cfg.plot_path.empty()) return Status();
  if (!have_gnuplot()) {
    fmt::print(stderr,
               "pm bench kv: --plot: gnuplot is not on PATH, so no plot was written to {} "
               "(install gnuplot-nox, e.g. with tools/install-deps.sh)\n",
               cfg.plot_path);
    return Status();
  }
  PM_TRY(write_plot(run, cfg, cfg.plot_path));
  fmt::print(json ? stderr : stdout, "\nplot: wrote {}\n", cfg.plot_path);
  return Status();
}

void print_json(const KvRun& run, const KvConfig& cfg, const Environment& env, const DirInfo& dir,
                const std::vector<Table>& tables, const std::vector<Target>& targets) {
  nlohmann::json jt = nlohmann::json::array(), jg = nlohmann::json::array();
  for (const Table& t : tables) jt.push_back(table_json(t));
  for (const Target& t : targets) jg.push_back(target_json(t));
  nlohmann::json doc = {{"suite", "kv"},
                        {"environment", environment_json(env)},
                        {"directory", dir_json(dir)},
                        {"config", kv_config_json(cfg)},
                        {"engines", kv_engines_json(run)},
                        {"skipped", run.skipped},
                        {"kvstore", kv_store_json(run.store)},
                        {"tables", jt},
                        {"targets", jg}};
  fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

Status run_kv_bench(const KvConfig& cfg, bool json) {
  if (cfg.keys < 2 || cfg.keys > UINT32_MAX) {
    return Status::invalid_argument("--keys must be 2..4294967295");
  }
  // Every engine's barriers wait alike (libpmemobj's too): bench/barrier_delay.h.
  PM_TRY(set_barrier_delay_ns(cfg.emulate_persist_ns));
  struct DelayOff {
    ~DelayOff() { (void)set_barrier_delay_ns(0); }
  } delay_off;
  const Environment env = collect_environment();
  const Progress progress;
  const std::vector<CellSpec> cells = cell_matrix(cfg.put_percents, cfg.thread_counts);
  if (!json) {
    print_environment("kv", env);
    print_config(cfg, cells.size());
  }
  Result<DirInfo> info = probe_dir(cfg.dir);
  if (!info.ok()) return info.status();
  DirCleanup cleanup(*info);
  if (!json) print_dir(*info, env);

  progress.step(fmt::format("key streams ({} keys, zipfian setup)", cfg.keys));
  const int max_threads = *std::max_element(cfg.thread_counts.begin(), cfg.thread_counts.end());
  const KeyStreams streams(cfg.keys, cfg.zipf_theta, cfg.stream_length, max_threads);
  KvRun run;
  run.cores = env.cores;
  PM_TRY(run_all({cfg, *info, streams, cells, progress}, &run));

  std::vector<Table> tables = kv_tables(run, cfg);
  // The cells' tables go out before the recovery sweep, which takes minutes
  // on a file system: a reader sees results as soon as they exist.
  if (!json) {
    for (const Table& t : tables) print_table(t);
  }
  // Recovery against data and log size: 100k and 1M keys, 8 and 64 MiB of
  // logs (smoke: 2000 keys, 1 MiB).
  const std::vector<uint64_t> sweep_keys =
      cfg.smoke ? std::vector<uint64_t>{2000} : std::vector<uint64_t>{100000, 1000000};
  const std::vector<uint64_t> sweep_logs =
      cfg.smoke ? std::vector<uint64_t>{1ull << 20} : std::vector<uint64_t>{8ull << 20, 64ull << 20};
  Result<std::vector<RecoveryPoint>> sweep =
      recovery_sweep(info->dir, sweep_keys, sweep_logs, progress);
  if (!sweep.ok()) return sweep.status();
  tables.push_back(recovery_table(*sweep));
  const std::vector<Target> targets = kv_targets(run, cfg);
  if (json) {
    print_json(run, cfg, env, *info, tables, targets);
  } else {
    print_table(tables.back());  // the recovery sweep's
    print_table(targets_table(targets));
  }
  return plot(run, cfg, json);
}

}  // namespace pm::bench
