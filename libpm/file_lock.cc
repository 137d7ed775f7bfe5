#include "libpm/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
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

// The lock descriptors of this process. A child after fork() shares each
// one's open file description, and with it the lock: the parent that
// closed and reopened its container found it locked by the child until
// the child exited (Python's multiprocessing, pre-fork servers). The child
// lets go of them: each of its copies is pointed at /dev/null (the number
// stays valid for the child's own objects, which may still close it).
std::mutex g_fds_mu;
std::set<int>* g_fds = nullptr;  // never freed: used by fork handlers to the end

std::atomic<uint64_t> g_forks{0};

void child_lets_go() {
  g_forks.fetch_add(1, std::memory_order_relaxed);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int fd : *g_fds) (void)::dup3(null, fd, O_CLOEXEC);
    ::close(null);
  }
  g_fds_mu.unlock();
}

void track(int fd) {
  static std::once_flag once;
  std::call_once(once, [] {
    g_fds = new std::set<int>;
    // The mutex is held across fork(), so that the child's set is whole.
    ::pthread_atfork([] { g_fds_mu.lock(); }, [] { g_fds_mu.unlock(); }, child_lets_go);
  });
  std::lock_guard<std::mutex> l(g_fds_mu);
  g_fds->insert(fd);
}

void close_tracked(int fd) {
  {
    std::lock_guard<std::mutex> l(g_fds_mu);
    if (g_fds != nullptr) g_fds->erase(fd);
  }
  ::close(fd);
}

}  // namespace

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close_tracked(fd_);
    if (map_fd_ >= 0) ::close(map_fd_);
    fd_ = o.fd_;
    map_fd_ = o.map_fd_;
    o.fd_ = o.map_fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close_tracked(fd_);
  if (map_fd_ >= 0) ::close(map_fd_);
}

int FileLock::above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int err = errno;
  ::close(fd);
  errno = err;
  return moved;
}

uint64_t FileLock::forks() { return g_forks.load(std::memory_order_relaxed); }

Status FileLock::check_not_forked(uint64_t forks_at_open, const std::string& path) {
  if (forks() == forks_at_open) return Status();
  return Status::invalid_argument(path + ": opened by a parent of this process (before fork()); "
                                  "a child may not change it: open it in the child instead");
}

Result<FileLock> FileLock::acquire(const std::string& path, bool create, bool shared,
                                   mode_t mode) {
  int flags = (shared ? O_RDONLY : O_RDWR) | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  int fd = above_stdio(::open(path.c_str(), flags, mode));
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
                               "); changes need write access, reads work with a read-only open");
    }
    return Status::from_errno(path, err);
  }
  try {
    track(fd);
  } catch (const std::exception&) {  // no memory for the set: no lock either
    ::close(fd);
    return Status::no_space("lock " + path + ": out of memory");
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
  // A new open file description of the same file (not a dup, which would
  // share the lock's), found through /proc whatever became of the path.
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  // Without /proc, a duplicate: mappings then hold the lock as before.
  l.map_fd_ = above_stdio(::open(self.c_str(), (shared ? O_RDONLY : O_RDWR) | O_CLOEXEC));
  if (l.map_fd_ < 0) l.map_fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (l.map_fd_ < 0) return Status::from_errno("reopen " + path + " to map it", errno);
  return l;
}

}  // namespace pm
