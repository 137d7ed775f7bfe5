#include "kvstore/item_arena.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace kv::item_arena {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUseRegions = false;
#else
constexpr bool kUseRegions = true;
#endif

constexpr size_t kRegion = size_t{2} << 20;
constexpr size_t kClasses = kMaxSmall / 16 + 1;

struct FreeItem {
  FreeItem* next;
};

struct Arena {
  std::mutex mu;
  FreeItem* free[kClasses] = {};
  char* bump = nullptr;
  char* end = nullptr;
  std::vector<void*> regions;
  size_t live = 0;  // bytes handed out and not released
};

Arena& arena() {
  static Arena* a = [] {
    auto* made = new Arena;  // never destroyed: threads may outlive statics
    pthread_atfork([] { arena().mu.lock(); }, [] { arena().mu.unlock(); },
                   [] { arena().mu.unlock(); });
    return made;
  }();
  return *a;
}

// One region, 2 MiB-aligned so that the kernel can back it with one huge
// page. nullptr when out of memory.
void* map_region() {
  void* m = mmap(nullptr, 2 * kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (at + kRegion - 1) & ~(kRegion - 1);
  if (aligned > at) munmap(m, aligned - at);
  if (aligned + kRegion < at + 2 * kRegion) {
    munmap(reinterpret_cast<void*>(aligned + kRegion), at + 2 * kRegion - aligned - kRegion);
  }
  void* r = reinterpret_cast<void*>(aligned);
  (void)madvise(r, kRegion, MADV_HUGEPAGE);
  return r;
}

// Every item is freed: the regions go back to the system.
// REQUIRES: a.mu held.
void unmap_all(Arena& a) {
  for (void* r : a.regions) munmap(r, kRegion);
  a.regions.clear();
  for (FreeItem*& f : a.free) f = nullptr;
  a.bump = a.end = nullptr;
}

}  // namespace

void* allocate(size_t bytes) {
  if (!kUseRegions || bytes > kMaxSmall) return std::malloc(bytes);
  Arena& a = arena();
  std::lock_guard l(a.mu);
  FreeItem*& head = a.free[bytes / 16];
  void* p = head;
  if (p != nullptr) {
    head = head->next;
  } else {
    if (static_cast<size_t>(a.end - a.bump) < bytes) {
      // The rest of the region (under kMaxSmall bytes) is left unused.
      void* r = map_region();
      if (r == nullptr) return nullptr;
      try {
        a.regions.push_back(r);
      } catch (const std::bad_alloc&) {
        munmap(r, kRegion);
        return nullptr;
      }
      a.bump = static_cast<char*>(r);
      a.end = a.bump + kRegion;
    }
    p = a.bump;
    a.bump += bytes;
  }
  a.live += bytes;
  return p;
}

void release(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (!kUseRegions || bytes > kMaxSmall) return std::free(p);
  Arena& a = arena();
  std::lock_guard l(a.mu);
  auto* f = static_cast<FreeItem*>(p);
  f->next = a.free[bytes / 16];
  a.free[bytes / 16] = f;
  a.live -= bytes;
  if (a.live == 0) unmap_all(a);
}

size_t mapped_bytes() {
  Arena& a = arena();
  std::lock_guard l(a.mu);
  return a.regions.size() * kRegion;
}

}  // namespace kv::item_arena
