// Environment: what a reader needs to judge `pm bench` numbers: build type,
// compiler, kernel, CPU, and for each directory its file system, whether
// libpm maps it as persistent memory, and which tracker "auto" picks.
#ifndef TOOLS_BENCH_COMMON_ENVIRONMENT_H_
#define TOOLS_BENCH_COMMON_ENVIRONMENT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/common/report.h"
#include "pm/status.h"

namespace pm::bench {

struct Environment {
  bool assertions = false;              // NDEBUG not defined
  bool optimized = false;               // __OPTIMIZE__
  std::vector<std::string> sanitizers;  // compiled in or loaded
  std::string compiler;
  std::string kernel;
  std::string cpu;
  unsigned cores = 0;
  std::string pmem_force;  // value of PMEM_IS_PMEM_FORCE, empty when unset

  // The results mean little: print a loud warning.
  bool untrustworthy() const { return assertions || !optimized || !sanitizers.empty(); }
};

Environment collect_environment();
void print_environment(const char* suite, const Environment& e);
nlohmann::json environment_json(const Environment& e);

// A suite's result on stdout: the environment, the tables and the targets
// as text, or as one JSON document {suite, environment, tables, targets}.
void print_suite(const char* suite, const Environment& e, const std::vector<Table>& tables,
                 const std::vector<Target>& targets, bool json);

struct DirInfo {
  std::string dir;           // the run's own directory inside `parent` (dir_cleanup.h)
  std::string parent;        // the directory given (--dir)
  std::string fs_type;       // "tmpfs", "ext4", ... or the statfs magic
  bool is_pmem = false;      // ContainerInfo::is_pmem of a probe container
  std::string auto_tracker;  // what TrackerKind::kAuto resolves to here
  // The highest directory probe_dir made on the way to `dir` ("" when `dir`
  // existed): removed whole on interrupt, and when empty at the end.
  std::string created_top;
};

// Creates `dir` when missing, and a directory of this run's own in it
// (DirInfo::dir; DirCleanup removes it), then a small probe container there
// (removed again). Errors: from the file system and Container::create; an
// empty `dir` is kInvalidArgument.
Result<DirInfo> probe_dir(const std::string& dir);
void print_dir(const DirInfo& d, const Environment& env);
nlohmann::json dir_json(const DirInfo& d);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_ENVIRONMENT_H_
