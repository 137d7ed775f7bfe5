#include "kvstore/item_arena.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>

namespace kv::item_arena {

namespace {

// Under the sanitizers every item goes to malloc: ASan then still catches
// overflows, and TSan still sees a free as a write to the whole item
// (which is how it catches an item read after reclamation freed it).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUseRegions = false;
#else
constexpr bool kUseRegions = true;
#endif

constexpr size_t kRegion = kRegionBytes;
constexpr size_t kClasses = kMaxSmall / 16 + 1;
constexpr size_t kHeader = 64;  // the Region, then items (16-byte aligned)
constexpr size_t kPage = 4096;
// A class's first regions stay on small pages, so that a small store
// holds what it uses, not 2 MiB per size class; the rest (a class of more
// than 4 MiB of items) is asked for huge pages.
constexpr uint32_t kSmallPageRegions = 2;

struct FreeItem {
  FreeItem* next;
};

// The head of each region: one size class per region, so that a region
// whose items are all freed (values that moved to another size class,
// items evicted) goes back to the system.
struct Region {
  Region* prev;  // in its class's list of regions with room
  Region* next;
  FreeItem* free;
  char* bump;  // the next never-used byte
  uint32_t live;
  uint32_t cls;
  bool listed;

  char* begin() { return reinterpret_cast<char*>(this) + kHeader; }
  char* end() { return reinterpret_cast<char*>(this) + kRegion; }
  bool has_room() { return free != nullptr || static_cast<size_t>(end() - bump) >= cls * 16; }
};
static_assert(sizeof(Region) <= kHeader);

struct Arena {
  std::mutex mu;
  Region* room[kClasses] = {};      // regions with room, per class
  uint32_t regions[kClasses] = {};  // regions mapped, per class
  size_t live = 0;                  // bytes allocated from regions, not released
};

constinit Arena g_arena;

// Held across fork(), so that the child finds it free and consistent.
const int g_fork_handlers = pthread_atfork([] { g_arena.mu.lock(); },
                                           [] { g_arena.mu.unlock(); },
                                           [] { g_arena.mu.unlock(); });

void link(Region* r) {
  Region*& head = g_arena.room[r->cls];
  r->prev = nullptr;
  r->next = head;
  if (head != nullptr) head->prev = r;
  head = r;
  r->listed = true;
}

void unlink(Region* r) {
  if (r->prev != nullptr) {
    r->prev->next = r->next;
  } else {
    g_arena.room[r->cls] = r->next;
  }
  if (r->next != nullptr) r->next->prev = r->prev;
  r->listed = false;
}

// A region for class cls, 2 MiB-aligned (one huge page); nullptr when out
// of memory.
Region* map_region(uint32_t cls) {
  void* m = mmap(nullptr, 2 * kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (at + kRegion - 1) & ~(kRegion - 1);
  if (aligned > at) munmap(m, aligned - at);
  if (aligned + kRegion < at + 2 * kRegion) {
    munmap(reinterpret_cast<void*>(aligned + kRegion), at + 2 * kRegion - aligned - kRegion);
  }
  // (Also where transparent huge pages are always on.)
  (void)madvise(reinterpret_cast<void*>(aligned), kRegion,
                g_arena.regions[cls] >= kSmallPageRegions ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  auto* r = new (reinterpret_cast<void*>(aligned)) Region{};
  r->cls = cls;
  r->bump = r->begin();
  g_arena.regions[cls]++;
  return r;
}

// Its items are all free: the last region of a class is kept (its pages
// given back), the others unmapped.
void empty(Region* r) {
  if (g_arena.regions[r->cls] > 1) {
    if (r->listed) unlink(r);
    g_arena.regions[r->cls]--;
    munmap(r, kRegion);
    return;
  }
  char* from = reinterpret_cast<char*>(r) + kPage;  // the header's page stays
  if (r->bump > from) (void)madvise(from, static_cast<size_t>(r->bump - from), MADV_DONTNEED);
  r->free = nullptr;
  r->bump = r->begin();
  if (!r->listed) link(r);
}

}  // namespace

void* allocate(size_t bytes) {
  assert(bytes > 0 && bytes % 16 == 0);
  if (!kUseRegions || bytes > kMaxSmall) return std::malloc(bytes);
  const auto cls = static_cast<uint32_t>(bytes / 16);
  std::lock_guard l(g_arena.mu);
  Region* r = g_arena.room[cls];
  if (r == nullptr) {
    r = map_region(cls);
    if (r == nullptr) return nullptr;
    link(r);
  }
  void* p;
  if (r->free != nullptr) {
    p = r->free;
    r->free = r->free->next;
  } else {
    p = r->bump;
    r->bump += bytes;
  }
  r->live++;
  g_arena.live += bytes;
  if (!r->has_room()) unlink(r);
  return p;
}

void release(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (!kUseRegions || bytes > kMaxSmall) return std::free(p);
  auto* r = reinterpret_cast<Region*>(reinterpret_cast<uintptr_t>(p) & ~(kRegion - 1));
  std::lock_guard l(g_arena.mu);
  assert(r->cls == bytes / 16 && r->live > 0);
  r->free = new (p) FreeItem{r->free};
  g_arena.live -= bytes;
  if (--r->live == 0) return empty(r);
  if (!r->listed) link(r);
}

size_t mapped_bytes() {
  std::lock_guard l(g_arena.mu);
  size_t n = 0;
  for (uint32_t c : g_arena.regions) n += c;
  return n * kRegion;
}

size_t live_bytes() {
  std::lock_guard l(g_arena.mu);
  return g_arena.live;
}

}  // namespace kv::item_arena
