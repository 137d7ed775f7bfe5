// Userfaultfd async write-protect tracker. The kernel write-protects the
// pages; the first write to a page clears the protection without a signal
// (UFFD_FEATURE_WP_ASYNC), and one PAGEMAP_SCAN ioctl returns the written
// pages and protects them again. Measured here: 0.8-0.9 us per first write.
//
// PAGEMAP_SCAN walks every populated page table entry of the range it is
// given (~0.26 us per MiB), so scanning a large container for a small commit
// would cost more than the commit. Above kChunkModeMin mapped bytes the
// tracker adds a coarse level: 64 KiB chunks are also mprotect'ed read-only;
// the first write to a chunk per commit raises SIGSEGV (~5 us), which records
// the chunk and opens it; commit scans only the recorded chunks. Cost per
// commit is then proportional to the chunks touched, not to the container.
// (2 MiB chunks cost ~45 us per fault and re-arm here: mprotect rewrites
// every populated page table entry of the chunk.)
// In chunk mode, a system call writing into an untouched chunk fails with
// EFAULT unless the range was announced with will_write(), so chunk mode is
// opt-in (Options::uffd_chunk_mode_above). docs/impl.md has the measurements.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "libpm/file_lock.h"
#include "libpm/page_bitmap.h"
#include "libpm/tracker.h"
#include "libpm/write_fault.h"

// Debian bookworm's headers (Linux 6.1) predate these; values from the
// Linux 6.7 UAPI (include/uapi/linux/userfaultfd.h, fs.h).
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef PAGEMAP_SCAN
#define PAGE_IS_WRITTEN (1 << 1)
struct page_region {
  __u64 start, end, categories;
};
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
struct pm_scan_arg {
  __u64 size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
      category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

namespace pm {

namespace {

constexpr uint64_t kChunk = 64ull << 10;
constexpr uint64_t kPage = 4096;

// Mapped size from which chunk mode is on: Options::uffd_chunk_mode_above
// (0: never), or PM_UFFD_CHUNK_MIN_MB, which overrides it (tests use 0 to run
// everything in chunk mode).
uint64_t chunk_mode_min(uint64_t chunks_above) {
  const char* env = std::getenv("PM_UFFD_CHUNK_MIN_MB");
  if (env != nullptr) return std::strtoull(env, nullptr, 10) << 20;
  return chunks_above == 0 ? UINT64_MAX : chunks_above;
}

class UffdTracker final : public DirtyTracker, private WriteFaultSink {
 public:
  UffdTracker(int uffd, int pagemap, uint64_t max_len, uint64_t chunks_above)
      : uffd_(uffd),
        pagemap_(pagemap),
        chunks_(max_len / kChunk + 1),
        chunk_min_(chunk_mode_min(chunks_above)) {}
  ~UffdTracker() override {
    ::close(uffd_);
    ::close(pagemap_);
  }

  TrackerKind kind() const override { return TrackerKind::kUffd; }

  Status track(std::byte* begin, uint64_t new_len) override {
    if (begin_ == nullptr) begin_ = begin;
    if (new_len <= len_) return Status();
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uintptr_t>(begin_ + len_);
    reg.range.len = new_len - len_;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    if (ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) {
      return Status::from_errno("userfaultfd register", errno);
    }
    // No UFFDIO_WRITEPROTECT here: protecting a large unpopulated range
    // builds page tables full of markers (17 ms for 4 GiB at open, as much
    // again at close). A page never protected reads as written; the first
    // commit diffs it (read-populated pages cost one compare) and re-arms it.
    const uint64_t old_len = len_;
    len_ = new_len;
    if (!chunked_ && new_len >= chunk_min_) return enter_chunk_mode(old_len);
    if (chunked_) return protect_chunks(old_len, new_len);
    return Status();
  }

  Status take_dirty(std::vector<PageRun>* out) override { return collect(true, out); }
  Status peek_dirty(std::vector<PageRun>* out) override { return collect(false, out); }

  // A write costs one async fault; announcing it only matters in chunk mode,
  // where it opens the chunks (so system calls may write there).
  void will_write(const void* p, size_t n) override {
    if (!chunked_ || n == 0) return;
    uint64_t a = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(begin_);
    for (uint64_t c = a / kChunk; c <= (a + n - 1) / kChunk; c++) {
      if (!chunks_.test(c)) open_chunk(c);
    }
  }

  // An unprotected page reads as written to PAGEMAP_SCAN.
  Status redirty(const std::vector<PageRun>& runs) override {
    for (const PageRun& r : runs) {
      uffdio_writeprotect wp{};
      wp.range.start = reinterpret_cast<uintptr_t>(begin_ + r.first * kPage);
      wp.range.len = r.count * kPage;
      wp.mode = 0;
      if (ioctl(uffd_, UFFDIO_WRITEPROTECT, &wp) != 0) {
        return Status::from_errno("userfaultfd un-protect", errno);
      }
      for (uint64_t c = r.first * kPage / kChunk; c <= ((r.first + r.count) * kPage - 1) / kChunk;
           c++) {
        chunks_.set(c);
      }
    }
    return Status();
  }

 private:
  void on_write_fault(uintptr_t addr) override {
    open_chunk((addr - reinterpret_cast<uintptr_t>(begin_)) / kChunk);
  }

