#include "bench/common/environment.h"

#include <fmt/format.h>
#include <link.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/common/dir_cleanup.h"
#include "bench/common/interrupt.h"
#include "pm/container.h"

namespace pm::bench {

namespace {

// GCC has no macro for UBSan, and a sanitizer may be preloaded: look at the
// loaded libraries as well as at the compile-time macros.
std::vector<std::string> find_sanitizers() {
  std::vector<std::string> found;
#if defined(__SANITIZE_ADDRESS__)
  found.push_back("address");
#endif
#if defined(__SANITIZE_THREAD__)
  found.push_back("thread");
#endif
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* out = static_cast<std::vector<std::string>*>(arg);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        for (const char* lib : {"libasan", "libtsan", "libubsan", "liblsan"}) {
          if (name.find(lib) != std::string::npos)
            out->push_back(std::string(lib + 3) + " (loaded)");
        }
        return 0;
      },
      &found);
  return found;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string fs_type(const std::string& dir) {
  struct statfs s;
  if (::statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x01021994:
      return "tmpfs";
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794C7630:
      return "overlayfs";
  }
  return fmt::format("statfs type {:#x}", static_cast<unsigned long>(s.f_type));
}

}  // namespace

Environment collect_environment() {
  Environment e;
#ifndef NDEBUG
  e.assertions = true;
#endif
#ifdef __OPTIMIZE__
  e.optimized = true;
#endif
  e.sanitizers = find_sanitizers();
#if defined(__clang__)
  e.compiler = std::string("clang ") + __VERSION__;
#elif defined(__GNUC__)
  e.compiler = std::string("GCC ") + __VERSION__;
#else
  e.compiler = __VERSION__;
#endif
  struct utsname u;
  e.kernel = ::uname(&u) == 0 ? u.release : "unknown";
  e.cpu = cpu_model();
  e.cores = std::thread::hardware_concurrency();
  const char* force = std::getenv("PMEM_IS_PMEM_FORCE");
  e.pmem_force = force ? force : "";
  return e;
}

void print_environment(const char* suite, const Environment& e) {
  auto row = [](const char* k, const std::string& v) { fmt::print("{:<20}{}\n", k, v); };
  fmt::print("pm bench {}\n", suite);
  row("build", fmt::format("{}, {}", e.assertions ? "assertions ON (NDEBUG unset)" : "NDEBUG",
                           e.optimized ? "optimized" : "NOT optimized"));
  std::string san;
  for (const std::string& s : e.sanitizers) san += (san.empty() ? "" : ", ") + s;
  row("sanitizers", san.empty() ? "none" : san);
  row("compiler", e.compiler);
  row("kernel", e.kernel);
  row("cpu", fmt::format("{} ({} cores)", e.cpu, e.cores));
  row("PMEM_IS_PMEM_FORCE", e.pmem_force.empty() ? "unset" : e.pmem_force);
  if (e.untrustworthy()) {
    fmt::print("\n!!! WARNING: {}{}{}: these numbers do not represent a release build !!!\n",
               e.assertions ? "assertions are on " : "", e.optimized ? "" : "optimisation is off ",
               e.sanitizers.empty() ? "" : "sanitizers are on");
  }
}

nlohmann::json environment_json(const Environment& e) {
  return {{"assertions", e.assertions},
          {"optimized", e.optimized},
          {"sanitizers", e.sanitizers},
          {"compiler", e.compiler},
          {"kernel", e.kernel},
          {"cpu", e.cpu},
          {"cores", e.cores},
          {"pmem_is_pmem_force", e.pmem_force},
          {"untrustworthy", e.untrustworthy()}};
}

void print_suite(const char* suite, const Environment& e, const std::vector<Table>& tables,
                 const std::vector<Target>& targets, bool json) {
  if (json) {
    nlohmann::json jt = nlohmann::json::array(), jg = nlohmann::json::array();
    for (const Table& t : tables) jt.push_back(table_json(t));
    for (const Target& t : targets) jg.push_back(target_json(t));
    fmt::print("{}\n", nlohmann::json{{"suite", suite},
                                      {"environment", environment_json(e)},
                                      {"tables", jt},
                                      {"targets", jg}}
                           .dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  print_environment(suite, e);
  for (const Table& t : tables) print_table(t);
  if (!targets.empty()) print_table(targets_table(targets));
}

Result<DirInfo> probe_dir(const std::string& dir) {
  DirInfo d;
  d.parent = dir;
  Result<std::string> run = make_run_dir(dir, "pm-bench", &d.created_top);
  if (!run.ok()) return run.status();
  d.dir = *run;
  d.fs_type = fs_type(d.dir);
  const std::string path = d.dir + "/probe.pm";
  Options o;
  o.initial_size = 1ull << 20;
  o.max_size = 1ull << 30;
  Result<std::unique_ptr<Container>> c = Container::create(path, o);
  if (!c.ok()) {
    remove_run_dir(d.dir, d.created_top);
    return c.status().with_context("probe " + dir);
  }
  ContainerInfo info = (*c)->info();
  d.is_pmem = info.is_pmem;
  d.auto_tracker = info.tracker;
  c->reset();
  PM_TRY(Container::remove(path));
  return d;
}

void print_dir(const DirInfo& d, const Environment& env) {
  std::string pmem = d.is_pmem ? "yes: commits use cache flushes" : "no: commits use msync";
  if (d.is_pmem && !env.pmem_force.empty() && env.pmem_force != "0") {
    pmem += " (forced by PMEM_IS_PMEM_FORCE: not real persistent memory, not durable here)";
  }
  auto row = [](const char* k, const std::string& v) { fmt::print("{:<20}{}\n", k, v); };
  fmt::print("\n==================== {} ====================\n", d.parent);
  row("directory", fmt::format("{} ({}; files in {})", d.parent, d.fs_type, d.dir));
  row("pmem", pmem);
  row("tracker (auto)", d.auto_tracker);
}

nlohmann::json dir_json(const DirInfo& d) {
  return {{"dir", d.parent},
          {"run_dir", d.dir},
          {"fs_type", d.fs_type},
          {"is_pmem", d.is_pmem},
          {"auto_tracker", d.auto_tracker}};
}

}  // namespace pm::bench
