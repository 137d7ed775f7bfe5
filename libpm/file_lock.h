// FileLock: the container file, opened and locked (flock) for the life of
// the object: one writing process per container, or any number of readers.
#ifndef LIBPM_FILE_LOCK_H_
#define LIBPM_FILE_LOCK_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "pm/status.h"

namespace pm {

class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& o) noexcept : fd_(o.fd_), map_fd_(o.map_fd_) { o.fd_ = o.map_fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  ~FileLock();

  // Opens `path` read-write (creating it with `mode`, less the umask, when
  // `create`; then the file must not exist) and locks it exclusively;
  // kReadOnly when the user may not write it. With `shared`, opens it
  // read-only under a shared lock: readers exclude only writers. kBusy
  // names the holder's pid.
  static Result<FileLock> acquire(const std::string& path, bool create, bool shared = false,
                                  mode_t mode = 0600);

  // Counts the fork()s that made this process a child, since libpm first
  // locked a file in an ancestor: a container remembers it at open, and a
  // child (where it differs) must not write the file its parent writes.
  static uint64_t forks();
  // OK in the process that opened `path` (when forks() was `forks_at_open`),
  // kInvalidArgument in a child of it: the file's shared mapping and
  // descriptors are the parent's, and a child's write would go under the
  // parent's commits.
  static Status check_not_forked(uint64_t forks_at_open, const std::string& path);

  // `fd`, moved to a number above 2 when it is 0, 1 or 2 (close-on-exec);
  // -1 with errno when that fails (fd is then closed). A program started
  // with stdout closed gets descriptor 1 for the next file it opens, and
  // its printf() would then write into the container.
  static int above_stdio(int fd);

  int fd() const { return fd_; }
  // The same file opened again, to map it: a mapping holds its open file
  // description, and one holding the lock's would keep the lock for as
  // long as any process maps it (a child after fork() maps everything its
  // parent did). No lock of its own.
  int map_fd() const { return map_fd_; }

 private:
  int fd_ = -1;
  int map_fd_ = -1;
};

}  // namespace pm

#endif  // LIBPM_FILE_LOCK_H_
