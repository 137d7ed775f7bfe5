// mprotect tracker: the working view is mapped read-only; the first write to
// a page raises SIGSEGV, the handler records the page and makes it writable.
// Commit re-protects the dirty pages in whole runs (one mprotect per run, not
// per page). Measured on this VM kind: ~4 us per first write (fault +
// mprotect). A system call that writes into a protected page fails with
// EFAULT instead of faulting: callers announce such ranges with will_write().
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "libpm/page_bitmap.h"
#include "libpm/tracker.h"
#include "libpm/write_fault.h"

namespace pm {

namespace {

constexpr uintptr_t kChunk = 2u << 20;

class MprotectTracker final : public DirtyTracker, private WriteFaultSink {
 public:
  explicit MprotectTracker(uint64_t max_len) : bits_(max_len / 4096) {}

  TrackerKind kind() const override { return TrackerKind::kMprotect; }

  Status track(std::byte* begin, uint64_t new_len) override {
    if (begin_ == nullptr) {
      begin_ = begin;
      PM_TRY(region_.attach(reinterpret_cast<uintptr_t>(begin), this));
    }
    if (new_len <= len_) return Status();
    if (::mprotect(begin_ + len_, new_len - len_, PROT_READ) != 0) {
      return Status::from_errno("mprotect", errno);
    }
    len_ = new_len;
    region_.set_end(reinterpret_cast<uintptr_t>(begin_) + len_);
    return Status();
  }

  Status take_dirty(std::vector<PageRun>* out) override {
    size_t from = out->size();
    bits_.collect(true, out);
    for (size_t i = from; i < out->size(); i++) {
      const PageRun& r = (*out)[i];
      if (::mprotect(begin_ + r.first * 4096, r.count * 4096, PROT_READ) != 0) {
        return Status::from_errno("mprotect (re-arm)", errno);
      }
    }
    return Status();
  }

  Status peek_dirty(std::vector<PageRun>* out) override {
    bits_.collect(false, out);
    return Status();
  }

  Status redirty(const std::vector<PageRun>& runs) override {
    for (const PageRun& r : runs) will_write(begin_ + r.first * 4096, r.count * 4096);
    return Status();
  }

  void will_write(const void* p, size_t n) override {
    if (n == 0) return;
    uintptr_t a = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(begin_);
    uint64_t first = a / 4096, last = (a + n - 1) / 4096;
    bool all_set = true;
    for (uint64_t page = first; page <= last; page++) {
      if (!bits_.test(page)) {
        all_set = false;
        bits_.set(page);
      }
    }
    if (!all_set) unprotect(first, last - first + 1);
  }

  void on_write_fault(uintptr_t addr) override {
    uint64_t page = (addr - reinterpret_cast<uintptr_t>(begin_)) / 4096;
    bits_.set(page);
    unprotect(page, 1);
  }

 private:
  void unprotect(uint64_t first, uint64_t count) {
    if (::mprotect(begin_ + first * 4096, count * 4096, PROT_READ | PROT_WRITE) == 0) return;
    // Out of memory maps (each isolated writable page splits a mapping):
    // open the whole 2 MiB chunk and mark it dirty; commit diffs it anyway.
    uintptr_t b = reinterpret_cast<uintptr_t>(begin_ + first * 4096) & ~(kChunk - 1);
    uintptr_t lo = std::max(b, reinterpret_cast<uintptr_t>(begin_));
    uintptr_t hi = std::min(b + kChunk, reinterpret_cast<uintptr_t>(begin_) + len_);
    for (uintptr_t a = lo; a < hi; a += 4096) {
      bits_.set((a - reinterpret_cast<uintptr_t>(begin_)) / 4096);
    }
    if (::mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE) != 0) {
      static const char msg[] =
          "libpm: mprotect tracker cannot make a page writable (vm.max_map_count "
          "exhausted); use the uffd tracker or commit more often\n";
      (void)!::write(2, msg, sizeof msg - 1);
      ::abort();
    }
  }

  PageBitmap bits_;
  std::byte* begin_ = nullptr;
  uint64_t len_ = 0;
  WriteFaultRegion region_;
};

}  // namespace

std::unique_ptr<DirtyTracker> make_mprotect_tracker(uint64_t max_len) {
  return std::make_unique<MprotectTracker>(max_len);
}

}  // namespace pm
