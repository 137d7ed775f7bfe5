#include "kvstore/frontend.h"

#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>

#include "kvstore/item_arena.h"

namespace kv {

uint64_t hash_key(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

Item* Item::make(uint64_t hash, uint64_t seq, LogRef lentry, std::string_view key,
                 std::string_view value, bool tombstone) {
  // In 16-byte steps: the slack lets a slightly longer value overwrite the
  // item in place later.
  const size_t size = (sizeof(Item) + key.size() + value.size() + 15) & ~size_t{15};
  void* mem = item_arena::allocate(size);
  if (mem == nullptr) throw std::bad_alloc();  // DRAM exhausted: as for any container
  // Slots keep a tag in a pointer's top 16 bits.
  if (reinterpret_cast<uintptr_t>(mem) >> 48 != 0) {
    item_arena::release(mem, size);
    throw std::bad_alloc();
  }
  Item* it = new (mem) Item;
  it->hash = hash;
  it->klen = static_cast<uint32_t>(key.size());
  it->vlen = static_cast<uint32_t>(value.size());
  it->cap = static_cast<uint32_t>(size - sizeof(Item) - key.size());
  it->tombstone = tombstone;
  it->next.store(nullptr, std::memory_order_relaxed);
  it->seq = seq;
  it->lentry.store(lentry, std::memory_order_relaxed);
  it->applied_epoch.store(0, std::memory_order_relaxed);
  std::memcpy(it->data, key.data(), key.size());
  if (!value.empty()) std::memcpy(it->data + key.size(), value.data(), value.size());
  return it;
}

void Item::destroy(void* p) {
  auto* it = static_cast<Item*>(p);
  const size_t size = it->bytes();  // what make() allocated
  it->~Item();
  item_arena::release(p, size);
}

namespace {

// Buckets are read at random: on 4 KiB pages nearly every lookup of a big
// table also misses the TLB, so the kernel is asked for huge pages (where
// transparent huge pages are enabled for madvise; a hint, nothing more).
Frontend::Bucket* new_buckets(uint64_t n) {
  const size_t bytes = n * sizeof(Frontend::Bucket);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::bad_alloc();
  (void)madvise(mem, bytes, MADV_HUGEPAGE);
  return new (mem) Frontend::Bucket[n];  // zeroed pages: constructors only for form
}

Frontend::Table* new_table(uint64_t n) {
  auto t = std::make_unique<Frontend::Table>();
  t->mask = n - 1;
  t->buckets = new_buckets(n);
  return t.release();
}

void delete_table(void* p) {
  auto* t = static_cast<Frontend::Table*>(p);
  munmap(t->buckets, (t->mask + 1) * sizeof(Frontend::Bucket));
  delete t;
}

}  // namespace

Frontend::Frontend(uint64_t initial_buckets) {
  uint64_t n = 1024;
  while (n < initial_buckets) n *= 2;
  table_.store(new_table(n));
}

namespace {

// Every item of a bucket (slots, then the overflow chain) to fn(Item*).
// REQUIRES: the bucket locked or unreachable.
template <typename Fn>
void for_items(Frontend::Bucket* b, Fn&& fn) {
  for (auto& s : b->slot) {
    const uint64_t x = s.load(std::memory_order_relaxed);
    if (x != 0) fn(slot_item(x));
  }
  Item* it = b->overflow.load(std::memory_order_relaxed);
  while (it != nullptr && it != kMovedBucket) {
    Item* next = it->next.load(std::memory_order_relaxed);
    fn(it);
    it = next;
  }
}

// The k-th item of b in (slots, then chain) order; b holds more than k.
// REQUIRES: the bucket locked.
Item* nth_item(Frontend::Bucket* b, uint64_t k) {
  for (auto& s : b->slot) {
    const uint64_t x = s.load(std::memory_order_relaxed);
    if (x != 0 && k-- == 0) return slot_item(x);
  }
  Item* it = b->overflow.load(std::memory_order_relaxed);
  for (; k > 0; k--) it = it->next.load(std::memory_order_relaxed);
  return it;
}

}  // namespace

Frontend::~Frontend() {
  Table* t = current();
  for (uint64_t i = 0; i <= t->mask; i++) for_items(&t->buckets[i], &Item::destroy);
  delete_table(t);
}

uint64_t Frontend::buckets() const { return current()->mask + 1; }

void Frontend::lock_bucket(Bucket* b) {
  for (int spins = 0;; spins++) {
    uint64_t v = b->version.load(std::memory_order_relaxed);
    if ((v & 1) == 0 && b->version.compare_exchange_weak(v, v + 1, std::memory_order_acquire)) {
      return;
    }
    if (spins < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

// The holder is the only writer of an odd version: a plain release store.
void Frontend::unlock(Bucket* b) {
  b->version.store(b->version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

Frontend::Bucket* Frontend::lock(uint64_t h) {
  Reclaimer::Guard g;  // the table may be retired while we look at it
  Table* t = current();
  for (;;) {
    Bucket* b = &t->buckets[h & t->mask];
    lock_bucket(b);
    if (b->overflow.load(std::memory_order_relaxed) != kMovedBucket) return b;
    unlock(b);
    t = t->next.load(std::memory_order_acquire);
  }
}

Frontend::Bucket* Frontend::lock_once(uint64_t h, std::vector<Bucket*>* held) {
  Reclaimer::Guard g;
  Table* t = current();
  for (;;) {
    Bucket* b = &t->buckets[h & t->mask];
    // A bucket we hold cannot move meanwhile.
    if (std::find(held->begin(), held->end(), b) != held->end()) return b;
    lock_bucket(b);
    if (b->overflow.load(std::memory_order_relaxed) != kMovedBucket) {
      held->push_back(b);
      return b;
    }
    unlock(b);
    t = t->next.load(std::memory_order_acquire);
  }
}

Item* Frontend::find(Bucket* b, std::string_view key, uint64_t h) {
  const uint64_t tag = slot_tag(h);
  for (auto& s : b->slot) {
    const uint64_t x = s.load(std::memory_order_relaxed);
    if (x != 0 && (x >> 48) == tag) {
      Item* it = slot_item(x);
      if (it->hash == h && it->key() == key) return it;
    }
  }
  Item* it = b->overflow.load(std::memory_order_relaxed);
  while (it != nullptr && !(it->hash == h && it->key() == key)) {
    it = it->next.load(std::memory_order_relaxed);
  }
  return it;
}

bool Frontend::fits(const Item* old, std::string_view value) {
  // ThreadSanitizer would report the seqlock's by-design racing copies as
  // races, so under it every put makes a new item.
#if defined(__SANITIZE_THREAD__)
  (void)old, (void)value;
  return false;
#else
  // Never over a tombstone: a live item's versions in place are then all
  // puts, so an item marked applied (even for a moment, mark_applied) means
  // its key is in the backend's index, which StoreImpl::update relies on.
  return old != nullptr && !old->tombstone && value.size() <= old->cap;
#endif
}

Item* Frontend::install(Bucket* b, Item* old, uint64_t h, uint64_t seq, LogRef lentry,
                        std::string_view key, std::string_view value, bool tombstone) {
  Item* made = fits(old, value) ? nullptr : Item::make(h, seq, lentry, key, value, tombstone);
  return install_made(b, old, made, seq, lentry, value, tombstone);
}

Item* Frontend::install_made(Bucket* b, Item* old, Item* made, uint64_t seq, LogRef lentry,
                             std::string_view value, bool tombstone) {
  if (made == nullptr) {
    // In place: readers of this bucket see the version odd, or moved on,
    // and retry.
    old->vlen = static_cast<uint32_t>(value.size());
    old->tombstone = tombstone;
    old->seq = seq;
    if (!value.empty()) std::memcpy(old->data + old->klen, value.data(), value.size());
    // This order is what Item::mark_applied relies on.
    old->lentry.store(lentry, std::memory_order_relaxed);
    old->applied_epoch.store(0, std::memory_order_release);
    return old;
  }
  replace(b, old, made);
  return made;
}

namespace {

// Links `it` into a free slot of b, else at the head of its overflow chain,
// publishing it with `order`. REQUIRES: b locked or unreachable.
void link_into(Frontend::Bucket* b, Item* it, std::memory_order order) {
  for (auto& s : b->slot) {
    if (s.load(std::memory_order_relaxed) == 0) {
      s.store(make_slot(it), order);
      return;
    }
  }
  it->next.store(b->overflow.load(std::memory_order_relaxed), std::memory_order_relaxed);
  b->overflow.store(it, order);
}

// Where `it` is linked in b: its slot or the overflow link pointing to it.
struct Link {
  std::atomic<uint64_t>* slot = nullptr;
  std::atomic<Item*>* link = nullptr;
};

Link link_of(Frontend::Bucket* b, const Item* it) {
  for (auto& s : b->slot) {
    if (slot_item(s.load(std::memory_order_relaxed)) == it) return {&s, nullptr};
  }
  std::atomic<Item*>* link = &b->overflow;
  while (link->load(std::memory_order_relaxed) != it) link = &link->load()->next;
  return {nullptr, link};
}

}  // namespace

void Frontend::replace(Bucket* b, Item* old, Item* item) {
  if (old == nullptr) {
    items_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(item->bytes(), std::memory_order_relaxed);
    link_into(b, item, std::memory_order_release);
    return;
  }
  Link l = link_of(b, old);
  if (l.slot != nullptr) {
    l.slot->store(make_slot(item), std::memory_order_release);
  } else {
    item->next.store(old->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    l.link->store(item, std::memory_order_release);
  }
  // A replacement of the same size leaves the shared counter's line alone:
  // even an add of 0 would take it from other cores.
  if (item->bytes() != old->bytes()) {
    bytes_.fetch_add(item->bytes() - old->bytes(), std::memory_order_relaxed);
  }
  Reclaimer::retire(old, &Item::destroy);
}

void Frontend::erase(Bucket* b, Item* item) {
  Link l = link_of(b, item);
  if (l.slot != nullptr) {
    // The slot takes the first overflow item, if any: chains stay short.
    Item* first = b->overflow.load(std::memory_order_relaxed);
    if (first != nullptr) {
      b->overflow.store(first->next.load(std::memory_order_relaxed), std::memory_order_release);
      l.slot->store(make_slot(first), std::memory_order_release);
    } else {
      l.slot->store(0, std::memory_order_release);
    }
  } else {
    l.link->store(item->next.load(std::memory_order_relaxed), std::memory_order_release);
  }
  items_.fetch_sub(1, std::memory_order_relaxed);
  bytes_.fetch_sub(item->bytes(), std::memory_order_relaxed);
  Reclaimer::retire(item, &Item::destroy);
}

const Item* Frontend::peek(std::string_view key, uint64_t h) const {
  const Item* found = nullptr;
  read(key, h, [&](const Item& it) { found = &it; });
  return found;
}


bool Frontend::grow() {
  std::unique_lock<std::mutex> l(grow_mu_, std::try_to_lock);
  if (!l.owns_lock()) return false;
  Table* old = current();
  const uint64_t n = old->mask + 1;
  // Everything that can run out of memory comes before the new table is
  // published: a split cannot stop half way (the callers catch bad_alloc).
  // A bucket holds a few items; one of more (colliding hashes) is split
  // without the buffer, in quadratic time, rather than allocate.
  std::vector<Item*> items;
  items.reserve(4096);
  Table* t = new_table(n * 2);
  old->next.store(t, std::memory_order_release);
  for (uint64_t i = 0; i < n; i++) {
    Bucket* b = &old->buckets[i];
    lock_bucket(b);
    // Split the bucket. Readers of it see the version move and retry; one
    // still walking its overflow chain meanwhile must not loop: every
    // `next` points to an item later in (slots, then chain) order, before
    // and after the split, as items are added to the halves from the last.
    items.clear();
    uint64_t count = 0;
    for_items(b, [&](Item* it) {
      if (count++ < items.capacity()) items.push_back(it);
    });
    for (uint64_t k = count; k-- > 0;) {
      // Items before k still link as before: the walk to k is unchanged.
      Item* it = count == items.size() ? items[k] : nth_item(b, k);
      // Nobody can reach the new halves yet: relaxed stores.
      link_into(&t->buckets[i + ((it->hash & n) ? n : 0)], it, std::memory_order_relaxed);
    }
    b->overflow.store(kMovedBucket, std::memory_order_release);
    unlock(b);
  }
  table_.store(t, std::memory_order_release);
  Reclaimer::retire(old, &delete_table);
  return true;
}
void Frontend::for_each(const std::function<void(const Item&)>& fn) const {
  (void)for_each_from(0, UINT64_MAX, fn);
}

uint64_t Frontend::for_each_from(uint64_t first, uint64_t n,
                                 const std::function<void(const Item&)>& fn) const {
  // No growth meanwhile, so no bucket is moved under us.
  std::lock_guard<std::mutex> l(grow_mu_);
  const Table* t = current();
  const uint64_t end = n > t->mask + 1 - std::min(first, t->mask + 1) ? t->mask + 1 : first + n;
  for (uint64_t i = first; i < end; i++) {
    // Locked, since a put may overwrite an item in place.
    Bucket* b = &t->buckets[i];
    lock_bucket(b);
    for_items(b, [&](const Item* it) { fn(*it); });
    unlock(b);
  }
  return end > t->mask ? 0 : end;
}

uint64_t Frontend::evict(uint64_t want, const std::function<bool(const Item&)>& clean) {
  std::lock_guard<std::mutex> l(grow_mu_);
  Table* t = current();
  const uint64_t n = t->mask + 1;
  uint64_t freed = 0;
  std::vector<Item*> items;
  items.reserve(4096);  // as in grow(): no allocation with a bucket locked
  for (uint64_t step = 0; step < n && freed < want; step++) {
    Bucket* b = &t->buckets[clock_hand_++ & t->mask];
    lock_bucket(b);
    items.clear();
    for_items(b, [&](Item* it) {
      if (items.size() < items.capacity()) items.push_back(it);  // the rest: next round
    });
    for (Item* it : items) {
      if (!it->tombstone && clean(*it)) {
        freed += it->bytes();
        erase(b, it);
      }
    }
    unlock(b);
  }
  return freed;
}

}  // namespace kv
