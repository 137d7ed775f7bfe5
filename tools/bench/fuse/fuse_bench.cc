#include "bench/fuse/fuse_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/dir_cleanup.h"
#include "bench/common/environment.h"
#include "bench/fuse/fuse_ops.h"
#include "bench/fuse/fuse_target.h"
#include "bench/common/progress.h"
#include "bench/common/report.h"

namespace pm::bench {

namespace {

struct Listing {
  double mount = 0;  // seconds to a served mount point (pmfs: store open and index)
  double ls_cold = 0, ls_warm = 0, readdir_cold = 0;  // seconds
};

struct TargetRun {
  std::string name;
  double create = 0, stat = 0, read = 0, unlink = 0;  // seconds for cfg.files files
  double ls_created = 0, readdir_created = 0;         // the directory just created
  // Seconds for cfg.large_mib: the write, a read with the page cache
  // dropped first, and a read again.
  double large_write = 0, large_read = 0, large_reread = 0;
  std::map<uint64_t, Listing> listings;               // by entries
};

struct FuseRun {
  std::vector<TargetRun> targets;
  std::vector<std::string> skipped;
  // Measurements that failed: the run goes on, the cell stays empty, the
  // error is printed under the tables (and fails the run if pmfs's).
  std::vector<std::string> failures;
  bool pmfs_failed = false;
  bool caches_dropped = true;  // before every cold listing
  bool pages_dropped = true;   // before every first read of the large file
  uint64_t open_files_limit = 0;

