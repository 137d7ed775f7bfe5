// TempDir: a private directory for one test, removed with its contents.
// Lives under $PM_TEST_DIR, else /dev/shm (emulated pmem), else /tmp.
#ifndef TESTUTIL_TEMP_DIR_H_
#define TESTUTIL_TEMP_DIR_H_

#include <string>

namespace pm::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The tracker the suite runs under (PM_TRACKER), default "auto".
std::string test_tracker();
inline bool hints_only() { return test_tracker() == "hints"; }

}  // namespace pm::test

#endif  // TESTUTIL_TEMP_DIR_H_
