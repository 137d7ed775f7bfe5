// pm bench container, alloc, kv, fuse, memcached, sqlite, ordered: the benchmark suites (tools/bench/).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "bench/alloc/alloc_bench.h"
#include "bench/alloc/alloc_config.h"
#include "bench/container/config.h"
#include "bench/container/container_bench.h"
#include "bench/fuse/fuse_bench.h"
#include "bench/fuse/fuse_config.h"
#include "bench/kv/kv_bench.h"
#include "bench/kv/kv_config.h"
#include "bench/memcached/memcached_bench.h"
#include "bench/ordered/ordered_bench.h"
#include "bench/sqlite/sqlite_bench.h"
#include "bench/common/interrupt.h"
#include "pm/command.h"

namespace pm::cli {

namespace {

void add_alloc_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  struct AllocArgs {
    std::string dir = "/dev/shm/pm-bench";
    uint64_t live_mib = 0;
    uint64_t rounds = 0;
    bool smoke = false;
  };
  auto a = std::make_shared<AllocArgs>();
  CLI::App* alloc = bench->add_subcommand(
      "alloc", "allocator fragmentation (Nibble's patterns) and alloc/free throughput vs glibc");
  alloc
      ->add_option("--dir", a->dir,
                   "directory for the containers and files (created and removed if missing)")
      ->capture_default_str()
      ->check(kBenchDir);
  CLI::Option* live = alloc
                          ->add_option("--live-mib", a->live_mib,
                                       "live MiB of each fragmentation pattern (default 512)")
                          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  CLI::Option* rounds =
      alloc->add_option("--rounds", a->rounds, "free+alloc pairs per thread (default 2000000)")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  alloc->add_flag("--smoke", a->smoke, "tiny sizes, for a quick check that it works");
  out->push_back({alloc, [a, live, rounds, &g]() -> Status {
                    bench::AllocConfig cfg =
                        a->smoke ? bench::AllocConfig::smoke_sized() : bench::AllocConfig();
                    cfg.dir = a->dir;
                    if (live->count() > 0) cfg.live_bytes = a->live_mib << 20;
                    if (rounds->count() > 0) cfg.rounds = a->rounds;
                    return bench::run_alloc_bench(cfg, g.json);
                  }});
}

void add_kv_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  auto cfg = std::make_shared<bench::KvConfig>();
  auto smoke = std::make_shared<bool>(false);
  auto budget_mib = std::make_shared<uint64_t>(0);
  CLI::App* kv = bench->add_subcommand(
      "kv", "kvstore vs volatile, phash, pmemobj (and rocksdb on disk): Bullet's Figure 5");
  kv->add_option("--dir", cfg->dir,
                 "directory for the engines' files (created and removed if missing)")
      ->capture_default_str()
      ->check(kBenchDir);
  CLI::Option* keys =
      kv->add_option("--keys", cfg->keys, "keys loaded before the timed cells (default 1000000)")
          ->check(CLI::Range(uint64_t{2}, uint64_t{UINT32_MAX}));
  CLI::Option* seconds = kv->add_option("--seconds", cfg->seconds, "seconds per cell (default 2)")
                             ->check(kBenchSeconds);
  CLI::Option* repeats =
      kv->add_option("--repeats", cfg->repeats,
                     "runs of each cell per engine, interleaved; the median is reported (default 3)")
          ->check(CLI::Range(1, 99));
  kv->add_option("--emulate-persist-ns", cfg->emulate_persist_ns,
                 "slower-PM emulation: busy-wait per persist barrier (every engine)")
      ->check(CLI::Range(0, 1000000));
  kv->add_option("--emulate-read-ns", cfg->emulate_read_ns,
                 "slower-PM emulation: busy-wait per PM read (phash, kvstore)")
      ->check(CLI::Range(0, 1000000));
  kv->add_option("--dram-budget-mib", *budget_mib,
                 "kvstore DRAM budget for frontend items (0: none)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30));
  kv->add_option("--plot", cfg->plot_path,
                 "write throughput vs put ratio as a PNG (needs gnuplot)")
      ->check(CLI::Validator(
          [](std::string& v) {  // before the run, not after it
            const std::filesystem::path dir = std::filesystem::path(v).parent_path();
            std::error_code ec;
            return dir.empty() || std::filesystem::is_directory(dir, ec)
                       ? std::string()
                       : "no directory " + dir.string() + " for the plot";
          },
          "FILE"));
  CLI::Option* puts =
      kv->add_option("--puts", cfg->put_percents, "put percentages of the cells (default 0 2 15 50 100)")
          ->check(CLI::Range(0, 100));
  CLI::Option* threads =
      kv->add_option("--threads", cfg->thread_counts,
                     "worker counts of the cells (default 1, cores - 1 and cores)")
          ->check(CLI::Range(1, 1024));
  kv->add_option("--engines", cfg->engines,
                 "engines to run (default all): volatile cuckoo tbb phash kvstore kvstore_hash "
                 "pmemobj rocksdb")
      ->check(CLI::IsMember(
          {"volatile", "cuckoo", "tbb", "phash", "kvstore", "kvstore_hash", "pmemobj", "rocksdb"}));
  kv->add_flag("--smoke", *smoke, "tiny sizes, for a quick check that it works");
  out->push_back({kv, [cfg, smoke, budget_mib, keys, seconds, repeats, puts, threads, &g]() -> Status {
                    bench::KvConfig c = *smoke ? bench::KvConfig::smoke_sized() : bench::KvConfig();
                    c.dir = cfg->dir;
                    if (keys->count() > 0) c.keys = cfg->keys;
                    if (seconds->count() > 0) c.seconds = cfg->seconds;
                    if (repeats->count() > 0) c.repeats = cfg->repeats;
                    if (puts->count() > 0) c.put_percents = cfg->put_percents;
                    if (threads->count() > 0) c.thread_counts = cfg->thread_counts;
                    c.engines = cfg->engines;
                    c.emulate_persist_ns = cfg->emulate_persist_ns;
                    c.emulate_read_ns = cfg->emulate_read_ns;
                    c.dram_budget_bytes = *budget_mib << 20;
                    c.plot_path = cfg->plot_path;
                    return bench::run_kv_bench(c, g.json);
                  }});
}

void add_fuse_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  auto cfg = std::make_shared<bench::FuseConfig>();
  auto smoke = std::make_shared<bool>(false);
  CLI::App* fuse = bench->add_subcommand(
      "fuse", "pm mount vs libfuse's passthrough examples over tmpfs, and tmpfs: files, ls -l");
  fuse->add_option("--dir", cfg->dir,
                   "directory for mounts, store and files (created and removed if missing)")
      ->capture_default_str()
      ->check(kBenchDir);
  CLI::Option* files =
      fuse->add_option("--files", cfg->files, "files of the small-file phases (default 10000)")
          ->check(CLI::Range(uint64_t{1}, uint64_t{10'000'000}));
  CLI::Option* listings =
      fuse->add_option("--listings", cfg->listings,
                       "entries of each listed directory (default 10000 1000000)")
          ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  CLI::Option* large =
      fuse->add_option("--large-mib", cfg->large_mib, "MiB of the large-file phase (default 1024)")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  fuse->add_flag("--smoke", *smoke, "tiny sizes, for a quick check that it works");
  out->push_back({fuse, [cfg, smoke, files, listings, large, &g]() -> Status {
                    bench::FuseConfig c =
                        *smoke ? bench::FuseConfig::smoke_sized() : bench::FuseConfig();
                    c.dir = cfg->dir;
                    if (files->count() > 0) c.files = cfg->files;
                    if (listings->count() > 0) c.listings = cfg->listings;
                    if (large->count() > 0) c.large_mib = cfg->large_mib;
                    return bench::run_fuse_bench(c, g.json);
                  }});
}

