#include "crash/scheduler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace pm::crash {

namespace {

thread_local Scheduler* t_scheduler = nullptr;
thread_local int t_actor = -1;
// The run in progress, for HarnessWork on threads that are not actors.
std::atomic<Scheduler*> g_running{nullptr};

// Every actor blocked this many times in a row, with no actor making
// progress in between: nobody can run.
constexpr uint64_t kDeadlockTurns = 20000;

}  // namespace

Scheduler::Scheduler(uint64_t seed, Observer observer, std::chrono::nanoseconds blocked_limit)
    : rng_(seed), observer_(std::move(observer)), blocked_limit_(blocked_limit) {}

int Scheduler::current() { return t_scheduler != nullptr ? t_actor : -1; }

void Scheduler::hook(const char* name, sync_point::Kind kind) {
  if (t_scheduler != nullptr && t_actor >= 0) t_scheduler->on_point(t_actor, name, kind);
}

Scheduler::HarnessWork::HarnessWork()
    : s_(g_running.load()), start_(std::chrono::steady_clock::now()) {}

Scheduler::HarnessWork::~HarnessWork() {
  if (s_ == nullptr) return;
  const auto spent = std::chrono::steady_clock::now() - start_;
  s_->harness_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count());
}

void Scheduler::run(const std::vector<std::function<void()>>& fns) {
  if (fns.empty()) return;
  actors_.assign(fns.size(), Actor{});
  live_ = static_cast<int>(fns.size());
  blocked_in_a_row_ = 0;
  stopping_ = false;
  running_ = static_cast<int>(rng_() % fns.size());
  sync_point::Hook previous = sync_point::g_hook.exchange(&Scheduler::hook);
  g_running.store(this);
  std::thread dog([this] { watchdog(); });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fns.size(); i++) {
    threads.emplace_back([this, i, &fns] {
      t_scheduler = this;
      t_actor = static_cast<int>(i);
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return running_ == static_cast<int>(i); });
      }
      fns[i]();
      finish(static_cast<int>(i));
      t_scheduler = nullptr;
      t_actor = -1;
    });
  }
  for (std::thread& t : threads) t.join();
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  dog.join();
  g_running.store(nullptr);
  sync_point::g_hook.store(previous);
}

void Scheduler::on_point(int me, const char* name, sync_point::Kind kind) {
  if (observer_) observer_(me, name, kind);
  if (kind == sync_point::Kind::kMark) return;
  std::unique_lock<std::mutex> l(mu_);
  progress_++;
  actors_[me].last = name;
  const bool blocked = kind == sync_point::Kind::kBlocked;
  if (!blocked) {
    blocked_in_a_row_ = 0;
  } else if (++blocked_in_a_row_ > kDeadlockTurns * static_cast<uint64_t>(live_)) {
    fail("every actor waits for another (deadlock)");
  }
  const int next = choose(me, blocked);
  if (next != me) hand_over(l, me, next);
}

int Scheduler::choose(int me, bool blocked) {
  // A yield keeps running with even odds, else any live actor; a blocked
  // actor always lets another one run (if there is one).
  if (!blocked && rng_() % 2 == 0) return me;
  std::vector<int> others;
  for (int i = 0; i < static_cast<int>(actors_.size()); i++) {
    if (i != me && !actors_[i].done) others.push_back(i);
  }
  if (others.empty()) return me;
  return others[rng_() % others.size()];
}

void Scheduler::hand_over(std::unique_lock<std::mutex>& l, int me, int next) {
  switches_++;
  running_ = next;
  cv_.notify_all();
  cv_.wait(l, [&] { return running_ == me; });
}

void Scheduler::finish(int me) {
  std::lock_guard<std::mutex> l(mu_);
  progress_++;
  blocked_in_a_row_ = 0;
  actors_[me].done = true;
  actors_[me].last = "done";
  if (--live_ > 0) {
    running_ = choose(me, true);
    switches_++;
  }
  cv_.notify_all();
}

void Scheduler::fail(const std::string& why) {
  std::fprintf(stderr, "scheduler: %s\n", why.c_str());
  for (size_t i = 0; i < actors_.size(); i++) {
    std::fprintf(stderr, "  actor %zu%s: last at %s\n", i,
                 static_cast<int>(i) == running_ ? " (running)" : "", actors_[i].last);
  }
  std::fflush(stderr);
  std::abort();
}

void Scheduler::watchdog() {
  // Blocked time: wall time since the last point, less the harness's work.
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> l(mu_);
  uint64_t seen = progress_;
  Clock::time_point since = Clock::now();
  int64_t harness_then = harness_ns_.load();
  while (!cv_.wait_for(l, std::chrono::seconds(1), [&] { return stopping_; })) {
    if (progress_ != seen) {
      seen = progress_;
      since = Clock::now();
      harness_then = harness_ns_.load();
      continue;
    }
    const std::chrono::nanoseconds harness(harness_ns_.load() - harness_then);
    const auto blocked = Clock::now() - since - harness;
    if (blocked > blocked_limit_) {
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(blocked_limit_).count();
      fail("no sync point reached for " + std::to_string(secs) +
           " s (blocked outside a sync point)");
    }
  }
}

}  // namespace pm::crash
