// mprotect tracker: the working view is mapped read-only; the first write to
// a page raises SIGSEGV, the handler records the page and makes it writable.
// Commit re-protects the dirty pages in whole runs (one mprotect per run, not
// per page). Measured on this VM kind: ~10 us per first write, 2.7 us per
// mprotect call. A system call that writes into a protected page fails with
// EFAULT instead of faulting: callers announce such ranges with will_write().
//
// The handler chains to the previously installed SIGSEGV action for any
// address outside a tracked region (and so cooperates with sanitizers and
// language runtimes that rely on SIGSEGV).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "libpm/page_bitmap.h"
#include "libpm/tracker.h"

namespace pm {

namespace {

class MprotectTracker;

// Regions that the signal handler serves. Lock-free for the handler; slots
// are claimed and released under g_slots_mu.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<MprotectTracker*> tracker{nullptr};
};
constexpr int kMaxSlots = 64;
std::array<Slot, kMaxSlots> g_slots;
std::mutex g_slots_mu;
struct sigaction g_previous;
bool g_installed = false;

constexpr uintptr_t kChunk = 2u << 20;

void chain_to_previous(int sig, siginfo_t* info, void* ctx) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // Returning re-executes the faulting access, which now gets the default
    // action (a crash with the usual core dump).
    signal(sig, SIG_DFL);
  } else {
    g_previous.sa_handler(sig);
  }
}

class MprotectTracker final : public DirtyTracker {
 public:
  explicit MprotectTracker(uint64_t max_len) : bits_(max_len / 4096) {}
  ~MprotectTracker() override {
    if (slot_ != nullptr) {
      std::lock_guard<std::mutex> l(g_slots_mu);
      slot_->tracker.store(nullptr);
      slot_->end.store(0);
      slot_->begin.store(0);
    }
  }

  TrackerKind kind() const override { return TrackerKind::kMprotect; }

  Status track(std::byte* begin, uint64_t new_len) override {
    if (slot_ == nullptr) {
      begin_ = begin;
      PM_TRY(claim_slot());
    }
    if (new_len <= len_) return Status();
    if (::mprotect(begin_ + len_, new_len - len_, PROT_READ) != 0) {
      return Status::from_errno("mprotect", errno);
    }
    len_ = new_len;
    slot_->end.store(reinterpret_cast<uintptr_t>(begin_) + len_);
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

  // Called from the signal handler.
  void on_fault(uintptr_t addr) {
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

  static void on_signal(int sig, siginfo_t* info, void* ctx) {
    auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& s : g_slots) {
      if (addr >= s.begin.load(std::memory_order_acquire) &&
          addr < s.end.load(std::memory_order_acquire)) {
        MprotectTracker* t = s.tracker.load(std::memory_order_acquire);
        if (t != nullptr) {
          t->on_fault(addr);
          return;
        }
      }
    }
    chain_to_previous(sig, info, ctx);
  }

  Status claim_slot() {
    std::lock_guard<std::mutex> l(g_slots_mu);
    if (!g_installed) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = &MprotectTracker::on_signal;
      sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
      sigemptyset(&sa.sa_mask);
      if (sigaction(SIGSEGV, &sa, &g_previous) != 0) {
        return Status::from_errno("sigaction(SIGSEGV)", errno);
      }
      g_installed = true;
    }
    for (Slot& s : g_slots) {
      if (s.tracker.load() == nullptr) {
        s.end.store(0);
        s.begin.store(reinterpret_cast<uintptr_t>(begin_));
        s.tracker.store(this);
        slot_ = &s;
        return Status();
      }
    }
    return Status::busy("too many containers open with the mprotect tracker (limit 64)");
  }

  PageBitmap bits_;
  std::byte* begin_ = nullptr;
  uint64_t len_ = 0;
  Slot* slot_ = nullptr;
};

}  // namespace

std::unique_ptr<DirtyTracker> make_mprotect_tracker(uint64_t max_len) {
  return std::make_unique<MprotectTracker>(max_len);
}

}  // namespace pm
