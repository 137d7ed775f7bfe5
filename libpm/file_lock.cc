#include "libpm/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pm {

namespace {

// The pid holding a flock on inode `ino`, from /proc/locks; 0 if unknown.
long lock_holder(ino_t ino) {
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, type, adv, mode, dev;
    long pid = 0;
    f >> id >> type >> adv >> mode >> pid >> dev;
    if (type != "FLOCK") continue;
    auto colon = dev.rfind(':');
    if (colon != std::string::npos && dev.substr(colon + 1) == std::to_string(ino)) return pid;
  }
  return 0;
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<FileLock> FileLock::acquire(const std::string& path, bool create, bool shared) {
  int flags = (shared ? O_RDONLY : O_RDWR) | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT && !create) {
      return Status::not_found(path + ": no such container; create it first ('pm create')");
    }
    if (err == EEXIST) {
      return Status::invalid_argument(path + " already exists; open it, or remove it first");
    }
    if (!shared && !create && (err == EACCES || err == EROFS || err == EPERM)) {
      return Status::read_only(path + ": no write access (" + std::strerror(err) +
                               "); this needs write access, or open it read-only");
    }
    return Status::from_errno(path, err);
  }
  FileLock l;
  l.fd_ = fd;
  if (::flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      struct stat st;
      long pid = ::fstat(fd, &st) == 0 ? lock_holder(st.st_ino) : 0;
      std::string who = pid == 0 ? std::string("another process")
                                 : (pid == ::getpid() ? std::string("this process (already open)")
                                                      : "pid " + std::to_string(pid));
      return Status::busy(path + ": locked by " + who + "; close it there first");
    }
    return Status::from_errno("lock " + path, err);
  }
  return l;
}

}  // namespace pm
