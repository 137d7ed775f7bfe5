#include "libpm/publish.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>

namespace pm {

Status fsync_dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::from_errno("open the directory of " + path, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  return rc == 0 ? Status() : Status::from_errno("fsync the directory of " + path, err);
}

Status publish(const std::string& tmp, const std::string& path) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) {
      return Status::invalid_argument(path + " already exists; open it, or remove it first");
    }
    if (errno != EINVAL && errno != ENOSYS) return Status::from_errno("rename to " + path, errno);
    // A file system without RENAME_NOREPLACE: link() does not replace either.
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      if (errno == EEXIST) {
        return Status::invalid_argument(path + " already exists; open it, or remove it first");
      }
      return Status::from_errno("link to " + path, errno);
    }
    ::unlink(tmp.c_str());
  }
  return fsync_dir_of(path);
}

}  // namespace pm
