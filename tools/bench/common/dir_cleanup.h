// The directories a benchmark run makes, and how they go away again: at the
// end of the run, or when it is interrupted (interrupt.h). Nothing the user
// had in a directory given with --dir is touched.
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

// Removes, when the scope ends, a directory that probe_dir() created for
// this run (and the ancestors it created with it) if empty again.
class DirCleanup {
 public:
  explicit DirCleanup(const DirInfo& d) : dir_(d.dir), top_(d.created_top) {}
  ~DirCleanup();
  DirCleanup(const DirCleanup&) = delete;
  DirCleanup& operator=(const DirCleanup&) = delete;

 private:
  std::string dir_, top_;
};

// A directory of this run's own, `<parent>/<name>.<pid>`, made with any
// missing ancestor; removed whole when the run ends or is interrupted, and
// the ancestors made with it when empty. (The suites that worked in
// `parent` itself emptied it at the end: `pm bench ordered --dir ~/x`
// removed ~/x.)
class RunDir {
 public:
  static Result<std::unique_ptr<RunDir>> make(const std::string& parent, const std::string& name);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  RunDir(std::string path, std::string top) : path_(std::move(path)), top_(std::move(top)) {}
  std::string path_, top_;  // top_: the highest directory made with it
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_DIR_CLEANUP_H_
