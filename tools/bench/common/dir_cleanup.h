// The directories a benchmark run works in, and how they go away again: at
// the end of the run, or when it is interrupted (interrupt.h). Every suite
// works in a directory of its own inside the one it is given,
// `<dir>/<name>.<pid>`: nothing the user had in --dir is touched, and two
// runs sharing a default directory leave each other alone. (The suites
// used to work in --dir itself; three of them emptied it at the end:
// `pm bench ordered --dir ~/x` removed ~/x.)
#ifndef TOOLS_BENCH_COMMON_DIR_CLEANUP_H_
#define TOOLS_BENCH_COMMON_DIR_CLEANUP_H_

#include <memory>
#include <string>

#include "bench/common/environment.h"
#include "pm/status.h"

namespace pm::bench {

// The highest missing directory on the way to `dir` ("" when `dir`
// exists): what creating `dir` makes, and removing it later undoes.
std::string first_missing_dir(const std::string& dir);

// Makes `<parent>/<name>.<pid>` (and `parent` with its missing ancestors,
// the highest of which goes to *top, "" if none) and registers it for
// removal on interrupt.
Result<std::string> make_run_dir(const std::string& parent, const std::string& name,
                                 std::string* top);
// Removes a run directory whole, then the ancestors made with it while empty.
void remove_run_dir(const std::string& path, const std::string& top);

// Removes, when the scope ends, the run directory probe_dir() made.
class DirCleanup {
 public:
  explicit DirCleanup(const DirInfo& d) : dir_(d.dir), top_(d.created_top) {}
  ~DirCleanup() { remove_run_dir(dir_, top_); }
  DirCleanup(const DirCleanup&) = delete;
  DirCleanup& operator=(const DirCleanup&) = delete;

 private:
  std::string dir_, top_;
};

// A run directory (make_run_dir) removed when it goes out of scope.
class RunDir {
 public:
  static Result<std::unique_ptr<RunDir>> make(const std::string& parent, const std::string& name);
  ~RunDir() { remove_run_dir(path_, top_); }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  RunDir(std::string path, std::string top) : path_(std::move(path)), top_(std::move(top)) {}
  std::string path_, top_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_DIR_CLEANUP_H_
