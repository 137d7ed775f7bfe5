#include "libpm/persist.h"

#include <fcntl.h>
#include <libpmem.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "libpm/file_lock.h"
#include "libpm/planted_bugs.h"

namespace pm {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kLine = 64;

// Whether the file open at `a` is the one open at `b`.
bool same_inode(int a, int b) {
  struct stat x, y;
  return ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// libpmem-backed home view. On pmem, flush/drain are cache-line flushes and
// a fence; elsewhere flushed ranges are remembered and drain() msyncs them,
// or makes the whole file durable in one fdatasync when they lie apart.
//
// The file is opened once and everything after (maps, resizes, syncs, the
// free-space query) goes through that descriptor, never the path again: a
// path renamed, removed or replaced by another file while the container is
// open must not send its growth into another file.
class PmemFile final : public Persist {
 public:
  explicit PmemFile(std::string path) : path_(std::move(path)) {}
  ~PmemFile() override {
    unmap();
    if (fd_ >= 0) ::close(fd_);
  }

  Status open() {
    fd_ = FileLock::above_stdio(::open(path_.c_str(), O_RDWR | O_CLOEXEC));
    if (fd_ < 0) return Status::from_errno("open " + path_, errno);
    return map();
  }

  Status map() {
    size_t len = 0;
    int is_pmem = 0;
    // libpmem maps by name: this one reopens our file whatever became of
    // its path. Without /proc, the path (as when nothing renames it).
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    const bool proc = ::access(self.c_str(), F_OK) == 0;
    void* p = pmem_map_file(proc ? self.c_str() : path_.c_str(), 0, 0, 0, &len, &is_pmem);
    if (p == nullptr) {
      return Status::io_error("map " + path_ + ": " + pmem_errormsg());
    }
    base_ = static_cast<std::byte*>(p);
    len_ = len;
    is_pmem_ = is_pmem != 0;
    return Status();
  }

  bool same_file(int fd) const override { return same_inode(fd, fd_); }
  bool is_pmem() const override { return is_pmem_; }
  void set_path(const std::string& path) override { path_ = path; }
  const std::byte* view() const override { return base_; }
  uint64_t size() const override { return len_; }

  void write(uint64_t off, const void* src, size_t n) override {
    pmem_memcpy(base_ + off, src, n, PMEM_F_MEM_NOFLUSH);
  }

  void flush(uint64_t off, size_t n) override {
    if (is_pmem_) {
      pmem_flush(base_ + off, n);
    } else {
      uint64_t b = off & ~(kPage - 1);
      pending_.push_back({b, off + n - b});
    }
  }

  void write_flushed(uint64_t off, const void* src, size_t n) override {
    if (is_pmem_ && ((off | n) & (kLine - 1)) == 0) {
      // Whole lines (a commit's write-back): streamed, the old lines are
      // not read first. libpmem streams only copies of 256 bytes and more;
      // a single line written back was a cache miss and a flush (about 90
      // ns against 15-35 here).
      pmem_memcpy(base_ + off, src, n, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
    } else if (is_pmem_) {
      pmem_memcpy_nodrain(base_ + off, src, n);
    } else {
      write(off, src, n);
      flush(off, n);
    }
  }

  Status drain() override {
    if (is_pmem_) {
      pmem_drain();
      return Status();
    }
    return msync_pending();
  }

  Status persist_range(uint64_t off, size_t n) override {
    if (is_pmem_) {
      pmem_persist(base_ + off, n);
      return Status();
    }
    if (pmem_msync(base_ + off, n) != 0) {
      return Status::io_error("msync " + path_ + ": " + pmem_errormsg());
    }
    return Status();
  }

  Status resize(uint64_t keep, uint64_t new_size) override {
    PM_TRY(drain());
    PM_TRY(check_file_size_limit(new_size, path_));
    const int fd = fd_;
    Status s;
    if (keep < new_size && keep < len_ && ::ftruncate(fd, static_cast<off_t>(keep)) != 0) {
      s = Status::from_errno("resize " + path_, errno);
    }
    if (s.ok() && ::ftruncate(fd, static_cast<off_t>(new_size)) != 0) {
      s = Status::from_errno("resize " + path_ + " to " + std::to_string(new_size) + " bytes",
                             errno);
    }
    if (s.ok() && new_size > std::min(keep, len_)) {
      const uint64_t from = std::min(keep, len_);
      s = allocate_file_space(fd, from, new_size - from, path_);
    }
    // On failure the file goes back to the size that is still mapped: after
    // the cut to `keep` it would be shorter than the mapping, and the next
    // store past its end (the journal's) would fault with SIGBUS. Best
    // effort: nothing in [keep, len_) is in use.
    if (!s.ok() && ::ftruncate(fd, static_cast<off_t>(len_)) == 0 && keep < len_) {
      (void)allocate_file_space(fd, keep, len_ - keep, path_);
    }
    // The new size must be durable before anything in the new range is.
    if (s.ok() && ::fsync(fd) != 0) s = Status::from_errno("fsync " + path_, errno);
    if (!s.ok()) return s;
    // The new view first: if it cannot be had, the old one stays in use.
    std::byte* old = base_;
    const uint64_t old_len = len_;
    PM_TRY(map());
    if (old != nullptr) pmem_unmap(old, old_len);
    return Status();
  }

  uint64_t free_bytes() const override {
    struct statvfs fs;
    if (::fstatvfs(fd_, &fs) != 0) return UINT64_MAX;
    return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  }

 private:
  struct Range {
    uint64_t off, len;
  };

  Status msync_pending() {
    if (pending_.empty()) return Status();
    std::sort(pending_.begin(), pending_.end(),
              [](const Range& a, const Range& b) { return a.off < b.off; });
    Status s;
    uint64_t cur = pending_[0].off, end = cur + pending_[0].len;
    std::vector<Range>& merged = merged_scratch_;
    merged.clear();
    for (const Range& r : pending_) {
      if (r.off > end) {
        merged.push_back({cur, end - cur});
        cur = r.off;
      }
      end = std::max(end, r.off + r.len);
    }
    merged.push_back({cur, end - cur});
    pending_.clear();
    // Each msync is a device flush on a journaling file system; ranges
    // apart (a commit's journal body and header, its scattered home lines)
    // cost one flush each, where one fdatasync makes every written page of
    // the file durable with one. (Pages other writers dirtied, a kvstore's
    // logs, become durable early: never later than they would.)
    if (merged.size() > 1 && fd_ >= 0) {
      if (::fdatasync(fd_) != 0) s = Status::from_errno("fdatasync " + path_, errno);
      return s;
    }
    for (const Range& r : merged) {
      if (s.ok() && pmem_msync(base_ + r.off, r.len) != 0) {
        s = Status::io_error("msync " + path_ + ": " + pmem_errormsg());
      }
    }
    return s;
  }

  void unmap() {
    if (base_ != nullptr) pmem_unmap(base_, len_);
    base_ = nullptr;
  }

  std::string path_;
  std::byte* base_ = nullptr;
  uint64_t len_ = 0;
  bool is_pmem_ = false;
  int fd_ = -1;  // the file, opened once
  std::vector<Range> pending_;
  std::vector<Range> merged_scratch_;
};

// A read-only open's home view: a private copy-on-write mapping of a file
// opened O_RDONLY. Stores land in this process's copy and never reach the
// file; everything that would make them durable fails with kReadOnly (the
// container refuses changes before they get here).
class ReadOnlyFile final : public Persist {
 public:
  explicit ReadOnlyFile(std::string path) : path_(std::move(path)) {}
  ~ReadOnlyFile() override {
    if (base_ != nullptr) ::munmap(base_, len_);
    if (fd_ >= 0) ::close(fd_);
  }

  Status map() {
    fd_ = FileLock::above_stdio(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd_ < 0) return Status::from_errno("open " + path_, errno);
    const int fd = fd_;
    struct stat st;
    Status s;
    if (::fstat(fd, &st) != 0) s = Status::from_errno("stat " + path_, errno);
    if (s.ok()) {
      len_ = static_cast<uint64_t>(st.st_size);
      void* p = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        s = Status::from_errno("map " + path_, errno);
      } else {
        base_ = static_cast<std::byte*>(p);
      }
    }
    return s;
  }

  bool same_file(int fd) const override { return same_inode(fd, fd_); }
  bool is_pmem() const override { return false; }
  const std::byte* view() const override { return base_; }
  uint64_t size() const override { return len_; }
  void write(uint64_t off, const void* src, size_t n) override { std::memcpy(base_ + off, src, n); }
  void flush(uint64_t, size_t) override {}
  Status drain() override { return refuse(); }
  Status persist_range(uint64_t, size_t) override { return refuse(); }
  Status resize(uint64_t, uint64_t) override { return refuse(); }

 private:
  Status refuse() const { return Status::read_only(path_ + ": opened read-only"); }

  std::string path_;
  std::byte* base_ = nullptr;
  uint64_t len_ = 0;
  int fd_ = -1;
};

}  // namespace

Status check_file_size_limit(uint64_t size, const std::string& path) {
  struct rlimit lim;
  if (::getrlimit(RLIMIT_FSIZE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY ||
      size <= static_cast<uint64_t>(lim.rlim_cur)) {
    return Status();
  }
  return Status::no_space(path + ": " + std::to_string(size) +
                          " bytes would pass the process's file size limit (ulimit -f) of " +
                          std::to_string(static_cast<uint64_t>(lim.rlim_cur)) + " bytes");
}

Status allocate_file_space(int fd, uint64_t off, uint64_t len, const std::string& path) {
  if (len == 0 || g_planted_bugs.sparse_file) return Status();
  const int err = ::posix_fallocate(fd, static_cast<off_t>(off), static_cast<off_t>(len));
  if (err == 0) return Status();
  const std::string what = "reserve " + std::to_string(len) + " bytes of file space for " + path;
  if (err == ENOSPC) return Status::no_space(what + ": no space left on device");
  return Status::from_errno(what, err);
}

namespace {

// The holes of [0, size): offset and length of each.
std::vector<std::pair<uint64_t, uint64_t>> find_holes(int fd, uint64_t size) {
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  for (off_t at = 0; static_cast<uint64_t>(at) < size;) {
    const off_t hole = ::lseek(fd, at, SEEK_HOLE);
    if (hole < 0 || static_cast<uint64_t>(hole) >= size) break;  // none (or no SEEK_HOLE)
    const off_t data = ::lseek(fd, hole, SEEK_DATA);
    const uint64_t end = data < 0 ? size : std::min<uint64_t>(size, static_cast<uint64_t>(data));
    holes.emplace_back(static_cast<uint64_t>(hole), end - static_cast<uint64_t>(hole));
    at = static_cast<off_t>(end);
  }
  return holes;
}

}  // namespace

Status fill_holes(int fd, struct stat st, bool read_only, uint64_t used_end,
                  const std::string& path) {
  uint64_t size = static_cast<uint64_t>(st.st_size);
  // Fewer blocks than bytes is the cheap hint (a compressing file system
  // gives it too); SEEK_HOLE finds the holes themselves. (tmpfs reports
  // allocated pages never written as holes too: so the hint goes first.)
  if (static_cast<uint64_t>(st.st_blocks) * 512 >= size) return Status();
  // Past the bytes in use, from the first hole there on: a growth a crash
  // cut short (Persist::resize extends the file, then allocates it).
  const uint64_t in_use = used_end >= size ? size : (used_end + 4095) / 4096 * 4096;
  if (in_use < size && !g_planted_bugs.open_fills_growth_holes) {
    uint64_t cut = size;
    for (const auto& [off, len] : find_holes(fd, size)) {
      if (off + len > in_use) {
        cut = std::max(off, in_use);
        break;
      }
    }
    // Only a hole that runs to the end is a growth's (resize allocates
    // from the old end on): data after it would be something else's.
    if (cut < size && !(::lseek(fd, static_cast<off_t>(cut), SEEK_DATA) < 0 && errno == ENXIO)) {
      cut = size;
    }
    if (cut < size && !read_only) {
      if (::ftruncate(fd, static_cast<off_t>(cut)) != 0 || ::fsync(fd) != 0 ||
          ::fstat(fd, &st) != 0) {
        return Status::from_errno("cut " + path + " to its bytes in use (" +
                                  std::to_string(cut) + ")", errno);
      }
    }
    size = std::min(size, cut);  // a read-only open never reads past it
    if (static_cast<uint64_t>(st.st_blocks) * 512 >= size) return Status();
  }
  const std::vector<std::pair<uint64_t, uint64_t>> holes = find_holes(fd, size);
  uint64_t hole_bytes = 0;
  for (const auto& [off, len] : holes) hole_bytes += len;
  if (holes.empty()) return Status();
  const std::string what = path + " has " + std::to_string(hole_bytes) +
                           " bytes of holes (a sparse copy?)";
  if (!read_only) {
    for (const auto& [off, len] : holes) {
      Status s = allocate_file_space(fd, off, len, path);
      if (s.code() == Code::kNoSpace) {
        return Status::no_space(what + ", and its file system has no room to fill them: free "
                                "space there, or copy the file without --sparse");
      }
      PM_TRY(s);
    }
    return Status();
  }
  // Read-only: only tmpfs takes a page to read a hole through a mapping
  // (other file systems map the zero page).
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return Status();
  if (static_cast<uint64_t>(fs.f_bavail) * fs.f_bsize >= hole_bytes) return Status();
  return Status::no_space(what + ", and its tmpfs has no room for them: reading them through "
                          "a mapping would fail; free space there");
}

Result<std::unique_ptr<Persist>> open_pmem_file(const std::string& path) {
  auto f = std::make_unique<PmemFile>(path);
  PM_TRY(f->open());
  return std::unique_ptr<Persist>(std::move(f));
}

Result<std::unique_ptr<Persist>> open_read_only_file(const std::string& path) {
  auto f = std::make_unique<ReadOnlyFile>(path);
  PM_TRY(f->map());
  return std::unique_ptr<Persist>(std::move(f));
}

}  // namespace pm
