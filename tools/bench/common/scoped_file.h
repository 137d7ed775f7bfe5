// ScopedFile: a file the benchmark creates, removed when the scope ends, on
// error paths too. A leftover from an interrupted run is removed first.
// Declare it before the object that holds the file open, so that the object
// closes the file before it is removed.
#ifndef TOOLS_BENCH_COMMON_SCOPED_FILE_H_
#define TOOLS_BENCH_COMMON_SCOPED_FILE_H_

#include <unistd.h>

#include <string>

namespace pm::bench {

class ScopedFile {
 public:
  explicit ScopedFile(std::string path) : path_(std::move(path)) { ::unlink(path_.c_str()); }
  ~ScopedFile() { ::unlink(path_.c_str()); }
  ScopedFile(const ScopedFile&) = delete;
  ScopedFile& operator=(const ScopedFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_SCOPED_FILE_H_
