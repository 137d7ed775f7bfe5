#include "testutil/temp_dir.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace pm::test {

TempDir::TempDir() {
  const char* env = std::getenv("PM_TEST_DIR");
  std::string root = env ? env : (std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp");
  std::string tmpl = root + "/pm-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string test_tracker() {
  const char* t = std::getenv("PM_TRACKER");
  return t ? t : "auto";
}

}  // namespace pm::test
