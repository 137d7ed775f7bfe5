#include "bench/alloc/alloc_bench.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/alloc/alloc_throughput.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/alloc/fragmentation.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"

namespace pm::bench {

namespace {

nlohmann::json config_json(const AllocConfig& c) {
  return {{"dir", c.dir},
          {"smoke", c.smoke},
          {"seed", c.seed},
          {"live_bytes", c.live_bytes},
          {"churn_factor", c.churn_factor},
          {"threads", c.threads},
          {"rounds", c.rounds},
          {"window", c.window},
          {"repetitions", c.repetitions},
          {"commit_every", c.commit_every}};
}

void print_sizes(const AllocConfig& c) {
  fmt::print("{:<20}{}{} MiB live, {:g}x replaced; {} free+alloc pairs per thread\n", "size",
             c.smoke ? "SMOKE (tiny sizes, numbers not meaningful): " : "", c.live_bytes >> 20,
             c.churn_factor, c.rounds);
}

}  // namespace

Status run_alloc_bench(const AllocConfig& cfg, bool json) {
  const Environment env = collect_environment();
  const Progress progress;
  if (!json) {
    print_environment("alloc", env);
    print_sizes(cfg);
  }
  Result<DirInfo> dir = probe_dir(cfg.dir);
  if (!dir.ok()) return dir.status();
  DirCleanup cleanup(*dir);
  if (!json) print_dir(*dir, env);
  std::vector<Table> tables;
  std::vector<Target> targets;
  for (auto suite : {run_fragmentation, run_alloc_throughput}) {
    Result<SuiteResult> r = suite(*dir, cfg, progress);
    if (!r.ok()) return r.status().with_context(cfg.dir);
    for (const Table& t : r->tables) {
      if (!json) print_table(t);
      tables.push_back(t);
    }
    targets.insert(targets.end(), r->targets.begin(), r->targets.end());
  }
  if (!json) {
    print_table(targets_table(targets));
    return Status();
  }
  nlohmann::json doc = {{"suite", "alloc"},
                        {"environment", environment_json(env)},
                        {"config", config_json(cfg)},
                        {"directory", dir_json(*dir)},
                        {"tables", nlohmann::json::array()},
                        {"targets", nlohmann::json::array()}};
  for (const Table& t : tables) doc["tables"].push_back(table_json(t));
  for (const Target& t : targets) doc["targets"].push_back(target_json(t));
  fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  return Status();
}

}  // namespace pm::bench