  // Async-signal-safe: records the chunk, then makes it writable (the order
  // matters: a writer that sees the chunk open must find it recorded). Each
  // isolated open chunk splits a mapping; when vm.max_map_count runs out,
  // larger aligned groups of chunks are opened instead (and all recorded).
  void open_chunk(uint64_t c) {
    for (uint64_t group : {uint64_t{1}, uint64_t{32}, uint64_t{1024}, ~uint64_t{0}}) {
      uint64_t first = group == ~uint64_t{0} ? 0 : c / group * group;
      uint64_t from = first * kChunk;
      uint64_t to = group == ~uint64_t{0} ? len_ : std::min((first + group) * kChunk, len_);
      for (uint64_t k = from / kChunk; k * kChunk < to; k++) chunks_.set(k);
      if (::mprotect(begin_ + from, to - from, PROT_READ | PROT_WRITE) == 0) return;
    }
    static const char msg[] = "libpm: uffd tracker cannot make its mapping writable\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::abort();
  }

  // Switching on at growth: pages written before the switch are known only
  // to uffd, so every existing chunk is recorded as touched (scanned once).
  Status enter_chunk_mode(uint64_t old_len) {
    PM_TRY(region_.attach(reinterpret_cast<uintptr_t>(begin_), this));
    region_.set_end(reinterpret_cast<uintptr_t>(begin_) + len_);
    chunked_ = true;
    for (uint64_t c = 0; c * kChunk < old_len; c++) chunks_.set(c);
    return protect_chunks(old_len, len_);
  }

  Status protect_chunks(uint64_t from, uint64_t to) {
    region_.set_end(reinterpret_cast<uintptr_t>(begin_) + to);
    if (::mprotect(begin_ + from, to - from, PROT_READ) != 0) {
      return Status::from_errno("mprotect (chunk level)", errno);
    }
    return Status();
  }

  Status collect(bool rearm, std::vector<PageRun>* out) {
    if (!chunked_) return scan(0, len_, rearm, out);
    std::vector<PageRun> touched;  // in chunks
    chunks_.collect(rearm, &touched);
    for (const PageRun& t : touched) {
      uint64_t from = t.first * kChunk, to = std::min((t.first + t.count) * kChunk, len_);
      if (from >= to) continue;
      PM_TRY(scan(from, to, rearm, out));
      if (rearm && ::mprotect(begin_ + from, to - from, PROT_READ) != 0) {
        return Status::from_errno("mprotect (chunk re-arm)", errno);
      }
    }
    return Status();
  }

  // Appends written pages of [from, to) (offsets) and re-protects them when
  // `rearm`.
  Status scan(uint64_t from, uint64_t to, bool rearm, std::vector<PageRun>* out) {
    const auto base = reinterpret_cast<uintptr_t>(begin_);
    uint64_t start = base + from;
    const uint64_t end = base + to;
    page_region regions[256];
    while (start < end) {
      pm_scan_arg a{};
      a.size = sizeof a;
      a.flags = rearm ? (PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC) : 0;
      a.start = start;
      a.end = end;
      a.vec = reinterpret_cast<uintptr_t>(regions);
      a.vec_len = 256;
      a.category_mask = PAGE_IS_WRITTEN;
      a.return_mask = PAGE_IS_WRITTEN;
      long n = ioctl(pagemap_, PAGEMAP_SCAN, &a);
      if (n < 0) return Status::from_errno("PAGEMAP_SCAN", errno);
      for (long i = 0; i < n; i++) {
        uint64_t first = (regions[i].start - base) / kPage;
        uint64_t count = (regions[i].end - regions[i].start) / kPage;
        if (!out->empty() && out->back().first + out->back().count == first) {
          out->back().count += count;
        } else {
          out->push_back({first, count});
        }
      }
      // walk_end < end only when the output vector filled up.
      if (a.walk_end <= start) break;
      start = a.walk_end;
    }
    return Status();
  }

  int uffd_;
  int pagemap_;
  PageBitmap chunks_;  // chunk mode: chunks written since the last take_dirty()
  const uint64_t chunk_min_;
  bool chunked_ = false;
  std::byte* begin_ = nullptr;
  uint64_t len_ = 0;
  WriteFaultRegion region_;
};

}  // namespace

Result<std::unique_ptr<DirtyTracker>> make_uffd_tracker(uint64_t max_len,
                                                        uint64_t chunks_above) {
  int uffd = FileLock::above_stdio(
      static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  if (uffd < 0) {
    return Status::from_errno(
        "userfaultfd unavailable (needs CAP_SYS_PTRACE or "
        "vm.unprivileged_userfaultfd=1)",
        errno);
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
  if (ioctl(uffd, UFFDIO_API, &api) != 0) {
    int err = errno;
    ::close(uffd);
    return Status::not_supported(std::string("userfaultfd async write-protect needs Linux 6.7+ (") +
                                 std::strerror(err) + ")");
  }
  int pagemap = FileLock::above_stdio(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap < 0) {
    int err = errno;
    ::close(uffd);
    return Status::from_errno("open /proc/self/pagemap", err);
  }
  return std::unique_ptr<DirtyTracker>(new UffdTracker(uffd, pagemap, max_len, chunks_above));
}

}  // namespace pm
