// The DRAM frontend: a hash table of items, one cache line per bucket.
//
// A bucket holds its lock word, kSlots tagged item pointers (16 bits of the
// key's hash beside each pointer, so a lookup dereferences only the item
// whose tag matches) and an overflow chain for the rare bucket with more
// items. Writers lock one bucket (its version word is odd while locked);
// readers never lock: they read the version, look, copy what they need and
// retry if the version moved (a seqlock). A put of a value that fits the
// key's live item overwrites it in place under the lock (never a
// tombstone: Frontend::fits says why); otherwise the item is
// replaced and the old one freed through the Reclaimer, so a reader on a
// stale pointer never touches freed memory.
//
// Growth runs while operations continue: grow() publishes a table twice
// the size and moves the old buckets one at a time; a moved bucket's
// overflow word is a marker that sends readers and writers on to the new
// table.
#ifndef KVSTORE_FRONTEND_H_
#define KVSTORE_FRONTEND_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "kvstore/crl.h"
#include "kvstore/reclaimer.h"

namespace kv {

uint64_t hash_key(std::string_view key);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct Item {
  // Hot fields first: a lookup reads hash, klen and the key.
  uint64_t hash;
  uint32_t klen, vlen;
  uint32_t cap;     // bytes for the value: a put of up to cap overwrites in place
  bool tombstone;   // removed; kept until the backend has removed the key
  std::atomic<Item*> next;  // the overflow chain (items beyond the bucket's slots)
  uint64_t seq;     // sequence number of the update that made this version
  // The key's newest log record (0: read from the backend). Atomic: the
  // gleaners compare it without the bucket lock.
  std::atomic<LogRef> lentry;
  // Epoch whose commit applied this version to the backend (0: not yet).
  mutable std::atomic<uint64_t> applied_epoch;
  char data[];     // key, then value

  std::string_view key() const { return {data, klen}; }
  std::string_view value() const { return {data + klen, vlen}; }
  size_t bytes() const { return sizeof(Item) + klen + cap; }

  // Marks the version logged at `ref` as applied by `epoch`'s commit, if it
  // is still this item's version. A put may overwrite the item in place
  // meanwhile (lentry, then applied_epoch = 0, both under the bucket lock,
  // which this does not take); the exchange then the lentry check make sure
  // a newer version is never marked applied: either the put's reset comes
  // after our exchange, or our check sees its lentry and undoes the mark.
  // An item wrongly left unmarked only waits for its next version to be
  // applied before it can be evicted; one wrongly marked would be evicted
  // with its version missing from the backend.
  void mark_applied(LogRef ref, uint64_t epoch) const {
    applied_epoch.exchange(epoch, std::memory_order_acq_rel);
    if (lentry.load(std::memory_order_acquire) != ref) {
      uint64_t e = epoch;
      applied_epoch.compare_exchange_strong(e, 0, std::memory_order_acq_rel);
    }
  }

  static Item* make(uint64_t hash, uint64_t seq, LogRef lentry, std::string_view key,
                    std::string_view value, bool tombstone);
  static void destroy(void* p);
};

class Frontend {
 public:
  explicit Frontend(uint64_t initial_buckets);
  ~Frontend();
  Frontend(const Frontend&) = delete;
  Frontend& operator=(const Frontend&) = delete;

  // Calls fn(const Item&) on the key's item (or does nothing) with a
  // consistent view; fn may run more than once (retries) and must only copy.
  // Returns whether the key has an item. REQUIRES: a Reclaimer::Guard.
  template <typename Fn>
  bool read(std::string_view key, uint64_t h, Fn&& fn) const;

  // The key's item right now, without consistency retries: for identity
  // checks. Only its atomic fields may be read without the bucket lock (a
  // put may overwrite the rest in place). REQUIRES: a Reclaimer::Guard.
  const Item* peek(std::string_view key, uint64_t h) const;
  // Brings the bucket of hash h into the cache. REQUIRES: a Reclaimer::Guard.
  void prefetch(uint64_t h) const;
  // Then the item its bucket points to for h (once the bucket is cached:
  // a second pass over a batch of keys). A hint only: reads nothing it
  // relies on.
  void prefetch_item(uint64_t h) const;

