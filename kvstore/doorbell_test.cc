#include "kvstore/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kv {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(DoorbellTest, ARingAfterSeenIsNotLost) {
  Doorbell bell;
  const uint32_t seen = bell.seen();
  bell.ring();
  const auto t = Clock::now();
  bell.wait(seen, 60'000);  // must return at once: the count moved
  EXPECT_LT(seconds_since(t), 10.0);
}

TEST(DoorbellTest, ARingWakesASleeper) {
  Doorbell bell;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    bell.wait(bell.seen(), 60'000);
    woke = true;
  });
  const auto t = Clock::now();
  // Ring until it wakes: a ring before the sleeper took its count would
  // leave it asleep, which is the caller's race to close (StoreImpl does).
  while (!woke && seconds_since(t) < 30) {
    bell.ring();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  sleeper.join();
  EXPECT_TRUE(woke.load());
  EXPECT_LT(seconds_since(t), 30.0);
}

}  // namespace
}  // namespace kv
