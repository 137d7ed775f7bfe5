// Scheduler: runs several actors (functions), each on its own thread, one
// at a time, and switches between them only at sync points
// (libpm/sync_point.h). Each switch is drawn from a seeded generator, so a
// seed names one interleaving and running it again replays it exactly: the
// crash harness uses it to put foreground updates in flight while gleans,
// epochs and group syncs run, and to crash at every persistence point of
// such a schedule.
//
// A run that cannot go on (every actor waits for another, or an actor
// blocks outside the sync points for 60 s) prints each actor's last point
// and aborts: that is a deadlock in the code under test or a sync point in
// the wrong place, and it must fail loudly. Time the crash harness spends
// checking crash images (HarnessWork) does not count toward the 60 s: one
// sync of a large store holds many persistence points, each checked.
//
// Thread safety: one run at a time per process.
#ifndef TESTS_CRASH_SCHEDULER_H_
#define TESTS_CRASH_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "libpm/sync_point.h"

namespace pm::crash {

class Scheduler {
 public:
  // Sees every point and mark of the running actor, on its thread, before
  // any switch (the other actors are parked: no locking needed).
  using Observer = std::function<void(int actor, const char* name, sync_point::Kind kind)>;

  // `blocked_limit`: how long an actor may block outside the sync points
  // (tests of the watchdog shorten it).
  explicit Scheduler(uint64_t seed, Observer observer = {},
                     std::chrono::nanoseconds blocked_limit = std::chrono::seconds(60));
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs every actor to completion.
  void run(const std::vector<std::function<void()>>& actors);

  // The calling thread's actor index in the current run, or -1.
  static int current();

  uint64_t switches() const { return switches_; }

  // While one lives, on any thread, the harness works for the run in
  // progress (if any): the watchdog does not count that time as blocked.
  class HarnessWork {
   public:
    HarnessWork();
    ~HarnessWork();
    HarnessWork(const HarnessWork&) = delete;
    HarnessWork& operator=(const HarnessWork&) = delete;

   private:
    Scheduler* s_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  struct Actor {
    bool done = false;
    const char* last = "start";
  };
  static void hook(const char* name, sync_point::Kind kind);
  void on_point(int me, const char* name, sync_point::Kind kind);
  // Another live actor, or `me` (kYield may keep running).
  int choose(int me, bool blocked);
  void hand_over(std::unique_lock<std::mutex>& l, int me, int next);
  void finish(int me);
  [[noreturn]] void fail(const std::string& why);
  void watchdog();

  std::mt19937_64 rng_;
  Observer observer_;
  std::chrono::nanoseconds blocked_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Actor> actors_;
  int running_ = -1;
  int live_ = 0;
  uint64_t blocked_in_a_row_ = 0;
  uint64_t switches_ = 0;
  uint64_t progress_ = 0;  // bumped at every point (watchdog)
  std::atomic<int64_t> harness_ns_{0};  // HarnessWork's time, in total
  bool stopping_ = false;
};

}  // namespace pm::crash

#endif  // TESTS_CRASH_SCHEDULER_H_