  struct Bucket;
  // Writers: lock the key's bucket, change it, unlock.
  Bucket* lock(uint64_t h);
  // The same for a group: a bucket already in `held` is returned as it is
  // (transactions lock several buckets, and two keys may share one); a
  // newly locked one is added to `held`.
  Bucket* lock_once(uint64_t h, std::vector<Bucket*>* held);
  static void unlock(Bucket* b);
  // REQUIRES for the four below: b locked by the caller.
  static Item* find(Bucket* b, std::string_view key, uint64_t h);
  // Makes (key, value) the key's newest version: overwrites `old` in place
  // when fits(), else links a new item in its place (nullptr:
  // insert) and retires `old`. Returns the item that holds the version.
  Item* install(Bucket* b, Item* old, uint64_t h, uint64_t seq, LogRef lentry,
                std::string_view key, std::string_view value, bool tombstone);
  // Whether install() would overwrite `old` in place, making no item.
  static bool fits(const Item* old, std::string_view value);
  // install() with the item already made (Item::make) when !fits(old,
  // value), nullptr when it fits: a writer makes it before it logs the
  // update, so that running out of DRAM fails the update, not the install.
  Item* install_made(Bucket* b, Item* old, Item* made, uint64_t seq, LogRef lentry,
                     std::string_view value, bool tombstone);
  // Links `item` in place of `old` (nullptr: insert) and retires `old`.
  void replace(Bucket* b, Item* old, Item* item);
  // Unlinks and retires.
  void erase(Bucket* b, Item* item);

  // One locked bucket, unlocked on destruction.
  class Locked {
   public:
    Locked(Frontend* f, uint64_t h) : f_(f), b_(f->lock(h)) {}
    ~Locked() { Frontend::unlock(b_); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    Item* find(std::string_view key, uint64_t h) const { return Frontend::find(b_, key, h); }
    Item* install(Item* old, uint64_t h, uint64_t seq, LogRef lentry, std::string_view key,
                  std::string_view value, bool tombstone) {
      return f_->install(b_, old, h, seq, lentry, key, value, tombstone);
    }
    void replace(Item* old, Item* item) { f_->replace(b_, old, item); }
    void erase(Item* item) { f_->erase(b_, item); }

   private:
    Frontend* f_;
    Bucket* b_;
  };