void add_memcached_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  auto cfg = std::make_shared<bench::MemcachedConfig>();
  auto smoke = std::make_shared<bool>(false);
  CLI::App* mc = bench->add_subcommand(
      "memcached", "memcached vs pmcached on pmem and on a file system: throughput, latency, "
                   "CPU, warm restart");
  mc->add_option("--dir", cfg->pmem_dir, "pmem directory for one pmcached (emulated: /dev/shm)")
      ->capture_default_str()
      ->check(kBenchDir);
  mc->add_option("--fs-dir", cfg->fs_dir,
                 "ordinary file-system directory for another ('' to skip)")
      ->capture_default_str();
  mc->add_option("--pmcached", cfg->pmcached, "the pmcached binary (default: beside pm, or PATH)");
  CLI::Option* keys = mc->add_option("--keys", cfg->keys, "items loaded (default 1000000)")
                          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  CLI::Option* secs = mc->add_option("--seconds", cfg->seconds, "seconds per cell (default 2)")
                          ->check(kBenchSeconds);
  CLI::Option* reps = mc->add_option("--repeats", cfg->repeats, "runs per cell (median; default 3)")
                          ->check(CLI::Range(1, 100));
  mc->add_option("--threads", cfg->server_threads, "server threads")->capture_default_str()
      ->check(CLI::Range(1, 64));
  mc->add_option("--client-threads", cfg->client_threads, "client threads")->capture_default_str()
      ->check(CLI::Range(1, 64));
  mc->add_option("--connections", cfg->connections, "connections")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  mc->add_option("--depth", cfg->depth, "requests in flight per connection")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  CLI::Option* sets = mc->add_option("--sets", cfg->set_percents, "set percentages (default 0 5 50)")
                          ->check(CLI::Range(0, 100));
  mc->add_flag("--smoke", *smoke, "tiny sizes, for a quick check that it works");
  out->push_back({mc, [cfg, smoke, keys, secs, reps, sets, &g]() -> Status {
                    bench::MemcachedConfig c =
                        *smoke ? bench::MemcachedConfig::smoke_sized() : bench::MemcachedConfig();
                    c.pmem_dir = cfg->pmem_dir;
                    c.fs_dir = cfg->fs_dir;
                    c.pmcached = cfg->pmcached;
                    c.server_threads = cfg->server_threads;
                    c.client_threads = cfg->client_threads;
                    if (!*smoke) {
                      c.connections = cfg->connections;
                      c.depth = cfg->depth;
                    }
                    if (keys->count() > 0) c.keys = cfg->keys;
                    if (secs->count() > 0) c.seconds = cfg->seconds;
                    if (reps->count() > 0) c.repeats = cfg->repeats;
                    if (sets->count() > 0) c.set_percents = cfg->set_percents;
                    return bench::run_memcached_bench(c, g.json);
                  }});
}

