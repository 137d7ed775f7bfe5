#include "bench/fuse/fuse_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/workload.h"

namespace pm::bench {

namespace {

double seconds_since(uint64_t t0) { return double(now_ns() - t0) / 1e9; }

std::string path_of(const std::string& dir, uint64_t i) { return dir + "/" + bench_file_name(i); }

Status write_one(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return Status::from_errno("create " + path, errno);
  const ssize_t w = ::write(fd, data.data(), data.size());
  const int werr = errno;
  if (::close(fd) != 0) return Status::from_errno("close " + path, errno);
  if (w != static_cast<ssize_t>(data.size())) {
    return w < 0 ? Status::from_errno("write " + path, werr)
                 : Status::io_error(fmt::format("write {}: short write of {} bytes", path, w));
  }
  return Status();
}

Status make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::from_errno("mkdir " + dir, errno);
  }
  return Status();
}

}  // namespace

std::string bench_file_name(uint64_t i) { return fmt::format("f{:07}", i); }

std::string bench_file_bytes(uint64_t i, uint32_t bytes) {
  std::string s(bytes, '\0');
  for (uint32_t j = 0; j < bytes; j++) s[j] = static_cast<char>('a' + (i + j) % 26);
  return s;
}

Status write_files(const std::string& dir, uint64_t n, uint32_t bytes) {
  PM_TRY(make_dir(dir));
  for (uint64_t i = 0; i < n; i++) PM_TRY(write_one(path_of(dir, i), bench_file_bytes(i, bytes)));
  return Status();
}

Result<double> create_files(const std::string& dir, uint64_t n, uint32_t bytes) {
  std::vector<std::string> data(n);  // contents made before the clock starts
  for (uint64_t i = 0; i < n; i++) data[i] = bench_file_bytes(i, bytes);
  const uint64_t t0 = now_ns();
  PM_TRY(make_dir(dir));
  for (uint64_t i = 0; i < n; i++) PM_TRY(write_one(path_of(dir, i), data[i]));
  return seconds_since(t0);
}

namespace {

// MiB number i of a large file: its number repeated, so that a misplaced
// MiB is caught.
void fill_mib(uint64_t i, std::string* buf) {
  const std::string n = fmt::format("{:08}", i);
  for (size_t o = 0; o < buf->size(); o += n.size()) buf->replace(o, n.size(), n);
}

}  // namespace

Result<double> write_large(const std::string& path, uint64_t mib) {
  std::string buf(1 << 20, '\0');
  const uint64_t t0 = now_ns();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::from_errno("open " + path, errno);
  for (uint64_t i = 0; i < mib; i++) {
    fill_mib(i, &buf);
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
      const int err = errno;
      ::close(fd);
      return Status::from_errno(fmt::format("write {} at {} MiB", path, i), err);
    }
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::from_errno("fsync " + path, err);
  }
  if (::close(fd) != 0) return Status::from_errno("close " + path, errno);
  return seconds_since(t0);
}

Result<double> read_large(const std::string& path, uint64_t mib) {
  std::string buf(1 << 20, '\0'), want(1 << 20, '\0');
  double busy = 0;  // the check is not the file system's time
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::from_errno("open " + path, errno);
  for (uint64_t i = 0; i < mib; i++) {
    const uint64_t t0 = now_ns();
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    busy += seconds_since(t0);
    fill_mib(i, &want);
    if (r != static_cast<ssize_t>(buf.size()) || buf != want) {
      ::close(fd);
      return Status::corruption(fmt::format("read {}: MiB {} is not what was written", path, i));
    }
  }
  ::close(fd);
  return busy;
}

Result<double> stat_files(const std::string& dir, uint64_t n, uint32_t bytes) {
  const uint64_t t0 = now_ns();
  struct stat st;
  for (uint64_t i = 0; i < n; i++) {
    const std::string p = path_of(dir, i);
    if (::stat(p.c_str(), &st) != 0) return Status::from_errno("stat " + p, errno);
    if (st.st_size != bytes) {
      return Status::corruption(fmt::format("stat {}: size {}, wrote {}", p, st.st_size, bytes));
    }
  }
  return seconds_since(t0);
}

Result<double> read_files(const std::string& dir, uint64_t n, uint32_t bytes) {
  std::string buf(bytes + 4096, '\0');
  const uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < n; i++) {
    const std::string p = path_of(dir, i);
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) return Status::from_errno("open " + p, errno);
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    const int rerr = errno;
    ::close(fd);
    if (r < 0) return Status::from_errno("read " + p, rerr);
    if (std::string_view(buf.data(), static_cast<size_t>(r)) != bench_file_bytes(i, bytes)) {
      return Status::corruption(fmt::format("read {}: {} bytes, not what was written", p, r));
    }
  }
  return seconds_since(t0);
}

Result<double> unlink_files(const std::string& dir, uint64_t n) {
  const uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < n; i++) {
    const std::string p = path_of(dir, i);
    if (::unlink(p.c_str()) != 0) return Status::from_errno("unlink " + p, errno);
  }
  if (::rmdir(dir.c_str()) != 0) return Status::from_errno("rmdir " + dir, errno);
  return seconds_since(t0);
}

Result<double> ls_l(const std::string& dir) {
  const uint64_t t0 = now_ns();
  Result<int> rc = run_command({"ls", "-l", dir}, "/dev/null", /*stderr_too=*/false);
  const double s = seconds_since(t0);
  if (!rc.ok()) return rc.status();
  if (*rc != 0) return Status::io_error(fmt::format("ls -l {} failed (exit {})", dir, *rc));
  return s;
}

Result<double> readdir_stat(const std::string& dir, uint64_t n) {
  const uint64_t t0 = now_ns();
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return Status::from_errno("opendir " + dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d.get())) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.emplace_back(e->d_name);
    }
  }
  if (errno != 0) return Status::from_errno("readdir " + dir, errno);
  struct stat st;
  for (const std::string& name : names) {
    if (::fstatat(::dirfd(d.get()), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return Status::from_errno(fmt::format("lstat {}/{}", dir, name), errno);
    }
  }
  const double s = seconds_since(t0);
  if (names.size() != n) {
    return Status::corruption(
        fmt::format("readdir {}: {} entries, expected {}", dir, names.size(), n));
  }
  return s;
}

}  // namespace pm::bench
