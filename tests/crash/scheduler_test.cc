// The scheduler's watchdog: an actor blocked outside the sync points fails
// the run, and time the crash harness spends checking images does not
// count as blocked.
#include "crash/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pm::crash {
namespace {

using std::chrono::milliseconds;

TEST(SchedulerDeathTest, AnActorBlockedOutsideTheSyncPointsFailsTheRun) {
  EXPECT_DEATH(
      {
        Scheduler s(1, {}, milliseconds(1500));
        s.run({[] { std::this_thread::sleep_for(milliseconds(4000)); }});
      },
      "no sync point reached for 1 s \\(blocked outside a sync point\\)");
}

TEST(SchedulerTest, TheHarnessCheckingImagesIsNotBlockedTime) {
  // 4 s in the harness's checks, on the actor's thread and on another one
  // (a gleaner's persistence point), with a limit of 1.5 s.
  Scheduler s(1, {}, milliseconds(1500));
  s.run({[] {
    for (int i = 0; i < 4; i++) {
      if (i % 2 == 0) {
        Scheduler::HarnessWork checking;
        std::this_thread::sleep_for(milliseconds(1000));
      } else {
        std::thread([] {
          Scheduler::HarnessWork checking;
          std::this_thread::sleep_for(milliseconds(1000));
        }).join();
      }
    }
  }});
  SUCCEED();
}

}  // namespace
}  // namespace pm::crash
