// Statistics counters that cost a get or a put no shared cache line.
//
// A counter bumped by every operation on one atomic line makes that line
// bounce between cores: with two threads, moving the store's counters off
// shared lines raised gets at 2% puts from 3.25 to 3.87 M/s (`pm bench kv`,
// zipfian, 1M keys; docs/impl.md). Here each thread owns
// a line of its own for as long as it lives and adds with a plain load and
// store (no locked instruction); stats() sums the lines. Threads beyond
// kThreadLines share one more line, with atomic adds.
//
// Thread safety: add() from any thread; value() from any thread, seeing
// every add that happened before it and any subset of those racing with it.
#ifndef KVSTORE_COUNTERS_H_
#define KVSTORE_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace kv {

enum class Counter {
  kPuts,
  kRemoves,
  kGets,
  kMisses,
  kApplied,
  kCollapsed,
  kEpochs,
  kWriterWaits,
};
inline constexpr int kCounters = 8;

// The line this thread owns (0 .. kThreadLines-1), or kThreadLines when
// every line is taken. A line is handed back when its thread exits; the next
// owner goes on from the sum it holds.
inline constexpr int kThreadLines = 64;
int this_thread_line();

class Counters {
 public:
  void add(Counter c, uint64_t n = 1) {
    const int t = this_thread_line();
    std::atomic<uint64_t>& v = lines_[t].v[static_cast<int>(c)];
    if (t < kThreadLines) {
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      v.fetch_add(n, std::memory_order_relaxed);
    }
  }

  uint64_t value(Counter c) const {
    uint64_t sum = 0;
    for (const Line& l : lines_) sum += l.v[static_cast<int>(c)].load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> v[kCounters] = {};
  };
  Line lines_[kThreadLines + 1];
};

}  // namespace kv

#endif  // KVSTORE_COUNTERS_H_
