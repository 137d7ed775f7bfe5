// Walking a mount the way the kernel does (readdir, lookup, read,
// readlink) through pmfs::Fs, for the crash workload and the fuzzer.
#ifndef TESTS_CRASH_FUSE_WALK_H_
#define TESTS_CRASH_FUSE_WALK_H_

#include <cstdint>
#include <map>
#include <string>

#include "fuse/fs.h"
#include "pm/status.h"

namespace pm::crash {

// What a fresh mount shows at a path: type, permission bits, contents (a
// file's bytes, a symlink's target), names, extended attributes. Times are left out: they are clocks.
struct Entry {
  char type;  // 'F', 'D', 'L'
  uint32_t perm;
  std::string data;
  uint32_t nlink = 1;  // files and symlinks: their names
  // The file's identity: paths with the same group are names of one file
  // (the inode number in a walk; the workload's own numbers in its model).
  // Compared through the first path of each group, not as a number.
  uint64_t group = 0;
  std::map<std::string, std::string> xattrs{};  // files and directories
};
using Tree = std::map<std::string, Entry>;  // by path, "" (the root) not in it

std::string join(const std::string& dir, const std::string& name);
// An errno from a pmfs::Fs call as a Status naming `what`.
Status errno_status(int err, const std::string& what);

// Everything below directory `ino` (at `path`) into *out.
Status walk(pmfs::Fs& fs, pmfs::Ino ino, const std::string& path, Tree* out);

}  // namespace pm::crash

#endif  // TESTS_CRASH_FUSE_WALK_H_
