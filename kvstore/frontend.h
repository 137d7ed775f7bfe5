// The DRAM frontend: a chained hash table of immutable items.
//
// Writers lock one bucket (its version word is odd while locked) and
// replace whole items; readers never lock: they read the version, walk the
// chain, copy what they need and retry if the version moved (a seqlock).
// Unlinked items and old tables are freed through the Reclaimer, so a
// reader on a stale chain never touches freed memory.
//
// Growth runs while operations continue: grow() publishes a table twice
// the size and moves the old buckets one at a time; a moved bucket's head
// is a marker that sends readers and writers on to the new table.
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
  std::atomic<Item*> next;
  uint64_t hash;
  uint64_t seq;     // sequence number of the update that made this version
  LogRef lentry;    // the key's newest log record (0: read from the backend)
  // Epoch whose commit applied this version to the backend (0: not yet).
  mutable std::atomic<uint64_t> applied_epoch;
  uint32_t klen, vlen;
  bool tombstone;  // removed; kept until the backend has removed the key
  char data[];     // key, then value

  std::string_view key() const { return {data, klen}; }
  std::string_view value() const { return {data + klen, vlen}; }
  size_t bytes() const { return sizeof(Item) + klen + vlen; }

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
  // checks (lentry). REQUIRES: a Reclaimer::Guard.
  const Item* peek(std::string_view key, uint64_t h) const;

  struct Bucket;
  // Writers: lock the key's bucket, change it, unlock. A bucket already in
  // `held` is returned as it is (transactions lock several buckets, and two
  // keys may share one); a newly locked one is added to `held`.
  Bucket* lock_once(uint64_t h, std::vector<Bucket*>* held);
  static void unlock(Bucket* b);
  // REQUIRES for the three below: b locked by the caller.
  static Item* find(Bucket* b, std::string_view key, uint64_t h);
  // Links `item` in place of `old` (nullptr: insert) and retires `old`.
  void replace(Bucket* b, Item* old, Item* item);
  // Unlinks and retires.
  void erase(Bucket* b, Item* item);

  // One locked bucket, unlocked on destruction.
  class Locked {
   public:
    Locked(Frontend* f, uint64_t h) : f_(f) { b_ = f->lock_once(h, &held_); }
    ~Locked() { Frontend::unlock(b_); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    Item* find(std::string_view key, uint64_t h) const { return Frontend::find(b_, key, h); }
    void replace(Item* old, Item* item) { f_->replace(b_, old, item); }
    void erase(Item* item) { f_->erase(b_, item); }

   private:
    Frontend* f_;
    Bucket* b_;
    std::vector<Bucket*> held_;
  };

  uint64_t items() const { return items_.load(std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t buckets() const;
  bool wants_growth() const { return items() > buckets() * 2; }
  // Doubles the table, moving buckets while operations continue. Returns
  // false (doing nothing) when a grow, an evict or a for_each is running.
  bool grow();

  // Visits every item bucket by bucket (each bucket a consistent view);
  // the table does not grow meanwhile. fn runs under a guard and must not
  // keep the reference.
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

struct Frontend::Bucket {
  mutable std::atomic<uint64_t> version{0};  // odd while a writer holds the bucket
  std::atomic<Item*> head{nullptr};
};

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

// A moved bucket's head: go on to the next table.
inline Item* const kMovedBucket = reinterpret_cast<Item*>(uintptr_t{1});

template <typename Fn>
bool Frontend::read(std::string_view key, uint64_t h, Fn&& fn) const {
  const Table* t = current();
  for (;;) {
    const Bucket& b = t->buckets[h & t->mask];
    uint64_t v = b.version.load(std::memory_order_acquire);
    if (v & 1) {
      cpu_relax();
      continue;
    }
    const Item* it = b.head.load(std::memory_order_acquire);
    if (it == kMovedBucket) {
      t = t->next.load(std::memory_order_acquire);
      continue;
    }
    while (it != nullptr && !(it->hash == h && it->key() == key)) {
      it = it->next.load(std::memory_order_acquire);
    }
    if (it != nullptr) fn(*it);
    if (version_after_reads(b.version) == v) return it != nullptr;
  }
}

}  // namespace kv

#endif  // KVSTORE_FRONTEND_H_
