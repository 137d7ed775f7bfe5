#include "bench/container/container_bench.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/container/commit_latency.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/container/hashmap_suite.h"
#include "bench/container/open_time.h"
#include "bench/container/working_set.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"

namespace pm::bench {

namespace {

using Suite = std::function<Result<SuiteResult>(const DirInfo&, const Config&, const Progress&)>;

struct DirRun {
  DirInfo dir;
  std::vector<Table> tables;
  std::vector<Target> targets;
};

std::string measured_text(const Target& t) {
  if (!t.available) return "-";
  return t.unit == "x" ? fmt::format("{:.2f}x", t.measured)
                       : fmt::format("{:.2f} {}", t.measured, t.unit);
}

Table targets_table(const std::vector<DirRun>& runs) {
  Table t;
  t.title = "targets (from the project issue; verdicts computed from the numbers above)";
  t.columns = {{"target", "target"}, {"goal", "goal"}};
  for (const DirRun& r : runs) {
    t.columns.push_back({r.dir.parent, r.dir.parent, Format::kCount});
    t.columns.push_back({"verdict", "verdict", Format::kText});
  }
  for (size_t i = 0; i < runs.front().targets.size(); i++) {
    std::vector<Cell> row = {runs.front().targets[i].name, runs.front().targets[i].goal};
    for (const DirRun& r : runs) {
      row.push_back(measured_text(r.targets[i]));
      row.push_back(r.targets[i].verdict());
    }
    t.add_row(std::move(row));
  }
  return t;
}

nlohmann::json config_json(const Config& c) {
  return {{"dirs", c.dirs},
          {"smoke", c.smoke},
          {"keys", c.keys},
          {"insert_budget_pmem_s", c.insert_budget_pmem_s},
          {"insert_budget_msync_s", c.insert_budget_msync_s},
          {"scaling_heap_bytes", c.scaling_heap_bytes},
          {"scaling_iterations", c.scaling_iterations},
          {"fill_budget_pmem_s", c.fill_budget_pmem_s},
          {"fill_budget_msync_s", c.fill_budget_msync_s},
          {"small_iterations", c.small_iterations},
          {"large_iterations", c.large_iterations},
          {"warmup_iterations", c.warmup_iterations},
          {"case_budget_s", c.case_budget_s},
          {"big_bytes", c.big_bytes},
          {"open_repetitions", c.open_repetitions},
          {"working_set_pages", c.working_set_pages},
          {"working_set_batches", c.working_set_batches},
          {"working_set_cell_s", c.working_set_cell_s},
          {"working_set_repeats", c.working_set_repeats}};
}

// The suites' common layout (environment, suite, tables, targets), each
// table and target naming its directory (given as --dir), and the
// directories' details under "runs".
nlohmann::json runs_json(const std::vector<DirRun>& runs, nlohmann::json doc) {
  doc["tables"] = doc["targets"] = doc["runs"] = nlohmann::json::array();
  for (const DirRun& r : runs) {
    for (const Table& t : r.tables) {
      nlohmann::json j = table_json(t);
      j["directory"] = r.dir.parent;
      doc["tables"].push_back(std::move(j));
    }
    for (const Target& t : r.targets) {
      nlohmann::json j = target_json(t);
      j["directory"] = r.dir.parent;
      doc["targets"].push_back(std::move(j));
    }
    doc["runs"].push_back({{"directory", dir_json(r.dir)}});
  }
  return doc;
}

Result<DirRun> run_dir(const std::string& dir, const Config& cfg, const Environment& env, bool json,
                       const Progress& progress) {
  Result<DirInfo> info = probe_dir(dir);
  if (!info.ok()) return info.status();
  DirCleanup cleanup(*info);
  if (!json) print_dir(*info, env);
  DirRun run{*info, {}, {}};
  for (const Suite& suite : {Suite(run_commit_latency), Suite(run_hashmap), Suite(run_working_set),
                            Suite(run_open_time)}) {
    Result<SuiteResult> r = suite(*info, cfg, progress);
    if (!r.ok()) return r.status().with_context(dir);
    for (const Table& t : r->tables) {
      if (!json) print_table(t);
      run.tables.push_back(t);
    }
    run.targets.insert(run.targets.end(), r->targets.begin(), r->targets.end());
  }
  return run;
}

}  // namespace

Status run_container_bench(const Config& cfg, bool json) {
  const Environment env = collect_environment();
  const Progress progress;
  if (!json) {
    print_environment("container", env);
    fmt::print(
        "{:<20}{}{} keys, per-insert-commit budget {:g} s on pmem, {:g} s on msync, big "
        "container {} MiB\n",
        "size", cfg.smoke ? "SMOKE (tiny sizes, numbers not meaningful): " : "", cfg.keys,
        cfg.insert_budget_pmem_s, cfg.insert_budget_msync_s, cfg.big_bytes >> 20);
  }
  std::vector<DirRun> runs;
  for (const std::string& dir : cfg.dirs) {
    Result<DirRun> r = run_dir(dir, cfg, env, json, progress);
    if (!r.ok()) return r.status();
    runs.push_back(std::move(*r));
    if (!json) print_table(targets_table({runs.back()}));
  }
  if (json) {
    const nlohmann::json doc = runs_json(runs, {{"suite", "container"},
                                                {"environment", environment_json(env)},
                                                {"config", config_json(cfg)}});
    fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (runs.size() > 1) {
    fmt::print("\n==================== side by side ====================\n");
    print_table(targets_table(runs));
  }
  return Status();
}

}  // namespace pm::bench
