#include "libpm/write_fault.h"

#include <signal.h>

#include <array>
#include <cerrno>
#include <atomic>
#include <cstring>
#include <mutex>

namespace pm {

namespace {

// Lock-free for the handler; claimed and released under g_mu.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<WriteFaultSink*> sink{nullptr};
};
constexpr int kMaxSlots = 64;
std::array<Slot, kMaxSlots> g_slots;
std::mutex g_mu;
struct sigaction g_previous;
bool g_installed = false;

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

void on_signal(int sig, siginfo_t* info, void* ctx) {
  // The interrupted code may be between a failing call and its read of
  // errno; the sink's mprotect must not change it under that code.
  const int saved_errno = errno;
  struct RestoreErrno {
    int e;
    ~RestoreErrno() { errno = e; }
  } restore{saved_errno};
  auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    if (addr >= s.begin.load(std::memory_order_acquire) &&
        addr < s.end.load(std::memory_order_acquire)) {
      WriteFaultSink* sink = s.sink.load(std::memory_order_acquire);
      if (sink != nullptr) {
        sink->on_write_fault(addr);
        return;
      }
    }
  }
  chain_to_previous(sig, info, ctx);
}

}  // namespace

Status WriteFaultRegion::attach(uintptr_t begin, WriteFaultSink* sink) {
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_installed) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = &on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_previous) != 0) {
      return Status::from_errno("sigaction(SIGSEGV)", errno);
    }
    g_installed = true;
  }
  for (int i = 0; i < kMaxSlots; i++) {
    Slot& s = g_slots[static_cast<size_t>(i)];
    if (s.sink.load() == nullptr) {
      s.end.store(0);
      s.begin.store(begin);
      s.sink.store(sink);
      slot_ = i;
      return Status();
    }
  }
  return Status::busy("too many containers with fault-based tracking open (limit 64)");
}

void WriteFaultRegion::set_end(uintptr_t end) {
  g_slots[static_cast<size_t>(slot_)].end.store(end, std::memory_order_release);
}

WriteFaultRegion::~WriteFaultRegion() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> l(g_mu);
  Slot& s = g_slots[static_cast<size_t>(slot_)];
  s.end.store(0);
  s.begin.store(0);
  s.sink.store(nullptr);
}

}  // namespace pm