void add_sqlite_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  auto cfg = std::make_shared<bench::SqliteConfig>();
  auto smoke = std::make_shared<bool>(false);
  CLI::App* sq = bench->add_subcommand(
      "sqlite", "SQLite's own VFS (WAL, rollback journal) vs the pm VFS, on pmem and on a file "
                "system: transactions, selects, updates, scans");
  sq->add_option("--dir", cfg->pmem_dir, "pmem directory (emulated: /dev/shm)")
      ->capture_default_str()
      ->check(kBenchDir);
  sq->add_option("--fs-dir", cfg->fs_dir, "ordinary file-system directory ('' to skip)")
      ->capture_default_str();
  CLI::Option* rows = sq->add_option("--rows", cfg->rows, "rows loaded (default 1000000)")
                          ->check(CLI::Range(uint64_t{1000}, uint64_t{1} << 32));
  CLI::Option* secs = sq->add_option("--seconds", cfg->seconds, "seconds per cell (default 1)")
                          ->check(kBenchSeconds);
  CLI::Option* reps = sq->add_option("--repeats", cfg->repeats, "runs per cell (median; default 3)")
                          ->check(CLI::Range(1, 16));
  sq->add_flag("--smoke", *smoke, "tiny sizes, for a quick check that it works");
  out->push_back({sq, [cfg, smoke, rows, secs, reps, &g]() -> Status {
#ifdef PM_BENCH_SQLITE
                    bench::SqliteConfig c =
                        *smoke ? bench::SqliteConfig::smoke_sized() : bench::SqliteConfig();
                    c.pmem_dir = cfg->pmem_dir;
                    c.fs_dir = cfg->fs_dir;
                    if (rows->count() > 0) c.rows = cfg->rows;
                    if (secs->count() > 0) c.seconds = cfg->seconds;
                    if (reps->count() > 0) c.repeats = cfg->repeats;
                    return bench::run_sqlite_bench(c, g.json);
#else
                    (void)g;
                    return Status::not_supported(
                        "pm bench sqlite: not built (it needs the examples: -DPM_BUILD_EXAMPLES=ON)");
#endif
                  }});
}

