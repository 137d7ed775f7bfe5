#include "kvstore/reclaimer.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace kv {

namespace {

constexpr int kSlots = 1024;
constexpr size_t kBatch = 128;  // retire this many, then try to advance and free

struct Retired {
  void* p;
  Reclaimer::Deleter fn;
  uint64_t epoch;  // global epoch when retired
};

struct alignas(64) Slot {
  std::atomic<uint64_t> epoch{0};  // 0: outside every guard
  std::atomic<bool> used{false};
};

// Entering a guard must order the thread's epoch store before its pointer
// loads: a full fence, 20-30 cycles on every get and put. Instead the rare
// side (advancing the epoch, once per kBatch retires) makes every running
// thread of the process execute one, with membarrier(2); a guard then needs
// only a compiler barrier. Where the kernel lacks it (and under TSan, which
// does not model it), guards fence as before.
bool use_membarrier() {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  static const bool ok =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return ok;
#endif
}

struct Domain {
  const bool asymmetric = use_membarrier();
  std::atomic<uint64_t> global{1};
  Slot slots[kSlots];
  std::atomic<int> high{0};  // slots in use are below this
  std::mutex orphan_mu;
  std::vector<Retired> orphans;  // from threads that exited

  // Advances the global epoch if every thread inside a guard has seen it.
  void try_advance() {
    // Every guard entered before this point is now visible in its slot, and
    // every thread entering one later reads pointers only after it.
    if (asymmetric) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    uint64_t e = global.load();
    int n = high.load();
    for (int i = 0; i < n; i++) {
      uint64_t x = slots[i].epoch.load();
      if (x != 0 && x != e) return;
    }
    global.compare_exchange_strong(e, e + 1);
  }

  // Frees the entries retired two epochs ago or earlier.
  static void free_old(std::vector<Retired>* list, uint64_t now) {
    size_t keep = 0;
    for (Retired& r : *list) {
      if (r.epoch + 2 <= now) {
        r.fn(r.p);
      } else {
        (*list)[keep++] = r;
      }
    }
    list->resize(keep);
  }
};

Domain& domain() {
  static Domain* d = new Domain;  // never destroyed: threads may outlive statics
  return *d;
}

struct ThreadState {
  int slot = -1;
  int depth = 0;
  std::vector<Retired> limbo;

  Slot& my_slot() {
    if (slot < 0) {
      Domain& d = domain();
      for (int i = 0;; i = (i + 1) % kSlots) {
        bool f = false;
        if (d.slots[i].used.compare_exchange_strong(f, true)) {
          slot = i;
          int h = d.high.load();
          while (h < i + 1 && !d.high.compare_exchange_weak(h, i + 1)) {
          }
          break;
        }
        if (i == kSlots - 1) std::this_thread::yield();
      }
    }
    return domain().slots[slot];
  }

  ~ThreadState() {
    Domain& d = domain();
    if (!limbo.empty()) {
      std::lock_guard<std::mutex> l(d.orphan_mu);
      d.orphans.insert(d.orphans.end(), limbo.begin(), limbo.end());
    }
    if (slot >= 0) {
      d.slots[slot].epoch.store(0);
      d.slots[slot].used.store(false);
    }
  }
};

thread_local ThreadState t_state;

}  // namespace

Reclaimer::Guard::Guard() {
  ThreadState& t = t_state;
  if (t.depth++ == 0) {
    Slot& s = t.my_slot();
    Domain& d = domain();
    if (d.asymmetric) {
      // The fence this needs is issued by try_advance (see use_membarrier).
      s.epoch.store(d.global.load(std::memory_order_relaxed), std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      // An exchange, not a store: a full barrier, so the epoch is visible
      // before any pointer this thread reads next.
      s.epoch.exchange(d.global.load(), std::memory_order_seq_cst);
    }
  }
}

Reclaimer::Guard::~Guard() {
  ThreadState& t = t_state;
  if (--t.depth == 0) domain().slots[t.slot].epoch.store(0, std::memory_order_release);
}

void Reclaimer::retire(void* p, Deleter fn) {
  ThreadState& t = t_state;
  Domain& d = domain();
  // The unlinking store that made p unreachable must be visible before we
  // read the epoch: without the fence the load may pass the store (x86
  // reorders a store with a later load), we would stamp p with an epoch
  // older than a reader that still found it, and free it under that reader.
#if defined(__SANITIZE_THREAD__)
  // TSan does not model fences (GCC refuses one under -Werror=tsan): a
  // seq_cst read-modify-write orders the same on x86, and TSan sees it.
  const uint64_t epoch = d.global.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t epoch = d.global.load();
#endif
  // Callers retire with bucket locks held and updates half installed:
  // nothing may throw here. Out of DRAM for the list, p is never freed.
  try {
    t.limbo.push_back({p, fn, epoch});
  } catch (const std::bad_alloc&) {
    return;
  }
  if (t.limbo.size() < kBatch) return;
  d.try_advance();
  Domain::free_old(&t.limbo, d.global.load());
  if (t.limbo.size() >= kBatch * 8) {
    // Someone sits in a guard for long: keep advancing as it moves on.
    std::this_thread::yield();
  }
}

uint64_t Reclaimer::collect() {
  Domain& d = domain();
  ThreadState& t = t_state;
  for (int i = 0; i < 3; i++) d.try_advance();
  Domain::free_old(&t.limbo, d.global.load());
  std::lock_guard<std::mutex> l(d.orphan_mu);
  Domain::free_old(&d.orphans, d.global.load());
  return t.limbo.size() + d.orphans.size();
}

}  // namespace kv
