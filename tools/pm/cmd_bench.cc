// pm bench container: the libpm benchmark suites (tools/bench/).
#include <cstdint>
#include <memory>
#include <string>

#include "bench/config.h"
#include "bench/container_bench.h"
#include "pm/command.h"

namespace pm::cli {

void add_bench_commands(CLI::App& root, const Globals& g, std::vector<Command>* out) {
  struct BenchArgs {
    std::string dir = "/dev/shm/pm-bench";
    std::string also_dir;
    uint64_t keys = 0;
    double budget = 0;
    bool smoke = false;
  };
  auto a = std::make_shared<BenchArgs>();
  CLI::App* bench = root.add_subcommand("bench", "run a benchmark suite");
  bench->require_subcommand(1);
  CLI::App* container = bench->add_subcommand(
      "container", "commit latency, hash map vs libpmemobj, open time, DRAM use");
  container->add_option("--dir", a->dir, "directory to run in (created and removed if missing)")
      ->capture_default_str();
  container->add_option("--also-dir", a->also_dir,
                        "run the same suite again in this directory (e.g. an ext4 one)");
  CLI::Option* keys = container->add_option("--keys", a->keys, "hash map keys (default 1000000)")
                          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  CLI::Option* budget =
      container
          ->add_option("--budget", a->budget,
                       "seconds a per-insert-commit run may take before it stops (default 10 on "
                       "pmem, 5 on msync)")
          ->check(CLI::PositiveNumber);
  container->add_flag("--smoke", a->smoke, "tiny sizes, for a quick check that it works");
  out->push_back({container, [a, keys, budget, &g]() -> Status {
                    bench::Config cfg = a->smoke ? bench::Config::smoke_sized() : bench::Config();
                    if (keys->count() > 0) cfg.keys = a->keys;
                    if (budget->count() > 0) {
                      cfg.insert_budget_pmem_s = a->budget;
                      cfg.insert_budget_msync_s = a->budget;
                    }
                    cfg.dirs.push_back(a->dir);
                    if (!a->also_dir.empty()) cfg.dirs.push_back(a->also_dir);
                    return bench::run_container_bench(cfg, g.json);
                  }});
}

}  // namespace pm::cli
