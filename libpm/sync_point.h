// Sync points: named places in concurrent library code where a test
// scheduler may switch threads (after RocksDB's TEST_SYNC_POINT).
//
// The crash harness runs several threads one at a time and switches among
// them only here, so that a seed picks an interleaving and replays it
// exactly (tests/crash/scheduler.h). In production no hook is installed and
// each point costs one relaxed load and a predictable branch.
//
// Rules for placing points, which keep a scheduled run free of deadlocks:
//   - point() only where the thread holds no lock that another thread could
//     wait for without a sync point (bucket spin locks, the commit gate);
//   - mark() anywhere: it never switches, it only tells the hook where the
//     thread is (the harness learns the order in which records are logged);
//   - a wait for another thread goes through acquire() / wait() / spin(),
//     which in a scheduled run poll and let the other threads run.
//
// Thread safety: every function, from any thread.
#ifndef LIBPM_SYNC_POINT_H_
#define LIBPM_SYNC_POINT_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace pm::sync_point {

enum class Kind {
  kYield,    // the thread may be switched out here
  kBlocked,  // the thread waits for another one: switch it out
  kMark,     // observed only; never switches
};

using Hook = void (*)(const char* name, Kind kind);

// Set by tests only.
extern std::atomic<Hook> g_hook;

inline Hook hook() { return g_hook.load(std::memory_order_relaxed); }

inline void point(const char* name) {
  if (Hook h = hook()) h(name, Kind::kYield);
}

inline void mark(const char* name) {
  if (Hook h = hook()) h(name, Kind::kMark);
}

// One turn of a wait loop: yields the CPU, or the baton of a scheduled run.
inline void spin(const char* name) {
  if (Hook h = hook()) {
    h(name, Kind::kBlocked);
  } else {
    std::this_thread::yield();
  }
}

// Locks l (a unique_lock or shared_lock over its mutex, not yet locked).
template <typename Lock>
void acquire(Lock& l, const char* name) {
  if (hook() == nullptr) {
    l.lock();
    return;
  }
  while (!l.try_lock()) spin(name);
}

// cv.wait(l, pred), polling under a scheduler.
template <typename Pred>
void wait(std::condition_variable& cv, std::unique_lock<std::mutex>& l, const char* name,
          Pred pred) {
  if (hook() == nullptr) {
    cv.wait(l, pred);
    return;
  }
  while (!pred()) {
    l.unlock();
    spin(name);
    l.lock();
  }
}

}  // namespace pm::sync_point

#endif  // LIBPM_SYNC_POINT_H_
