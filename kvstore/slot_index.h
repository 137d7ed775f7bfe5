// SlotIndex: a DRAM hash map from key to the file offset of the slot that
// holds it, for the working version of a VersionTree only. Point reads,
// deletes and overwrites of the working state find their slot with one
// probe instead of a descent through the nodes (about ten cache misses at
// 1M keys). Nothing here is persistent: recovery rebuilds it from the
// leaves it walks anyway, and the tree keeps it with every leaf write.
//
// Open addressing with linear probing; an entry is (hash, offset), so that
// growth needs no key reads. Keys are compared through the caller's
// `key_at(offset)`, since the tree's file may be remapped between calls.
//
// Thread safety: none; the tree's writer lock guards every change, its
// shared lock every find.
#ifndef KVSTORE_SLOT_INDEX_H_
#define KVSTORE_SLOT_INDEX_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kv {

class SlotIndex {
 public:
  // The slot offset of `key` (hash h), or 0.
  template <typename KeyAt>
  uint64_t find(std::string_view key, uint64_t h, const KeyAt& key_at) const {
    if (e_.empty()) return 0;
    for (size_t i = h & mask(); ; i = (i + 1) & mask()) {
      const E& e = e_[i];
      if (e.off == kEmpty) return 0;
      if (e.off != kGone && e.h == h && key_at(e.off) == key) return e.off;
    }
  }

  // Maps `key` to `off`, replacing its slot if it has one.
  template <typename KeyAt>
  void set(std::string_view key, uint64_t h, uint64_t off, const KeyAt& key_at) {
    if ((used_ + 1) * 4 > e_.size() * 3) grow();
    size_t gone = SIZE_MAX;
    size_t i = h & mask();
    for (;; i = (i + 1) & mask()) {
      E& e = e_[i];
      if (e.off == kEmpty) break;
      if (e.off == kGone) {
        if (gone == SIZE_MAX) gone = i;
        continue;
      }
      if (e.h == h && key_at(e.off) == key) {
        e.off = off;
        return;
      }
    }
    if (gone != SIZE_MAX) {
      i = gone;
    } else {
      used_++;
    }
    e_[i] = {h, off};
    live_++;
  }

  template <typename KeyAt>
  void erase(std::string_view key, uint64_t h, const KeyAt& key_at) {
    if (e_.empty()) return;
    for (size_t i = h & mask(); ; i = (i + 1) & mask()) {
      E& e = e_[i];
      if (e.off == kEmpty) return;
      if (e.off != kGone && e.h == h && key_at(e.off) == key) {
        e.off = kGone;  // used_ still counts it: probes pass over it
        live_--;
        return;
      }
    }
  }

  // Brings h's first probe into the cache (before a batch of sets).
  void prefetch(uint64_t h) const {
    if (!e_.empty()) __builtin_prefetch(&e_[h & mask()], 1);
  }

  // Replaces the contents with (hash, offset) pairs of distinct keys, sized
  // once and with the probes prefetched ahead: what a recovery walk found.
  void build(const std::vector<std::pair<uint64_t, uint64_t>>& all) {
    size_t n = 1024;
    while (all.size() * 2 > n) n *= 2;
    e_.assign(n, E{0, kEmpty});
    constexpr size_t kAhead = 16;
    for (size_t k = 0; k < all.size(); k++) {
      if (k + kAhead < all.size()) prefetch(all[k + kAhead].first);
      size_t i = all[k].first & mask();
      while (e_[i].off != kEmpty) i = (i + 1) & mask();
      e_[i] = {all[k].first, all[k].second};
    }
    used_ = live_ = all.size();
  }

  void clear() {
    e_.clear();
    used_ = live_ = 0;
  }
  uint64_t size() const { return live_; }
  uint64_t bytes() const { return e_.size() * sizeof(E); }

 private:
  struct E {
    uint64_t h;
    uint64_t off;
  };
  // Slot offsets are at least a node past the start (node 0 is the
  // superblock), so 0 and 1 are free to mean "never used" and "removed".
  static constexpr uint64_t kEmpty = 0, kGone = 1;

  size_t mask() const { return e_.size() - 1; }
  // Doubles when mostly live, else rehashes at the same size to drop removed ones.
  void grow() {
    size_t n = e_.empty() ? 1024 : e_.size();
    while ((live_ + 1) * 2 > n) n *= 2;
    std::vector<E> old(n, E{0, kEmpty});
    old.swap(e_);
    used_ = live_;
    for (const E& e : old) {
      if (e.off == kEmpty || e.off == kGone) continue;
      size_t i = e.h & mask();
      while (e_[i].off != kEmpty) i = (i + 1) & mask();
      e_[i] = e;
    }
  }

  std::vector<E> e_;
  uint64_t used_ = 0;  // entries not empty: live and removed
  uint64_t live_ = 0;
};

}  // namespace kv

#endif  // KVSTORE_SLOT_INDEX_H_