void add_ordered_command(CLI::App* bench, const Globals& g, std::vector<Command>* out) {
  auto cfg = std::make_shared<bench::OrderedConfig>();
  auto smoke = std::make_shared<bool>(false);
  CLI::App* o = bench->add_subcommand(
      "ordered", "the version tree (after CDDS) and the kvstore's ordered index vs Berkeley "
                 "DB's B-tree and LMDB: puts, gets, scans of 100 keys, deletes");
  o->add_option("--dir", cfg->dir, "directory (emulated pmem: /dev/shm)")
      ->capture_default_str()
      ->check(kBenchDir);
  CLI::Option* keys = o->add_option("--keys", cfg->keys, "keys (default 1000000)")
                          ->check(CLI::Range(uint64_t{100}, uint64_t{1} << 32));
  CLI::Option* scans = o->add_option("--scans", cfg->scans, "scans of 100 keys (default 100000)")
                           ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  CLI::Option* reps = o->add_option("--repeats", cfg->repeats, "runs per engine (median; default 3)")
                          ->check(CLI::Range(1, 16));
  o->add_flag("--smoke", *smoke, "tiny sizes, for a quick check that it works");
  out->push_back({o, [cfg, smoke, keys, scans, reps, &g]() -> Status {
                    bench::OrderedConfig c =
                        *smoke ? bench::OrderedConfig::smoke_sized() : bench::OrderedConfig();
                    c.dir = cfg->dir;
                    if (keys->count() > 0) c.keys = cfg->keys;
                    if (scans->count() > 0) c.scans = cfg->scans;
                    if (reps->count() > 0) c.repeats = cfg->repeats;
                    return bench::run_ordered_bench(c, g.json);
                  }});
}

}  // namespace

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
  // Before any suite starts a thread or a child (bench/common/interrupt.h).
  bench->parse_complete_callback([] { bench::install_interrupt_cleanup(); });
  CLI::App* container = bench->add_subcommand(
      "container", "commit latency, hash map vs libpmemobj, open time, DRAM use");
  container->add_option("--dir", a->dir, "directory to run in (created and removed if missing)")
      ->capture_default_str()
      ->check(kBenchDir);
  container->add_option("--also-dir,--fs-dir", a->also_dir,
                        "run the same suite again in this directory (e.g. an ext4 one)");
  CLI::Option* keys = container->add_option("--keys", a->keys, "hash map keys (default 1000000)")
                          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  CLI::Option* budget =
      container
          ->add_option("--budget", a->budget,
                       "seconds a per-insert-commit run may take before it stops (default 10 on "
                       "pmem, 5 on msync)")
          ->check(kBenchSeconds);
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
  add_alloc_command(bench, g, out);
  add_kv_command(bench, g, out);
  add_fuse_command(bench, g, out);
  add_memcached_command(bench, g, out);
  add_sqlite_command(bench, g, out);
  add_ordered_command(bench, g, out);
}

}  // namespace pm::cli
