#include "kvstore/counters.h"

#include <bit>

namespace kv {

namespace {

static_assert(kThreadLines == 64, "one bit per line in g_taken");
std::atomic<uint64_t> g_taken{0};  // bit i: line i has an owner

// Trivially destructible, so add() stays safe in destructors that run after
// the Owner below (it then falls back to the shared line).
thread_local int t_line = -1;

struct Owner {
  ~Owner() {
    if (t_line >= 0 && t_line < kThreadLines) {
      // Release: the next owner's first load sees this thread's last store.
      g_taken.fetch_and(~(uint64_t{1} << t_line), std::memory_order_release);
    }
    t_line = kThreadLines;
  }
};
thread_local Owner t_owner;

int claim() {
  uint64_t taken = g_taken.load(std::memory_order_relaxed);
  while (taken != ~uint64_t{0}) {
    const int i = std::countr_one(taken);
    if (g_taken.compare_exchange_weak(taken, taken | (uint64_t{1} << i),
                                      std::memory_order_acquire, std::memory_order_relaxed)) {
      return i;
    }
  }
  return kThreadLines;
}

}  // namespace

int this_thread_line() {
  if (t_line >= 0) return t_line;
  (void)&t_owner;  // constructs the owner, whose destructor hands the line back
  t_line = claim();
  return t_line;
}

}  // namespace kv
