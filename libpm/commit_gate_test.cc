#include "libpm/commit_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace pm {
namespace {

TEST(CommitGateTest, EnterIsReentrantAndTracksTheThread) {
  CommitGate g;
  EXPECT_FALSE(g.held_by_this_thread());
  g.enter();
  g.enter();
  EXPECT_TRUE(g.held_by_this_thread());
  g.leave();
  EXPECT_TRUE(g.held_by_this_thread());
  g.leave();
  EXPECT_FALSE(g.held_by_this_thread());
  ClosedGate c(g);  // does not block: nobody inside
}

// An unbalanced leave changes nothing (a closer would wait for ever); a
// gate destroyed while this thread was inside leaves no depth to a gate
// made later, at the same address or not.
TEST(CommitGateTest, MisuseNeitherWrapsNorOutlivesTheGate) {
  {
    CommitGate g;
    EXPECT_FALSE(g.leave());
    ClosedGate c(g);  // does not block
  }
  for (int i = 0; i < 20; i++) {
    auto g = std::make_unique<CommitGate>();
    EXPECT_FALSE(g->held_by_this_thread());
    g->enter();
  }
}

// While the gate is closed no mutator is inside; commits are not starved by
// a stream of mutators.
TEST(CommitGateTest, ClosedGateExcludesMutators) {
  CommitGate g;
  std::atomic<int> inside{0};
  std::atomic<bool> stop{false}, violated{false};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) {
    ts.emplace_back([&] {
      while (!stop) {
        g.enter();
        inside++;
        inside--;
        g.leave();
      }
    });
  }
  for (int i = 0; i < 2000; i++) {
    ClosedGate c(g);
    if (inside.load() != 0) violated = true;
  }
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_FALSE(violated);
}

}  // namespace
}  // namespace pm
