#include "libpm/commit_gate.h"

#include <utility>
#include <vector>

namespace pm {

int& CommitGate::depth() const {
  // Per thread, per gate. A thread is inside few gates at once, so a short
  // vector beats a hash map.
  thread_local std::vector<std::pair<uint64_t, int>> depths;
  for (auto& d : depths) {
    if (d.first == id_) return d.second;
  }
  for (auto& d : depths) {
    if (d.second == 0) {
      d.first = id_;
      return d.second;
    }
  }
  depths.emplace_back(id_, 0);
  return depths.back().second;
}

bool CommitGate::held_by_this_thread() const { return depth() > 0; }

void CommitGate::enter() {
  int& d = depth();
  if (d++ > 0) return;
  for (;;) {
    // atomic::wait costs a global waiter-table update even when the value
    // already differs (libstdc++ 12): look first.
    if (closed_.load() != 0) closed_.wait(1);
    // seq_cst pairs with close(): either close() sees this increment, or
    // this thread sees closed_ == 1 and backs out.
    active_.fetch_add(1);
    if (closed_.load() == 0) return;
    if (active_.fetch_sub(1) == 1) active_.notify_all();
  }
}

bool CommitGate::leave() {
  int& d = depth();
  if (d == 0) return false;
  if (--d > 0) return true;
  if (active_.fetch_sub(1) == 1 && closed_.load() != 0) active_.notify_all();
  return true;
}

void CommitGate::close() {
  closer_mu_.lock();
  closed_.store(1);
  for (uint32_t a = active_.load(); a != 0; a = active_.load()) active_.wait(a);
}

void CommitGate::open() {
  closed_.store(0);
  closed_.notify_all();
  closer_mu_.unlock();
}

}  // namespace pm
