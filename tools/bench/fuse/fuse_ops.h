// The timed operations of `pm bench fuse`, each over one directory and
// through ordinary system calls, as a user's program or shell would do
// them. Each checks what it reads (sizes, contents, entry counts), so that
// a fast wrong answer is an error, not a result.
//
// Thread safety: plain functions; run one at a time.
#ifndef TOOLS_BENCH_FUSE_FUSE_OPS_H_
#define TOOLS_BENCH_FUSE_FUSE_OPS_H_

#include <cstdint>
#include <string>

#include "pm/status.h"

namespace pm::bench {

// File i of a benchmark directory: "f0000042", and its `bytes` bytes.
std::string bench_file_name(uint64_t i);
std::string bench_file_bytes(uint64_t i, uint32_t bytes);

// Seconds taken by the operation over files 0..n-1 of `dir`.
// create: mkdir dir, then open(O_CREAT|O_TRUNC) + write + close per file
// (close's error included, since that is where FUSE flush errors arrive).
Result<double> create_files(const std::string& dir, uint64_t n, uint32_t bytes);
Result<double> stat_files(const std::string& dir, uint64_t n, uint32_t bytes);
Result<double> read_files(const std::string& dir, uint64_t n, uint32_t bytes);
// unlink every file, then rmdir dir.
Result<double> unlink_files(const std::string& dir, uint64_t n);

// `ls -l dir > /dev/null` (GNU ls: readdir, then statx and two xattr calls
// per entry, sorting, formatting). kIOError when ls fails.
Result<double> ls_l(const std::string& dir);
// What ls -l asks the file system, without ls: readdir, then lstat of every
// entry. kCorruption when the directory does not hold `n` entries.
Result<double> readdir_stat(const std::string& dir, uint64_t n);

// One large file at `path`: written sequentially in 1 MiB writes, then
// closed and fsynced (what makes it durable on every target), and read back
// sequentially in 1 MiB reads (checked). Seconds each.
Result<double> write_large(const std::string& path, uint64_t mib);
Result<double> read_large(const std::string& path, uint64_t mib);

// Writes files 0..n-1 into `dir` (created), untimed.
Status write_files(const std::string& dir, uint64_t n, uint32_t bytes);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_FUSE_FUSE_OPS_H_
