// DirCleanup: removes, when the scope ends, a directory that probe_dir()
// created for this run, if it is empty again.
#ifndef TOOLS_BENCH_COMMON_DIR_CLEANUP_H_
#define TOOLS_BENCH_COMMON_DIR_CLEANUP_H_

#include <filesystem>
#include <string>
#include <system_error>

#include "bench/common/environment.h"

namespace pm::bench {

class DirCleanup {
 public:
  explicit DirCleanup(const DirInfo& d) : dir_(d.dir), created_(d.created) {}
  ~DirCleanup() {
    std::error_code ec;  // a non-empty directory stays, silently
    if (created_) std::filesystem::remove(dir_, ec);
  }
  DirCleanup(const DirCleanup&) = delete;
  DirCleanup& operator=(const DirCleanup&) = delete;

 private:
  std::string dir_;
  bool created_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_DIR_CLEANUP_H_
