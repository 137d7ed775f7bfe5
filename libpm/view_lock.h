// ViewLock: a reader-writer lock for the raw region's use of the home view,
// which growth remaps. Readers (every raw-region write, persist and read:
// one per kvstore put) are many and frequent; writers (a remap) are rare.
// A std::shared_mutex would make every reader write the same cache line;
// here a reader touches only its own slot (a "big-reader" lock), and the
// writer waits for every slot to drain.
//
// Correctness is the store-then-load pattern on both sides with seq_cst:
// a reader announces itself, then checks for a writer; the writer announces
// itself, then checks every reader.
#ifndef LIBPM_VIEW_LOCK_H_
#define LIBPM_VIEW_LOCK_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace pm {

class ViewLock {
 public:
  // Returns the slot to pass to unlock_shared.
  int lock_shared() const {
    const int i = slot_of_this_thread();
    for (;;) {
      slots_[i].readers.fetch_add(1, std::memory_order_seq_cst);
      if (!writer_.load(std::memory_order_seq_cst)) return i;
      slots_[i].readers.fetch_sub(1, std::memory_order_seq_cst);
      while (writer_.load(std::memory_order_acquire)) std::this_thread::yield();
    }
  }
  void unlock_shared(int slot) const {
    slots_[slot].readers.fetch_sub(1, std::memory_order_release);
  }

  void lock() {
    writer_mu_.lock();
    writer_.store(true, std::memory_order_seq_cst);
    for (const Slot& s : slots_) {
      while (s.readers.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    }
  }
  void unlock() {
    writer_.store(false, std::memory_order_release);
    writer_mu_.unlock();
  }

  class Shared {
   public:
    explicit Shared(const ViewLock& l) : l_(l), slot_(l.lock_shared()) {}
    ~Shared() { l_.unlock_shared(slot_); }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;

   private:
    const ViewLock& l_;
    int slot_;
  };

 private:
  static constexpr int kSlots = 64;
  struct alignas(64) Slot {
    mutable std::atomic<int64_t> readers{0};
  };
  static int slot_of_this_thread() {
    static std::atomic<int> next{0};
    thread_local int slot = next.fetch_add(1, std::memory_order_relaxed) % kSlots;
    return slot;
  }

  Slot slots_[kSlots];
  std::atomic<bool> writer_{false};
  std::mutex writer_mu_;
};

}  // namespace pm

#endif  // LIBPM_VIEW_LOCK_H_
