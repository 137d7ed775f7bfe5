#include "kvstore/counters.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kv {
namespace {

TEST(CountersTest, SumsEveryThreadsAdds) {
  Counters c;
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; i++) c.add(Counter::kGets);
      c.add(Counter::kPuts, 3);
    });
  }
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(c.value(Counter::kGets), 80000u);
  EXPECT_EQ(c.value(Counter::kPuts), 24u);
  EXPECT_EQ(c.value(Counter::kMisses), 0u);
}

// More live threads than lines: the rest share one line and still count.
// Lines handed back by exited threads keep their sums for the next owner.
TEST(CountersTest, MoreThreadsThanLinesAndLinesReused) {
  Counters c;
  for (int round = 0; round < 3; round++) {
    std::vector<std::thread> ts;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int t = 0; t < kThreadLines + 16; t++) {
      ts.emplace_back([&] {
        c.add(Counter::kApplied);  // claims a line (or the shared one) while all live
        ready++;
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < 100; i++) c.add(Counter::kApplied);
      });
    }
    while (ready.load() < kThreadLines + 16) std::this_thread::yield();
    go = true;
    for (std::thread& t : ts) t.join();
  }
  EXPECT_EQ(c.value(Counter::kApplied), 3u * (kThreadLines + 16) * 101);
}

}  // namespace
}  // namespace kv
