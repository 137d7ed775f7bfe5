// CommitGate: mutators enter shared (re-entrant per thread); commit and abort
// close the gate, wait for the mutators to leave, and run alone. New mutators
// wait while the gate is closed, so a stream of mutators cannot starve a
// commit (unlike a reader-preferring rwlock).
//
// Thread safety: all methods may be called from any thread.
#ifndef LIBPM_COMMIT_GATE_H_
#define LIBPM_COMMIT_GATE_H_

#include <atomic>
#include <cstdint>
#include <mutex>

namespace pm {

class CommitGate {
 public:
  void enter();
  // False (and nothing changed) when this thread is not inside the gate:
  // an unbalanced leave must not wrap the count a closer waits on.
  bool leave();
  // True if the calling thread is inside the gate (would deadlock in close()).
  bool held_by_this_thread() const;

  // Exclusive side. REQUIRES: !held_by_this_thread().
  void close();
  void open();

 private:
  int& depth() const;

  // Names this gate in the threads' depth tables: never reused, unlike an
  // address, so a gate destroyed while a thread was inside it (a container
  // closed amid a mutation) leaves no depth for a later gate to inherit.
  const uint64_t id_ = next_id_.fetch_add(1, std::memory_order_relaxed);
  static inline std::atomic<uint64_t> next_id_{1};
  std::mutex closer_mu_;  // one closer at a time
  std::atomic<uint32_t> closed_{0};
  std::atomic<uint32_t> active_{0};
};

// Holds the gate closed for a scope.
class ClosedGate {
 public:
  explicit ClosedGate(CommitGate& g) : g_(g) { g_.close(); }
  ~ClosedGate() { g_.open(); }
  ClosedGate(const ClosedGate&) = delete;
  ClosedGate& operator=(const ClosedGate&) = delete;

 private:
  CommitGate& g_;
};

}  // namespace pm

#endif  // LIBPM_COMMIT_GATE_H_
