#include "kvstore/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace kv {

namespace {

long futex(const std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  // A lock-free std::atomic<uint32_t> is the 32-bit word itself.
  return ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, val, timeout, nullptr, 0);
}

}  // namespace

void Doorbell::wait(uint32_t seen, uint32_t ms) const {
  const timespec t{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  // Returns at once (EAGAIN) if a ring came after `seen`; EINTR and
  // ETIMEDOUT are returns like any other.
  (void)futex(&rings_, FUTEX_WAIT_PRIVATE, seen, &t);
}

void Doorbell::ring() {
  rings_.fetch_add(1, std::memory_order_release);
  (void)futex(&rings_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

}  // namespace kv