  uint64_t items() const { return items_.load(std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t buckets() const;
  // Grows at kLoad items per bucket on average: few buckets overflow.
  static constexpr uint64_t kLoad = 3;
  bool wants_growth() const { return items() > buckets() * kLoad; }
  // Doubles the table, moving buckets while operations continue. Returns
  // false (doing nothing) when a grow, an evict or a for_each is running.
  bool grow();

  // Visits every item bucket by bucket, each bucket locked while fn runs on
  // its items; the table does not grow meanwhile. fn must only copy (and
  // not touch the frontend).
  void for_each(const std::function<void(const Item&)>& fn) const;
  // The same for up to `n` buckets from bucket `first`; returns the bucket
  // to continue from, 0 when done. Growth between calls moves bucket i's
  // items to i and i + old size, both at or after i: a walk from 0 misses
  // no item present throughout, but may visit one twice.
  uint64_t for_each_from(uint64_t first, uint64_t n,
                         const std::function<void(const Item&)>& fn) const;
  // Evicts up to `want` bytes of items for which clean(item) holds, moving a
  // clock hand over the buckets. Returns the bytes freed.
  uint64_t evict(uint64_t want, const std::function<bool(const Item&)>& clean);

  struct Table;

 private:
  Table* current() const { return table_.load(std::memory_order_acquire); }
  static void lock_bucket(Bucket* b);

  std::atomic<Table*> table_;
  std::atomic<uint64_t> items_{0};
  std::atomic<uint64_t> bytes_{0};
  mutable std::mutex grow_mu_;
  uint64_t clock_hand_ = 0;  // guarded by grow_mu_ (evict and grow exclude each other)
};

// --- implementation of the templates ---

// A slot: an item pointer with 16 bits of its key's hash in the top bits
// (user-space pointers fit in 48 bits); 0 when empty.
inline uint64_t slot_tag(uint64_t h) { return h >> 48; }
inline uint64_t make_slot(const Item* it) {
  return (slot_tag(it->hash) << 48) | reinterpret_cast<uintptr_t>(it);
}
inline Item* slot_item(uint64_t s) {
  return reinterpret_cast<Item*>(s & ((uint64_t{1} << 48) - 1));
}

struct alignas(64) Frontend::Bucket {
  static constexpr int kSlots = 6;
  mutable std::atomic<uint64_t> version{0};  // odd while a writer holds the bucket
  std::atomic<Item*> overflow{nullptr};      // kMovedBucket once moved by grow()
  std::atomic<uint64_t> slot[kSlots] = {};
};
static_assert(sizeof(Frontend::Bucket) == 64);

struct Frontend::Table {
  uint64_t mask;
  std::atomic<Table*> next{nullptr};  // set while growing into it
  Bucket* buckets;
};

// The seqlock's closing read: the version after every read of the section.
// An acquire fence and a relaxed load (free on x86); ThreadSanitizer does not
// model fences, so under it a read-modify-write does the same job.
inline uint64_t version_after_reads(const std::atomic<uint64_t>& v) {
#if defined(__SANITIZE_THREAD__)
  return const_cast<std::atomic<uint64_t>&>(v).fetch_add(0, std::memory_order_acq_rel);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  return v.load(std::memory_order_relaxed);
#endif
}

// A moved bucket's overflow word: go on to the next table.
inline Item* const kMovedBucket = reinterpret_cast<Item*>(uintptr_t{1});

inline void Frontend::prefetch(uint64_t h) const {
  const Table* t = current();
  __builtin_prefetch(&t->buckets[h & t->mask]);
}

inline void Frontend::prefetch_item(uint64_t h) const {
  const Table* t = current();
  const Bucket& b = t->buckets[h & t->mask];
  const uint64_t tag = slot_tag(h);
  for (int i = 0; i < Bucket::kSlots; i++) {
    const uint64_t s = b.slot[i].load(std::memory_order_relaxed);
    if (s != 0 && (s >> 48) == tag) {  // the header, the key, a value of a line or two
      const char* x = reinterpret_cast<const char*>(slot_item(s));
      __builtin_prefetch(x);
      __builtin_prefetch(x + 64);
      __builtin_prefetch(x + 128);
    }
  }
}

template <typename Fn>
bool Frontend::read(std::string_view key, uint64_t h, Fn&& fn) const {
  const Table* t = current();
  const uint64_t tag = slot_tag(h);
  for (;;) {
    const Bucket& b = t->buckets[h & t->mask];
    uint64_t v = b.version.load(std::memory_order_acquire);
    if (v & 1) {
      cpu_relax();
      continue;
    }
    const Item* over = b.overflow.load(std::memory_order_acquire);
    if (over == kMovedBucket) {
      t = t->next.load(std::memory_order_acquire);
      continue;
    }
    const Item* it = nullptr;
    for (int i = 0; i < Bucket::kSlots && it == nullptr; i++) {
      const uint64_t s = b.slot[i].load(std::memory_order_acquire);
      if (s != 0 && (s >> 48) == tag) {
        const Item* x = slot_item(s);
        // Almost surely the key's item: fetch its value's lines together
        // with the header instead of one miss after another.
        __builtin_prefetch(reinterpret_cast<const char*>(x) + 64);
        __builtin_prefetch(reinterpret_cast<const char*>(x) + 128);
        if (x->hash == h && x->key() == key) it = x;
      }
    }
    if (it == nullptr) {
      it = over;
      while (it != nullptr && !(it->hash == h && it->key() == key)) {
        it = it->next.load(std::memory_order_acquire);
      }
    }
    if (it != nullptr) fn(*it);
    if (version_after_reads(b.version) == v) return it != nullptr;
  }
}

}  // namespace kv

#endif  // KVSTORE_FRONTEND_H_
