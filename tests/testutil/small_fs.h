// SmallFs: a file system of its own, a tmpfs of a few MiB, mounted on a
// directory for the test (skipped where mount(2) is not allowed) and
// unmounted at the end: what a full disk does, without filling the host's.
#ifndef TESTS_TESTUTIL_SMALL_FS_H_
#define TESTS_TESTUTIL_SMALL_FS_H_

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace pm::test {

class SmallFs {
 public:
  explicit SmallFs(const std::string& dir, const char* size = "size=12m") : dir_(dir) {
    ::mkdir(dir.c_str(), 0700);
    ok_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, size) == 0;
  }
  ~SmallFs() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

// In a child process (it changes the process's mount namespace): a 16 MiB
// tmpfs in a mount namespace of its own, seen by this process only. Its
// path, or "" when none can be had (not root).
inline std::string private_small_tmpfs() {
  if (::unshare(CLONE_NEWNS) != 0) return "";
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return "";
  // The directory goes in a tmpfs of this namespace's too, so that it is
  // gone with the process: made in the host's /tmp, one was left behind
  // at every run.
  if (::mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m") != 0) return "";
  char dir[] = "/tmp/pm-full-XXXXXX";  // mkdtemp's template
  if (::mkdtemp(dir) == nullptr) return "";
  if (::mount("tmpfs", dir, "tmpfs", 0, "size=16m") != 0) return "";
  return dir;
}

// Fills what is left of the file system with the file `filler`.
inline void fill_file_system(const std::string& filler) {
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT, 0600);
  const std::vector<char> block(1 << 16, 'f');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
}

}  // namespace pm::test

#endif  // TESTS_TESTUTIL_SMALL_FS_H_
