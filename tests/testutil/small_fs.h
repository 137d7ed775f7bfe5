// SmallFs: a file system of its own, a tmpfs of a few MiB, mounted on a
// directory for the test (skipped where mount(2) is not allowed) and
// unmounted at the end: what a full disk does, without filling the host's.
#ifndef TESTS_TESTUTIL_SMALL_FS_H_
#define TESTS_TESTUTIL_SMALL_FS_H_

#include <sys/mount.h>
#include <sys/stat.h>

#include <string>

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

}  // namespace pm::test

#endif  // TESTS_TESTUTIL_SMALL_FS_H_
