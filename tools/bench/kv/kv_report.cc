#include "bench/kv/kv_report.h"

#include <fmt/format.h>

#include "bench/kv/kv_stats_rows.h"

namespace pm::bench {

namespace {

constexpr double kMiB = 1 << 20;

const EngineRun* find_engine(const KvRun& run, const std::string& name) {
  for (const EngineRun& e : run.engines) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<Cell> cell_prefix(const CellSpec& s) {
  return {key_choice_name(s.choice), int64_t{s.put_percent}, int64_t{s.threads}};
}

std::vector<Column> cell_columns() {
  return {{"keys", "key_choice"},
          {"put %", "put_percent", Format::kCount},
          {"threads", "threads", Format::kCount}};
}

std::string cell_text(const CellSpec& s) {
  return fmt::format("{}, {}% puts, {} thread{}", key_choice_name(s.choice), s.put_percent,
                     s.threads, s.threads == 1 ? "" : "s");
}

Cell micros(const LatencyHistogram& h, double p) {
  if (h.count() == 0) return std::monostate{};
  return double(h.percentile(p)) / 1e3;
}

// One figure per engine and cell, each beside its ratio to volatile's.
Table versus_volatile_table(const KvRun& run, std::string title, const std::string& key,
                            Format format, double (*figure)(const CellResult&)) {
  Table t;
  t.title = std::move(title);
  t.columns = cell_columns();
  const EngineRun* base = find_engine(run, "volatile");
  for (const EngineRun& e : run.engines) {
    t.columns.push_back({e.name, e.name + "_" + key, format});
    if (base != nullptr && &e != base) {
      t.columns.push_back({"vs volatile", e.name + "_" + key + "_vs_volatile", Format::kRatio});
    }
  }
  const size_t ncells = run.engines.empty() ? 0 : run.engines.front().cells.size();
  for (size_t i = 0; i < ncells; i++) {
    std::vector<Cell> row = cell_prefix(run.engines.front().cells[i].spec);
    for (const EngineRun& e : run.engines) {
      row.emplace_back(figure(e.cells[i]));
      if (base != nullptr && &e != base) {
        row.push_back(ratio(figure(e.cells[i]), figure(base->cells[i])));
      }
    }
    t.add_row(std::move(row));
  }
  return t;
}

Table throughput_table(const KvRun& run, const KvConfig& cfg) {
  Table t = versus_volatile_table(
      run,
      fmt::format("throughput (operations/s, all threads) and ratio to volatile{}",
                  emulation_label(cfg)),
      "ops_per_s", Format::kRate, [](const CellResult& c) { return c.ops_per_s(); });
  t.notes.push_back(fmt::format(
      "each cell runs {:g} s after a prefill of {} keys; every operation picks a prefilled key, "
      "so puts overwrite and gets always hit (and are checked)",
      cfg.seconds, cfg.keys));
  return t;
}

// CPU time per operation: the figure that does not depend on how many cores
// the machine has (background threads included).
Table cpu_table(const KvRun& run, const KvConfig& cfg) {
  Table t = versus_volatile_table(
      run,
      fmt::format("CPU time per operation, microseconds (whole process: workers and background "
                  "threads; getrusage) and ratio to volatile{}",
                  emulation_label(cfg)),
      "cpu_us_per_op", Format::kMicros, [](const CellResult& c) { return c.cpu_us_per_op(); });
  t.notes.push_back("a ratio above 1 costs more CPU per operation than volatile (lower is better)");
  return t;
}

Table latency_table(const KvRun& run, const KvConfig& cfg) {
  Table t;
  t.title = fmt::format("latency per operation type, microseconds{}", emulation_label(cfg));
  t.columns = cell_columns();
  t.columns.insert(t.columns.end(), {{"engine", "engine"},
                                     {"get p50", "get_p50_us", Format::kMicros},
                                     {"get p99", "get_p99_us", Format::kMicros},
                                     {"get p99.9", "get_p999_us", Format::kMicros},
                                     {"put p50", "put_p50_us", Format::kMicros},
                                     {"put p99", "put_p99_us", Format::kMicros},
                                     {"put p99.9", "put_p999_us", Format::kMicros}});
  const size_t ncells = run.engines.empty() ? 0 : run.engines.front().cells.size();
  for (size_t i = 0; i < ncells; i++) {
    for (const EngineRun& e : run.engines) {
      const CellResult& c = e.cells[i];
      std::vector<Cell> row = cell_prefix(c.spec);
      row.insert(row.end(),
                 {e.name, micros(c.get_ns, 50), micros(c.get_ns, 99), micros(c.get_ns, 99.9),
                  micros(c.put_ns, 50), micros(c.put_ns, 99), micros(c.put_ns, 99.9)});
      t.add_row(std::move(row));
    }
  }
  t.notes.push_back(
      "log-linear histogram (32 buckets per power of two: within 3.2%); a latency runs from the "
      "end of the thread's previous operation to the end of this one, so it includes choosing "
      "the key (a few ns)");
  return t;
}

// Mean latency of pmemobj over that of kvstore: > 1 means kvstore is faster.
Cell speedup(const LatencyHistogram& kvstore, const LatencyHistogram& pmemobj) {
  if (kvstore.count() == 0 || pmemobj.count() == 0) return std::monostate{};
  return ratio(pmemobj.mean(), kvstore.mean());
}

Table versus_pmemobj_table(const EngineRun& kvs, const EngineRun& pmo, const KvConfig& cfg) {
  Table t;
  t.title = fmt::format("kvstore / pmemobj{}", emulation_label(cfg));
  t.columns = cell_columns();
  t.columns.insert(t.columns.end(), {{"kvstore ops/s", "kvstore_ops_per_s", Format::kRate},
                                     {"pmemobj ops/s", "pmemobj_ops_per_s", Format::kRate},
                                     {"ops/s ratio", "ops_ratio", Format::kRatio},
                                     {"puts ratio", "put_ratio", Format::kRatio},
                                     {"gets ratio", "get_ratio", Format::kRatio},
                                     {"backlog ms", "kvstore_settle_ms", Format::kMillis}});
  for (size_t i = 0; i < kvs.cells.size(); i++) {
    const CellResult& k = kvs.cells[i];
    const CellResult& p = pmo.cells[i];
    std::vector<Cell> row = cell_prefix(k.spec);
    row.insert(row.end(),
               {k.ops_per_s(), p.ops_per_s(), ratio(k.ops_per_s(), p.ops_per_s()),
                speedup(k.put_ns, p.put_ns), speedup(k.get_ns, p.get_ns), k.settle_seconds * 1e3});
    t.add_row(std::move(row));
  }
  t.notes.push_back(
      "puts/gets ratio = pmemobj mean latency / kvstore mean latency of that operation type "
      "(> 1: kvstore faster)");
  t.notes.push_back(
      "backlog ms = the kvstore's checkpoint() after the cell (untimed): gleaning and committing "
      "what the cell's puts left in the logs, so that the next cell starts from empty logs");
  if (cfg.emulate_read_ns != 0) {
    t.notes.push_back(
        "the read emulation slows phash and kvstore only: pmemobj's reads of its pool are "
        "not slowed (its barriers are)");
  }
  return t;
}

Table prefill_table(const KvRun& run, const KvConfig& cfg) {
  Table t;
  t.title = fmt::format("prefill of {} keys (untimed for the cells)", cfg.keys);
  t.columns = {{"engine", "engine"},
               {"how", "method"},
               {"seconds", "seconds", Format::kMillis},
               {"keys/s", "keys_per_s", Format::kRate}};
  for (const EngineRun& e : run.engines) {
    t.add_row({e.name, e.prefill_method, e.prefill_seconds,
               e.prefill_seconds > 0 ? Cell(double(cfg.keys) / e.prefill_seconds) : Cell()});
  }
  return t;
}

Table recovery_table(const StoreFindings& s, const KvConfig& cfg) {
  const Recovery& r = s.recovery;
  Table t;
  t.title = fmt::format(
      "kvstore reopen right after the last cell ({}): a clean close, whose gleaners apply "
      "what the logs hold first, then open{}",
      cell_text(s.closed_after), emulation_label(cfg));
  t.columns = {{"log MiB replayed", "log_replayed_mib", Format::kMiB},
               {"records replayed", "recovered_records", Format::kCount},
               {"open() ms", "open_ms", Format::kMillis},
               {"replay ms (store)", "recovery_ms", Format::kMillis},
               {"frontend items", "frontend_items_after", Format::kCount},
               {"keys", "keys_after", Format::kCount},
               {"keys verified", "keys_verified", Format::kCount}};
  t.add_row({double(r.after.log_used_bytes) / kMiB, int64_t(r.after.recovered_records), r.open_ms,
             double(r.after.recovery_us) / 1e3, int64_t(r.after.frontend_items),
             int64_t(r.after.keys), int64_t(s.verified_after_reopen)});
  t.notes.push_back(
      "open() ms is timed around kv::Store::open; replay ms is the store's own recovery_us; the "
      "frontend holds only the replayed keys afterwards (the rest are read from the backend on a "
      "miss); reopened with background threads off so that these numbers show the state as "
      "found. What replaying full logs costs is the table of recovery against data and log "
      "size");
  if (r.after.keys != cfg.keys) {
    t.notes.push_back(fmt::format("SUSPICIOUS: {} keys after the reopen, {} were loaded",
                                  r.after.keys, cfg.keys));
  }
  return t;
}

Table memory_table(const StoreFindings& s) {
  const kv::StoreStats& st = s.snapshot;
  const double keys = double(std::max<uint64_t>(st.keys, 1));
  const double target = memory_target_bytes_per_key();
  Table t;
  t.title = fmt::format(
      "kvstore memory before the last cell ({} keys; target {:.1f} bytes per "
      "key = 1.4 x (16 + 100) + 32)",
      st.keys, target);
  t.columns = {{"what", "what"},
               {"MiB", "mib", Format::kMiB},
               {"bytes/key", "bytes_per_key", Format::kMicros},
               {"vs target", "vs_target", Format::kRatio}};
  auto row = [&](const char* what, uint64_t bytes, bool judged) {
    const double per_key = double(bytes) / keys;
    t.add_row({what, double(bytes) / kMiB, per_key, judged ? ratio(per_key, target) : Cell()});
  };
  row("DRAM: frontend items (frontend_bytes)", st.frontend_bytes, true);
  row("DRAM: + frontend bucket array", st.frontend_bytes + s.frontend_bucket_bytes, false);
  row("container: used heap (container_used_bytes)", st.container_used_bytes, true);
  row("container: file (heap + logs + metadata)", st.container_file_bytes, false);
  t.notes.push_back(
      "frontend_bytes counts item headers, keys and values only: not the bucket array (second "
      "row) nor malloc's own headers and rounding");
  return t;
}

Table store_counters_table(const kv::StoreStats& st) {
  Table t;
  t.title = "kvstore counters before the last cell (prefill included)";
  t.columns = {{"puts", "puts", Format::kCount},
               {"records applied", "records_applied", Format::kCount},
               {"collapsed", "records_collapsed", Format::kCount},
               {"epochs", "epochs", Format::kCount},
               {"writer waits", "writer_waits", Format::kCount},
               {"wakes", "background_wakes", Format::kCount},
               {"gleaners active", "gleaners_active", Format::kCount},
               {"backend keys", "backend_keys", Format::kCount},
               {"frontend items", "frontend_items", Format::kCount}};
  t.add_row({int64_t(st.puts), int64_t(st.records_applied), int64_t(st.records_collapsed),
             int64_t(st.epochs), int64_t(st.writer_waits), int64_t(st.background_wakes),
             int64_t{st.gleaners_active},
             int64_t(st.backend_keys), int64_t(st.frontend_items)});
  t.notes.push_back(
      "collapsed = log records skipped by a gleaner because a newer update of the key had "
      "replaced them (write collapsing); writer waits = puts that found every log full; wakes = "
      "puts that woke a sleeping gleaner (an eighth of a log to apply) or the maintenance thread "
      "(the frontend to grow)");
  return t;
}

nlohmann::json histogram_json(const LatencyHistogram& h) {
  return {
      {"count", h.count()},         {"mean_ns", h.mean()},           {"p50_ns", h.percentile(50)},
      {"p99_ns", h.percentile(99)}, {"p999_ns", h.percentile(99.9)}, {"max_ns", h.max()}};
}

nlohmann::json stats_json(const kv::StoreStats& s) {
  nlohmann::json obj = nlohmann::json::object();
  for (auto& [name, v] : kv_stat_rows(s)) obj[name] = std::move(v);
  return obj;
}

}  // namespace

double memory_target_bytes_per_key() { return 1.4 * (16 + 100) + 32; }

std::string emulation_label(const KvConfig& cfg) {
  if (!cfg.emulated()) return "";
  return fmt::format(
      " [EMULATED slower PM: +{} ns per persist barrier (all engines), +{} ns per PM read "
      "(phash and kvstore only)]",
      cfg.emulate_persist_ns, cfg.emulate_read_ns);
}

std::vector<Table> kv_tables(const KvRun& run, const KvConfig& cfg) {
  std::vector<Table> out = {prefill_table(run, cfg), throughput_table(run, cfg),
                            cpu_table(run, cfg), latency_table(run, cfg)};
  std::vector<std::string>& notes = out[1].notes;
  for (const std::string& s : run.skipped) notes.push_back(s);
  if (!cfg.emulated()) {
    notes.push_back(
        "not emulated: the 'PM' of phash, kvstore and pmemobj is a file in the page cache, so "
        "their reads cost what volatile's do; Bullet's setting is --emulate-read-ns 300 "
        "--emulate-persist-ns 100");
  }
  notes.push_back(fmt::format(
      "kvstore runs 2-3 background threads (gleaners, maintenance) on the same {} hardware "
      "threads as the workers",
      run.cores));
  const EngineRun* kvs = find_engine(run, "kvstore");
  const EngineRun* pmo = find_engine(run, "pmemobj");
  if (kvs != nullptr && pmo != nullptr) out.push_back(versus_pmemobj_table(*kvs, *pmo, cfg));
  if (run.store.measured) {
    out.push_back(recovery_table(run.store, cfg));
    out.push_back(memory_table(run.store));
    out.push_back(store_counters_table(run.store.snapshot));
  }
  return out;
}

// The cell of an engine (zipfian keys), or null.
const CellResult* zipf_cell(const KvRun& run, const std::string& engine, int put_percent,
                            int threads) {
  const EngineRun* e = find_engine(run, engine);
  if (e == nullptr) return nullptr;
  for (const CellResult& c : e->cells) {
    if (c.spec.choice == KeyChoice::kZipfian && c.spec.put_percent == put_percent &&
        c.spec.threads == threads) {
      return &c;
    }
  }
  return nullptr;
}

// Issue 14's performance targets, from the zipfian cells.
std::vector<Target> speed_targets(const KvRun& run, const KvConfig& cfg) {
  std::vector<Target> out;
  // a/b of some per-cell figure of two engines; unavailable when a cell is missing.
  auto versus = [&](Target t, const std::string& a, const std::string& b, int puts, int threads,
                    double (*figure)(const CellResult&)) {
    const CellResult* x = zipf_cell(run, a, puts, threads);
    const CellResult* y = zipf_cell(run, b, puts, threads);
    t.available = x != nullptr && y != nullptr && figure(*y) > 0;
    if (t.available) t.measured = figure(*x) / figure(*y);
    return t;
  };
  auto ops = [](const CellResult& c) { return c.ops_per_s(); };
  auto cpu = [](const CellResult& c) { return c.cpu_us_per_op(); };
  auto put_p50 = [](const CellResult& c) { return double(c.put_ns.percentile(50)); };
  // The frontend against the better of the DRAM anchors, at 1 and 2 threads.
  for (auto [what, puts] : {std::pair{"gets", 0}, {"puts", 100}}) {
    Target t = Target::at_least_of(
        fmt::format("frontend {} vs best of cuckoo and tbb, zipfian, 1 and 2 threads (worst)",
                    what),
        1.0,
        "x");
    t.available = false;
    t.measured = 1e9;
    for (int threads : {1, 2}) {
      for (const char* anchor : {"cuckoo", "tbb"}) {
        Target one = versus(t, "volatile", anchor, puts, threads, ops);
        if (!one.available) continue;
        t.available = true;
        t.measured = std::min(t.measured, one.measured);
      }
    }
    out.push_back(t);
  }
  const bool emulated = cfg.emulated();
  Target gets = versus(Target::at_least_of("kvstore gets vs pmemobj, 1 thread, no emulation",
                                           1.5, "x"),
                       "kvstore", "pmemobj", 0, 1, ops);
  if (emulated) gets.not_applicable = "goal is without emulation";
  out.push_back(gets);
  out.push_back(versus(Target::at_least_of("kvstore vs frontend, 1 worker, 2% puts", 0.95, "x"),
                       "kvstore", "volatile", 2, 1, ops));
  out.push_back(versus(Target::at_least_of("kvstore vs frontend, 1 worker, 15% puts", 0.85, "x"),
                       "kvstore", "volatile", 15, 1, ops));
  out.push_back(versus(Target::at_least_of("kvstore vs frontend, 2 workers, 2% puts", 0.9, "x"),
                       "kvstore", "volatile", 2, 2, ops));
  out.push_back(versus(Target::at_most_of("kvstore put p50 vs frontend's, 100% puts, 1 thread",
                                          1.5, "x"),
                       "kvstore", "volatile", 100, 1, put_p50));
  out.push_back(versus(Target::at_most_of("kvstore CPU per put vs frontend's, 100% puts, 1 thread",
                                          2.5, "x"),
                       "kvstore", "volatile", 100, 1, cpu));
  out.push_back(versus(Target::at_most_of("kvstore CPU per get vs frontend's, 0% puts, 1 thread",
                                          1.05, "x"),
                       "kvstore", "volatile", 0, 1, cpu));
  // Bullet's setting: 100 ns per barrier (every engine), 300 ns per read (ours).
  const bool bullet = cfg.emulate_persist_ns == 100 && cfg.emulate_read_ns == 300;
  Target eputs = versus(Target::at_least_of("kvstore puts vs pmemobj, 100% puts, 1 thread, "
                                            "emulated 100 ns barrier / 300 ns read",
                                            2.0, "x"),
                        "kvstore", "pmemobj", 100, 1, ops);
  Target egets = versus(Target::at_least_of("kvstore gets vs pmemobj, 0% puts, 1 thread, "
                                            "emulated 100 ns barrier / 300 ns read",
                                            1.5, "x"),
                        "kvstore", "pmemobj", 0, 1, ops);
  if (!bullet) {
    eputs.not_applicable = egets.not_applicable =
        "run with --emulate-persist-ns 100 --emulate-read-ns 300";
  }
  out.push_back(eputs);
  out.push_back(egets);
  return out;
}

std::vector<Target> kv_targets(const KvRun& run, const KvConfig& cfg) {
  const double target = memory_target_bytes_per_key();
  const kv::StoreStats& st = run.store.snapshot;
  const double keys = double(std::max<uint64_t>(st.keys, 1));
  Target dram =
      Target::at_most_of("kvstore DRAM bytes per key (frontend_bytes / keys)", target, "B");
  Target pm = Target::at_most_of("kvstore container bytes per key (used / keys)", target, "B");
  dram.available = pm.available = run.store.measured;
  dram.measured = double(st.frontend_bytes) / keys;
  pm.measured = double(st.container_used_bytes) / keys;
  std::vector<Target> out = {dram, pm};
  for (Target& t : speed_targets(run, cfg)) out.push_back(std::move(t));
  return out;
}

nlohmann::json kv_config_json(const KvConfig& c) {
  return {{"dir", c.dir},
          {"smoke", c.smoke},
          {"keys", c.keys},
          {"seconds_per_cell", c.seconds},
          {"repeats", c.repeats},
          {"put_percents", c.put_percents},
          {"thread_counts", c.thread_counts},
          {"zipf_theta", c.zipf_theta},
          {"stream_length", c.stream_length},
          {"emulated", c.emulated()},
          {"emulate_persist_ns", c.emulate_persist_ns},
          {"emulate_read_ns", c.emulate_read_ns},
          {"dram_budget_bytes", c.dram_budget_bytes}};
}

nlohmann::json kv_engines_json(const KvRun& run) {
  nlohmann::json engines = nlohmann::json::array();
  for (const EngineRun& e : run.engines) {
    nlohmann::json cells = nlohmann::json::array();
    for (const CellResult& c : e.cells) {
      cells.push_back({{"key_choice", key_choice_name(c.spec.choice)},
                       {"put_percent", c.spec.put_percent},
                       {"threads", c.spec.threads},
                       {"seconds", c.seconds},
                       {"settle_seconds", c.settle_seconds},
                       {"ops", c.ops()},
                       {"ops_per_s", c.ops_per_s()},
                       {"cpu_seconds", c.cpu_seconds},
                       {"cpu_us_per_op", c.cpu_us_per_op()},
                       {"get", histogram_json(c.get_ns)},
                       {"put", histogram_json(c.put_ns)}});
    }
    engines.push_back({{"engine", e.name},
                       {"prefill_seconds", e.prefill_seconds},
                       {"prefill_method", e.prefill_method},
                       {"cells", cells}});
  }
  return engines;
}

nlohmann::json kv_store_json(const StoreFindings& s) {
  if (!s.measured) return nullptr;
  return {{"closed_after", cell_text(s.closed_after)},
          {"snapshot", stats_json(s.snapshot)},
          {"frontend_bucket_bytes", s.frontend_bucket_bytes},
          {"recovery",
           {{"open_ms", s.recovery.open_ms},
            {"after", stats_json(s.recovery.after)},
            {"keys_verified", s.verified_after_reopen}}},
          {"target_bytes_per_key", memory_target_bytes_per_key()}};
}

}  // namespace pm::bench
