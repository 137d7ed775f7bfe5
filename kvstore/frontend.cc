#include "kvstore/frontend.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <thread>

namespace kv {

uint64_t hash_key(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

Item* Item::make(uint64_t hash, uint64_t seq, LogRef lentry, std::string_view key,
                 std::string_view value, bool tombstone) {
  void* mem = std::malloc(sizeof(Item) + key.size() + value.size());
  if (mem == nullptr) throw std::bad_alloc();  // DRAM exhausted: as for any container
  Item* it = new (mem) Item;
  it->next.store(nullptr, std::memory_order_relaxed);
  it->hash = hash;
  it->seq = seq;
  it->lentry = lentry;
  it->applied_epoch.store(0, std::memory_order_relaxed);
  it->klen = static_cast<uint32_t>(key.size());
  it->vlen = static_cast<uint32_t>(value.size());
  it->tombstone = tombstone;
  std::memcpy(it->data, key.data(), key.size());
  if (!value.empty()) std::memcpy(it->data + key.size(), value.data(), value.size());
  return it;
}

void Item::destroy(void* p) {
  static_cast<Item*>(p)->~Item();
  std::free(p);
}

namespace {

Frontend::Table* new_table(uint64_t n) {
  auto* t = new Frontend::Table;
  t->mask = n - 1;
  t->buckets = new Frontend::Bucket[n];
  return t;
}

void delete_table(void* p) {
  auto* t = static_cast<Frontend::Table*>(p);
  delete[] t->buckets;
  delete t;
}

}  // namespace

Frontend::Frontend(uint64_t initial_buckets) {
  uint64_t n = 1024;
  while (n < initial_buckets) n *= 2;
  table_.store(new_table(n));
}

Frontend::~Frontend() {
  Table* t = current();
  for (uint64_t i = 0; i <= t->mask; i++) {
    Item* it = t->buckets[i].head.load();
    while (it != nullptr && it != kMovedBucket) {
      Item* next = it->next.load();
      Item::destroy(it);
      it = next;
    }
  }
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

void Frontend::unlock(Bucket* b) { b->version.fetch_add(1, std::memory_order_release); }

Frontend::Bucket* Frontend::lock_once(uint64_t h, std::vector<Bucket*>* held) {
  Reclaimer::Guard g;  // the table may be retired while we look at it
  Table* t = current();
  for (;;) {
    Bucket* b = &t->buckets[h & t->mask];
    // A bucket we hold cannot move meanwhile.
    if (std::find(held->begin(), held->end(), b) != held->end()) return b;
    lock_bucket(b);
    if (b->head.load(std::memory_order_relaxed) != kMovedBucket) {
      held->push_back(b);
      return b;
    }
    unlock(b);
    t = t->next.load(std::memory_order_acquire);
  }
}

Item* Frontend::find(Bucket* b, std::string_view key, uint64_t h) {
  Item* it = b->head.load(std::memory_order_relaxed);
  while (it != nullptr && !(it->hash == h && it->key() == key)) {
    it = it->next.load(std::memory_order_relaxed);
  }
  return it;
}

void Frontend::replace(Bucket* b, Item* old, Item* item) {
  if (old == nullptr) {
    item->next.store(b->head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b->head.store(item, std::memory_order_release);
    items_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(item->bytes(), std::memory_order_relaxed);
    return;
  }
  item->next.store(old->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
  std::atomic<Item*>* link = &b->head;
  while (link->load(std::memory_order_relaxed) != old) link = &link->load()->next;
  link->store(item, std::memory_order_release);
  // An overwrite of the same size (the common put) leaves the shared
  // counter's line alone: even an add of 0 would take it from other cores.
  if (item->bytes() != old->bytes()) {
    bytes_.fetch_add(item->bytes() - old->bytes(), std::memory_order_relaxed);
  }
  Reclaimer::retire(old, &Item::destroy);
}

void Frontend::erase(Bucket* b, Item* item) {
  std::atomic<Item*>* link = &b->head;
  while (link->load(std::memory_order_relaxed) != item) link = &link->load()->next;
  link->store(item->next.load(std::memory_order_relaxed), std::memory_order_release);
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
  Table* t = new_table(n * 2);
  old->next.store(t, std::memory_order_release);
  for (uint64_t i = 0; i < n; i++) {
    Bucket* b = &old->buckets[i];
    lock_bucket(b);
    // Split the chain: items keep their order within each half. Readers of
    // this bucket see the version move and retry.
    Item* lo = nullptr;
    Item* hi = nullptr;
    std::vector<Item*> chain;
    for (Item* it = b->head.load(std::memory_order_relaxed); it != nullptr;
         it = it->next.load(std::memory_order_relaxed)) {
      chain.push_back(it);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Item*& head = ((*it)->hash & n) ? hi : lo;
      (*it)->next.store(head, std::memory_order_relaxed);
      head = *it;
    }
    t->buckets[i].head.store(lo, std::memory_order_relaxed);
    t->buckets[i + n].head.store(hi, std::memory_order_relaxed);
    b->head.store(kMovedBucket, std::memory_order_release);
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
  Reclaimer::Guard g;
  const Table* t = current();
  std::vector<const Item*> batch;
  const uint64_t end = n > t->mask + 1 - std::min(first, t->mask + 1) ? t->mask + 1 : first + n;
  for (uint64_t i = first; i < end; i++) {
    const Bucket& b = t->buckets[i];
    for (;;) {
      uint64_t v = b.version.load(std::memory_order_acquire);
      if (v & 1) {
        cpu_relax();
        continue;
      }
      batch.clear();
      for (const Item* it = b.head.load(std::memory_order_acquire); it != nullptr;
           it = it->next.load(std::memory_order_acquire)) {
        batch.push_back(it);
      }
      if (version_after_reads(b.version) == v) break;
    }
    for (const Item* x : batch) fn(*x);
  }
  return end > t->mask ? 0 : end;
}

uint64_t Frontend::evict(uint64_t want, const std::function<bool(const Item&)>& clean) {
  std::lock_guard<std::mutex> l(grow_mu_);
  Table* t = current();
  const uint64_t n = t->mask + 1;
  uint64_t freed = 0;
  for (uint64_t step = 0; step < n && freed < want; step++) {
    Bucket* b = &t->buckets[clock_hand_++ & t->mask];
    lock_bucket(b);
    for (Item* it = b->head.load(std::memory_order_relaxed); it != nullptr;) {
      Item* next = it->next.load(std::memory_order_relaxed);
      if (!it->tombstone && clean(*it)) {
        freed += it->bytes();
        erase(b, it);
      }
      it = next;
    }
    unlock(b);
  }
  return freed;
}

}  // namespace kv
