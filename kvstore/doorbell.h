// Doorbell: wakes the store's sleeping background threads without ever
// making the thread that rings wait.
//
// Why not a condition variable: glibc's pthread_cond_broadcast can block
// until waiters it woke earlier have been scheduled
// (__condvar_quiesce_and_switch_g1). A put rang the background from its
// path, so on two cores a put now and then waited for a gleaner to get a
// CPU: that was the put latency tail (a futex wait in StoreImpl::update
// under `perf record -e sched:sched_switch`). A futex wake never waits.
//
// Use: take seen() before publishing that you sleep, then wait(seen, ms);
// a ring() in between makes wait() return at once. Spurious and timed-out
// returns are normal: callers re-check their condition.
//
// Thread safety: any thread.
#ifndef KVSTORE_DOORBELL_H_
#define KVSTORE_DOORBELL_H_

#include <atomic>
#include <cstdint>

namespace kv {

class Doorbell {
 public:
  uint32_t seen() const { return rings_.load(std::memory_order_acquire); }
  // Sleeps until a ring() after seen() returned `seen`, or ms milliseconds.
  void wait(uint32_t seen, uint32_t ms) const;
  // Wakes every waiter.
  void ring();

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::atomic<uint32_t> rings_{0};
};

}  // namespace kv

#endif  // KVSTORE_DOORBELL_H_