  void failed(const std::string& target, const Status& s) {
    failures.push_back(s.to_string());
    pmfs_failed |= target == "pmfs";
  }
};

// passthrough_ll keeps an O_PATH descriptor for every inode the kernel
// knows, so listing 1M entries needs over 1M descriptors: raise the limit
// (the daemons inherit it) as far as allowed. The limit in force.
uint64_t raise_open_files_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  uint64_t nr_open = 0;
  if (std::ifstream f("/proc/sys/fs/nr_open"); !(f >> nr_open)) nr_open = r.rlim_max;
  rlimit want{nr_open, nr_open};
  if (nr_open > r.rlim_max && ::setrlimit(RLIMIT_NOFILE, &want) == 0) return nr_open;
  want = {r.rlim_max, r.rlim_max};
  return ::setrlimit(RLIMIT_NOFILE, &want) == 0 ? r.rlim_max : r.rlim_cur;
}

// Frees the kernel's unused dentries and inodes ("2"), or its clean page
// cache ("1") (root only), so that every cold listing or read starts from
// the same state. False when not permitted.
bool drop_kernel_caches(const char* what = "2") {
  ::sync();
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = ::write(fd, what, 1) == 1;
  ::close(fd);
  return ok;
}

Status small_files(FsTarget& t, const FuseConfig& cfg, const Progress& progress, FuseRun* run,
                   TargetRun* r) {
  progress.step(fmt::format("{}: {} small files", t.name(), cfg.files));
  PM_TRY(t.mount());
  const std::string dir = t.root() + "/small-" + t.name();
  auto step = [&](Result<double> s, double* out) {
    if (s.ok()) *out = *s;
    return s.status();
  };
  Status s = step(create_files(dir, cfg.files, cfg.file_bytes), &r->create);
  if (s.ok()) s = step(stat_files(dir, cfg.files, cfg.file_bytes), &r->stat);
  if (s.ok()) s = step(read_files(dir, cfg.files, cfg.file_bytes), &r->read);
  if (s.ok()) s = step(ls_l(dir), &r->ls_created);
  if (s.ok()) s = step(readdir_stat(dir, cfg.files), &r->readdir_created);
  if (s.ok()) s = step(unlink_files(dir, cfg.files), &r->unlink);
  progress.step(fmt::format("{}: a file of {} MiB", t.name(), cfg.large_mib));
  const std::string large = t.root() + "/large-" + t.name();
  if (s.ok()) s = step(write_large(large, cfg.large_mib), &r->large_write);
  if (s.ok()) run->pages_dropped &= drop_kernel_caches("1");
  if (s.ok()) s = step(read_large(large, cfg.large_mib), &r->large_read);
  if (s.ok()) s = step(read_large(large, cfg.large_mib), &r->large_reread);
  if (s.ok() && ::unlink(large.c_str()) != 0) s = Status::from_errno("unlink " + large, errno);
  Status u = t.unmount();
  return s.ok() ? u : s.with_context(t.name());
}

// Lists `rel` (n entries) just after mounting, again warm, and with
// readdir + lstat after a fresh mount.
Status listing(FsTarget& t, const std::string& rel, uint64_t n, FuseRun* run, Listing* l) {
  const std::string dir = t.root() + "/" + rel;
  // An untimed mount first: the large-file phase dropped the page cache,
  // and the timed mount is to measure the file system's start (store open
  // and index), not the daemon's program read back from disk.
  PM_TRY(t.mount());
  PM_TRY(t.unmount());
  run->caches_dropped &= drop_kernel_caches();
  PM_TRY(t.mount());
  const double mount = t.mount_seconds();
  Result<double> cold = ls_l(dir);
  // A listing slower than a minute is not run again (passthrough at 1M
  // entries takes minutes): its warm cell stays empty.
  Result<double> warm = !cold.ok() ? cold : *cold > 60 ? Result<double>(0.0) : ls_l(dir);
  PM_TRY(t.unmount());
  if (!warm.ok()) return warm.status().with_context(t.name());
  run->caches_dropped &= drop_kernel_caches();
  PM_TRY(t.mount());
  Result<double> rd = readdir_stat(dir, n);
  PM_TRY(t.unmount());
  if (!rd.ok()) return rd.status().with_context(t.name());
  *l = Listing{mount, *cold, *warm, *rd};
  return Status();
}

Status listings(std::vector<std::unique_ptr<FsTarget>>& targets, const FuseConfig& cfg,
                const std::string& tmpfs, const Progress& progress, FuseRun* run) {
  for (uint64_t n : cfg.listings) {
    const std::string rel = fmt::format("list-{}", n);
    progress.step(fmt::format("listing of {} entries: writing them behind the mounts", n));
    for (auto& t : targets) {
      if (t->name() == "pmfs" || t->name() == "tmpfs") {  // the passthroughs serve tmpfs's
        PM_TRY(t->populate_behind(rel, n, cfg.file_bytes).with_context(t->name()));
      }
    }
    for (size_t i = 0; i < targets.size(); i++) {
      if (targets[i]->name() == "passthrough_ll" && n + 1000 > run->open_files_limit) {
        run->failures.push_back(fmt::format(
            "passthrough_ll: listing of {} not run: it holds a descriptor per entry and the open "
            "files limit is {} (raise the hard limit, as root: ulimit -Hn)",
            n, run->open_files_limit));
        continue;
      }
      progress.step(fmt::format("{}: ls -l of {} entries", targets[i]->name(), n));
      Listing l;
      Status s = listing(*targets[i], rel, n, run, &l);
      if (s.ok()) {
        run->targets[i].listings[n] = l;
      } else {
        run->failed(targets[i]->name(), s.with_context(fmt::format("listing of {}", n)));
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(tmpfs + "/" + rel, ec);
  }
  return Status();
}

// ------------------------------------------------------------------ report

const TargetRun* find(const FuseRun& run, const std::string& name) {
  for (const TargetRun& t : run.targets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<Column> columns(const FuseRun& run, const char* first, Format f) {
  std::vector<Column> c = {{first, "what"}};
  for (const TargetRun& t : run.targets) c.push_back({t.name, t.name, f});
  c.push_back({"pmfs vs passthrough (speed)", "pmfs_vs_passthrough", Format::kRatio});
  return c;
}

// A row of rates (per second) or of milliseconds from per-target seconds;
// the ratio is pmfs's speed over passthrough's either way.
std::vector<Cell> row(const FuseRun& run, const std::string& what, bool rate, double count,
                      const std::function<double(const TargetRun&)>& seconds) {
  std::vector<Cell> r = {what};
  for (const TargetRun& t : run.targets) {
    const double s = seconds(t);
    r.push_back(s > 0 ? Cell(rate ? count / s : s * 1e3) : Cell());
  }
  const TargetRun *p = find(run, "pmfs"), *pt = find(run, "passthrough");
  r.push_back(p && pt ? ratio(seconds(*pt), seconds(*p)) : Cell());
  return r;
}

Table small_table(const FuseRun& run, const FuseConfig& cfg) {
  Table t;
  t.title = fmt::format("small files: {} files of {} B, one thread (operations per second)",
                        cfg.files, cfg.file_bytes);
  t.columns = columns(run, "operation", Format::kRate);
  const auto n = double(cfg.files);
  t.add_row(row(run, "create+write+close", true, n, [](const TargetRun& r) { return r.create; }));
  t.add_row(row(run, "stat", true, n, [](const TargetRun& r) { return r.stat; }));
  t.add_row(row(run, "open+read+close", true, n, [](const TargetRun& r) { return r.read; }));
  t.add_row(row(run, "unlink", true, n, [](const TargetRun& r) { return r.unlink; }));
  t.notes.push_back(
      "passthrough and passthrough_ll are libfuse's examples as shipped, reading and writing "
      "the tmpfs directory (passthrough mirrors / at its mount point, passthrough_ll the "
      "directory alone): passthrough caches nothing (timeouts 0), passthrough_ll caches for "
      "1 s");
  t.notes.push_back(
      "pmfs writes every close as one store transaction to its container on the bench "
      "directory (durable on real pmem, or through msync on a file system; with "
      "PMEM_IS_PMEM_FORCE=1 on tmpfs, not durable); tmpfs and the passthroughs keep the data "
      "in RAM only");
  return t;
}

Table large_table(const FuseRun& run, const FuseConfig& cfg) {
  Table t;
  t.title = fmt::format("a large file: {} MiB in 1 MiB calls, one thread (MiB per second)",
                        cfg.large_mib);
  t.columns = columns(run, "operation", Format::kRate);
  const auto mib = double(cfg.large_mib);
  t.add_row(row(run, "write+fsync+close", true, mib,
                [](const TargetRun& r) { return r.large_write; }));
  t.add_row(row(run, "read", true, mib, [](const TargetRun& r) { return r.large_read; }));
  t.add_row(row(run, "read again", true, mib, [](const TargetRun& r) { return r.large_reread; }));
  t.notes.push_back(run.pages_dropped
                        ? "the kernel's page cache was dropped before the first read"
                        : "the kernel's page cache could not be dropped (not root): the first "
                          "read may be served from it");
  t.notes.push_back(
      "pmfs stores a file over one value (1 MiB) as 1 MiB chunks under a manifest; reads are "
      "checked against what was written, outside the timing");
  return t;
}

Table listing_table(const FuseRun& run, const FuseConfig& cfg) {
  Table t;
  t.title = "listings (milliseconds)";
  t.columns = columns(run, "listing", Format::kMillis);
  t.add_row(row(run, fmt::format("ls -l, {} files just created", cfg.files), false, 0,
                [](const TargetRun& r) { return r.ls_created; }));
  t.add_row(row(run, fmt::format("readdir+lstat, {} files just created", cfg.files), false, 0,
                [](const TargetRun& r) { return r.readdir_created; }));
  for (uint64_t n : cfg.listings) {
    auto get = [n](double Listing::*m) {
      return [n, m](const TargetRun& r) {
        auto it = r.listings.find(n);
        return it == r.listings.end() ? 0.0 : it->second.*m;
      };
    };
    t.add_row(row(run, fmt::format("mount, {} entries", n), false, 0, get(&Listing::mount)));
    t.add_row(row(run, fmt::format("ls -l, {} entries, just mounted", n), false, 0,
                  get(&Listing::ls_cold)));
    t.add_row(
        row(run, fmt::format("ls -l, {} entries, again", n), false, 0, get(&Listing::ls_warm)));
    t.add_row(row(run, fmt::format("readdir+lstat, {} entries, just mounted", n), false, 0,
                  get(&Listing::readdir_cold)));
  }
  t.notes.push_back(
      "ls -l is GNU ls with output to /dev/null: per entry a statx and two xattr calls, then "
      "sorting; readdir+lstat is what it asks the file system, without ls");
  t.notes.push_back("\"again\" is not run after a first listing that took over a minute");
  t.notes.push_back(
      "mount is the second of two mounts (the first, untimed, reads the daemon's program back "
      "after the large-file phase dropped the page cache): from exec to a served mount point");
  t.notes.push_back(run.caches_dropped
                        ? "the kernel's dentry and inode caches were dropped before each mount"
                        : "the kernel's caches could not be dropped (not root): cold listings "
                          "may find slab memory warm");
  return t;
}

std::vector<Target> fuse_targets(const FuseRun& run, const FuseConfig& cfg) {
  const TargetRun *p = find(run, "pmfs"), *pt = find(run, "passthrough");
  auto vs = [&](std::string name, double TargetRun::*m) {
    Target t = Target::at_least_of(std::move(name), 1.0, "x");
    t.available = p && pt && p->*m > 0;
    if (t.available) t.measured = (pt->*m) / (p->*m);
    return t;
  };
  std::vector<Target> out = {vs("small-file create+write+close vs passthrough", &TargetRun::create),
                             vs("small-file open+read+close vs passthrough", &TargetRun::read)};
  constexpr uint64_t kMillion = 1'000'000;
  Target ls = Target::at_most_of("ls -l of 1M entries, pmfs just mounted", 3, "s");
  ls.available = p && p->listings.contains(kMillion);
  if (ls.available) ls.measured = p->listings.at(kMillion).ls_cold;
  if (!ls.available && !cfg.smoke) ls.not_applicable = "no 1M listing in this run (--listings)";
  out.push_back(ls);
  // Issue 13: a mount costs the same whatever the store holds.
  Target mount = Target::at_most_of("pmfs mount of 1M entries (store open and index)", 50, "ms");
  mount.available = ls.available;
  if (mount.available) mount.measured = p->listings.at(kMillion).mount * 1e3;
  mount.not_applicable = ls.not_applicable;
  out.push_back(mount);
  return out;
}

void print_config(const FuseConfig& cfg, const FuseRun& run, const DirInfo& dir) {
  auto line = [](const char* k, const std::string& v) { fmt::print("{:<20}{}\n", k, v); };
  std::string sizes;
  for (uint64_t n : cfg.listings) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
  line("small files", fmt::format("{}{} files of {} B (--files)",
                                  cfg.smoke ? "SMOKE (tiny sizes, numbers not meaningful): " : "",
                                  cfg.files, cfg.file_bytes));
  line("listings", sizes + " entries, written behind the mounts (--listings)");
  line("pmfs", "pm mount -f with its defaults (8 logs of 8 MiB, Durability::kSyncOnPmem)");
  line("open files",
       fmt::format("limit {} (passthrough_ll holds a descriptor per inode)", run.open_files_limit));
  for (const std::string& s : run.skipped) line("skipped", s);
  if (dir.fs_type != "tmpfs") {
    line("note", fmt::format("{} is {}, not tmpfs: the tmpfs column and the passthroughs' files "
                             "are on {}",
                             dir.dir, dir.fs_type, dir.fs_type));
  }
}

nlohmann::json run_json(const FuseRun& run) {
  nlohmann::json out = nlohmann::json::array();
  for (const TargetRun& t : run.targets) {
    nlohmann::json ls = nlohmann::json::object();
    for (const auto& [n, l] : t.listings) {
      ls[std::to_string(n)] = {{"mount_s", l.mount},
                               {"ls_cold_s", l.ls_cold},
                               {"ls_warm_s", l.ls_warm},
                               {"readdir_stat_cold_s", l.readdir_cold}};
    }
    out.push_back({{"name", t.name},
                   {"create_s", t.create},
                   {"stat_s", t.stat},
                   {"read_s", t.read},
                   {"unlink_s", t.unlink},
                   {"ls_created_s", t.ls_created},
                   {"readdir_stat_created_s", t.readdir_created},
                   {"large_write_s", t.large_write},
                   {"large_read_s", t.large_read},
                   {"large_reread_s", t.large_reread},
                   {"listings", ls}});
  }
  return out;
}

Result<std::vector<std::unique_ptr<FsTarget>>> make_targets(const FuseConfig& cfg,
                                                            const std::string& tmpfs,
                                                            FuseRun* run) {
  std::vector<std::unique_ptr<FsTarget>> out;
  for (FsKind k : {FsKind::kPmfs, FsKind::kPassthrough, FsKind::kPassthroughLl, FsKind::kTmpfs}) {
    auto t = FsTarget::create(k, cfg.dir + "/" + fs_kind_name(k), tmpfs, cfg);
    if (!t.ok() && t.status().code() == Code::kNotFound) {
      run->skipped.push_back(t.status().message());
      continue;
    }
    if (!t.ok()) return t.status();
    run->targets.emplace_back();
    run->targets.back().name = (*t)->name();
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

Status run_fuse_bench(const FuseConfig& given, bool json) {
  if (given.files == 0) return Status::invalid_argument("--files must be at least 1");
  const Environment env = collect_environment();
  const Progress progress;
  Result<DirInfo> info = probe_dir(given.dir);
  if (!info.ok()) return info.status();
  DirCleanup cleanup(*info);
  FuseConfig cfg = given;  // every path below inside the run's own directory
  cfg.dir = info->dir;
  const std::string tmpfs = cfg.dir + "/tmpfs-files";
  std::error_code ec;
  std::filesystem::create_directories(tmpfs, ec);
  if (ec) return Status::io_error(fmt::format("mkdir {}: {}", tmpfs, ec.message()));
  FuseRun run;
  run.open_files_limit = raise_open_files_limit();
  auto targets = make_targets(cfg, std::filesystem::absolute(tmpfs).string(), &run);
  if (!targets.ok()) return targets.status();
  if (!json) {
    print_environment("fuse", env);
    print_config(cfg, run, *info);
    print_dir(*info, env);
  }
  for (size_t i = 0; i < targets->size(); i++) {
    TargetRun r;
    r.name = run.targets[i].name;
    Status small = small_files(*(*targets)[i], cfg, progress, &run, &r);
    if (small.ok()) {
      run.targets[i] = r;
    } else {
      run.failed(r.name, small.with_context("small files"));
    }
  }
  Status s = listings(*targets, cfg, tmpfs, progress, &run);
  targets->clear();  // unmounts whatever an error left mounted (DirCleanup removes the files)
  PM_TRY(s);
  std::vector<Table> tables = {small_table(run, cfg), large_table(run, cfg),
                               listing_table(run, cfg)};
  for (const std::string& f : run.failures) tables.back().notes.push_back("not measured: " + f);
  const std::vector<Target> goals = fuse_targets(run, cfg);
  if (json) {
    nlohmann::json jt = nlohmann::json::array(), jg = nlohmann::json::array();
    for (const Table& t : tables) jt.push_back(table_json(t));
    for (const Target& t : goals) jg.push_back(target_json(t));
    nlohmann::json doc = {{"suite", "fuse"},
                          {"environment", environment_json(env)},
                          {"directory", dir_json(*info)},
                          {"targets_run", run_json(run)},
                          {"skipped", run.skipped},
                          {"failures", run.failures},
                          {"tables", jt},
                          {"targets", jg}};
    fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    for (const Table& t : tables) print_table(t);
    print_table(targets_table(goals));
  }
  if (run.pmfs_failed) return Status::io_error("a pmfs measurement failed (see the notes above)");
  return Status();
}

}  // namespace pm::bench
