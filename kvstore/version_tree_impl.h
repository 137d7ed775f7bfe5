// VersionTree's implementation, one class shared by its files:
// version_tree_recovery.cc (create, open, recovery), version_tree_read.cc
// (gets and scans at a version), version_tree_write.cc (pins, reclamation,
// puts, deletes, copy-on-write, commit) and version_tree.cc (the API).
#ifndef KVSTORE_VERSION_TREE_IMPL_H_
#define KVSTORE_VERSION_TREE_IMPL_H_

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "kvstore/slot_index.h"
#include "kvstore/version_tree.h"
#include "kvstore/version_tree_format.h"
#include "libpm/file_lock.h"

namespace kv {

using pm::Result;
using pm::Status;

class VersionTree::Impl : private TreeFormat {
 public:
  Impl(std::string path, pm::FileLock lock, std::unique_ptr<pm::Persist> p, Layout l)
      : path_(std::move(path)), lock_(std::move(lock)), p_(std::move(p)), l_(l) {
    base_ = p_->view();
  }

  static Status init_file(pm::Persist& p, const Layout& l);
  Status recover();

  Status put(std::string_view key, std::string_view value);
  Status del(std::string_view key);
  Status commit();
  Result<std::string> get(std::string_view key, uint64_t v, uint64_t root) const;
  Status scan(uint64_t v, uint64_t root, std::string_view begin, std::string_view end,
              size_t limit, const ScanFn& fn) const;
  Snapshot snapshot(const VersionTree* owner) const;
  void unpin(uint64_t v) const;
  VersionTreeStats stats() const;
  uint64_t committed() const {
    std::shared_lock lk(mu_);
    return committed_;
  }

 private:
  struct Step {
    uint64_t node;
    int64_t slot;  // the parent entry followed to the next step (-1 at the leaf)
  };
  struct Entry {
    std::string_view key;
    uint64_t off;  // file offset of the slot
  };
  // The working version's routing table of an inner node: its visible
  // entries in key order. DRAM only, rebuilt whenever the node is written,
  // so gets and scans of the working state binary-search instead of
  // sorting unsorted slots; snapshots of older versions read the node.
  struct Routes {
    std::vector<Entry> entries;     // keys view `keys`
    struct Child {
      uint64_t node;  // entries[i]'s child
      uint64_t slot;  // entries[i]'s slot in its node
    };
    std::vector<Child> children;     // a descent reads one line per level, not entries
    std::vector<uint64_t> prefixes;  // entries[i]'s key_prefix()
    std::string keys;
    // covering() through the keys' prefixes: a probe reads one array and
    // compares whole keys only where the first 8 bytes are equal.
    size_t covering(std::string_view key) const;
  };
  // The first 8 bytes of a key, zero-padded, as a number that orders as
  // the keys do wherever two prefixes differ.
  static uint64_t key_prefix(std::string_view key) {
    uint64_t v = 0;
    if (!key.empty()) std::memcpy(&v, key.data(), std::min<size_t>(8, key.size()));
    if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
    return v;
  }

  uint64_t nodes() const { return p_->size() / l_.node_bytes; }
  uint64_t node_off(uint64_t n) const { return n * l_.node_bytes; }
  uint64_t slot_off(uint64_t n, bool leaf, uint32_t i) const {
    return node_off(n) + kNodeHeader + i * l_.slot_bytes(leaf);
  }
  uint64_t u64(uint64_t off) const {
    uint64_t v;
    std::memcpy(&v, base_ + off, 8);
    return v;
  }
  uint32_t u32(uint64_t off) const {
    uint32_t v;
    std::memcpy(&v, base_ + off, 4);
    return v;
  }
  uint16_t u16(uint64_t off) const {
    uint16_t v;
    std::memcpy(&v, base_ + off, 2);
    return v;
  }
  bool is_leaf(uint64_t n) const { return u32(node_off(n)) == kLeafMagic; }
  std::string_view key_at(uint64_t slot, bool leaf) const {
    const uint64_t at = leaf ? kLeafKey : kInnerKey;
    const uint16_t len = u16(slot + (leaf ? kLeafKlen : kInnerKlen));
    return {reinterpret_cast<const char*>(base_ + slot + at), len};
  }
  std::string_view value_at(uint64_t slot) const {
    return {reinterpret_cast<const char*>(base_ + slot + kLeafKey + l_.key_max),
            u16(slot + kLeafVlen)};
  }

  // Every write of an epoch goes through here: commit() flushes the ranges.
  void write(uint64_t off, const void* src, size_t n) {
    p_->write(off, src, n);
    dirty_.push_back({off, n});
    epoch_dirty_ = true;
  }
  void write_u64(uint64_t off, uint64_t v) { write(off, &v, 8); }

  uint64_t working() const { return committed_ + 1; }
  // The oldest pinned version (kInf: none), read without a lock by the
  // writer, which every put consults.
  uint64_t oldest_pin() const { return oldest_pin_.load(std::memory_order_acquire); }
  // Entries that ended at or before it, and nodes retired at or before it,
  // no version anyone can read needs: the committed one and every pin.
  uint64_t reclaim_bound() const { return std::min(committed_, oldest_pin()); }
  // A slot that no version anyone can read needs.
  bool reusable(uint64_t slot, uint64_t bound) const;
  int64_t find_reusable(uint64_t node, bool leaf, uint64_t bound, int need) const;

  // The child of inner node `n` whose range holds `key` at version v.
  // The slot of inner node n whose child's range holds `key` at version v
  // (-1: none visible), and that child.
  int64_t route(uint64_t n, std::string_view key, uint64_t v, uint64_t* child) const;
  uint64_t descend(std::string_view key, uint64_t v, uint64_t root, std::vector<Step>* path) const;
  // The slot of `key` visible at v in `leaf` (-1: none), read from the node
  // (older versions; the working one has idx_).
  int64_t find_in_leaf(uint64_t leaf, std::string_view key, uint64_t v) const;
  std::vector<Entry> visible_sorted(uint64_t n, bool leaf, uint64_t v) const;
  void index_inner(uint64_t n);
  // The working state's point operations go through idx_ (slot_index.h):
  // one probe instead of a descent. Kept with every leaf write.
  static uint64_t hash(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }
  // The working version's slot of `key` (hash h), or 0 (idx_).
  uint64_t indexed(std::string_view key, uint64_t h) const {
    return idx_.find(key, h, [this](uint64_t s) { return key_at(s, true); });
  }
  void index_set(std::string_view key, uint64_t h, uint64_t slot) {
    idx_.set(key, h, slot, [this](uint64_t s) { return key_at(s, true); });
  }
  void index_erase(std::string_view key, uint64_t h) {
    idx_.erase(key, h, [this](uint64_t s) { return key_at(s, true); });
  }
  uint32_t leaf_slot_of(uint64_t slot) const {
    return static_cast<uint32_t>((slot % l_.node_bytes - kNodeHeader) / l_.leaf_slot);
  }
  // Per leaf slot, 1 if it is visible at W: such a slot is never reusable,
  // and find_reusable skips it without reading the node.
  uint8_t* live(uint64_t leaf) {
    if (live_.size() < nodes() * l_.leaf_slots) live_.resize(nodes() * l_.leaf_slots);
    return &live_[leaf * l_.leaf_slots];
  }
  // Per leaf, its slots visible at W in key order: [count, slot...] (DRAM,
  // kept with every leaf write), so that scans of the working state sort
  // nothing.
  uint16_t* ord(uint64_t leaf) {
    const uint64_t stride = l_.leaf_slots + 1;
    if (ord_.size() < nodes() * stride) {
      ord_.resize(nodes() * stride);
      ord_prefix_.resize(nodes() * l_.leaf_slots);
    }
    return &ord_[leaf * stride];
  }
  // Beside ord(leaf): the key_prefix() of each slot it lists, in the same
  // order, so that binary searches in a leaf compare numbers and read a
  // slot only where 8 bytes tie. Sized with ord_.
  uint64_t* ord_prefix(uint64_t leaf) { return &ord_prefix_[leaf * l_.leaf_slots]; }
  // The first of the `o[0]` slots listed at `o` (prefixes `p`) whose key is
  // not below `key`.
  const uint16_t* lower_in_leaf(uint64_t leaf, const uint16_t* o, const uint64_t* p,
                                std::string_view key) const;
  void ord_insert(uint64_t leaf, uint32_t slot, std::string_view key);
  // A leaf's slots lie in the order they were written and are read in key
  // order (binary searches, scans), so each key read is a cache miss of its
  // own: ask for them at once (the first 64: large nodes hold more).
  void prefetch_keys(uint64_t leaf, const uint16_t* o) const {
    for (const uint16_t* at = o + 1; at != o + 1 + std::min<uint16_t>(o[0], 64); at++) {
      const std::byte* s = base_ + slot_off(leaf, true, *at);
      __builtin_prefetch(s + kLeafKlen);
      __builtin_prefetch(s + kLeafKey + l_.key_max - 1);
    }
  }
  // A scan about to reach `leaf` asks for its order early (it lies
  // elsewhere in DRAM than the leaf before it).
  void prefetch_order(uint64_t leaf) const {
    const uint64_t stride = l_.leaf_slots + 1;
    if ((leaf + 1) * stride > ord_.size()) return;
    __builtin_prefetch(&ord_[leaf * stride]);
    __builtin_prefetch(&ord_[leaf * stride + stride - 1]);
  }
  void ord_remove(uint64_t leaf, uint32_t slot);
  // The DRAM state of `leaf` that a put or delete changes: its live bytes,
  // its order and the order's prefixes, asked for at once (a binary search
  // over the prefixes alone would miss one line after another).
  void prefetch_leaf_state(uint64_t leaf) const {
    const uint64_t first = leaf * l_.leaf_slots, end = first + l_.leaf_slots;
    if (end > live_.size() || end > ord_prefix_.size()) return;
    for (uint64_t b = 0; b < l_.leaf_slots; b += 64) __builtin_prefetch(&live_[first + b], 1);
    prefetch_order(leaf);
    for (uint64_t i = 0; i < l_.leaf_slots; i += 8) __builtin_prefetch(&ord_prefix_[first + i], 1);
  }
  void index_leaf(uint64_t n);
  const Routes* routes(uint64_t n, uint64_t v) const {
    return v == working() && n < routes_.size() ? routes_[n].get() : nullptr;
  }
  // The entry of `es` whose child's range holds `key` (the last key <= it,
  // else the first).
  static size_t covering(const std::vector<Entry>& es, std::string_view key);
  // `level`: the node's level when known (the working tree: its height),
  // else -1 and the node's header says.
  bool scan_node(uint64_t n, int64_t level, uint64_t v, std::string_view begin,
                 std::string_view end, size_t* left, const ScanFn& fn, uint32_t depth) const;
  bool scan_ordered_leaf(uint64_t n, const uint16_t* o, std::string_view begin,
                         std::string_view end, size_t* left, const ScanFn& fn) const;

  // Replaces path[depth]'s node copy-on-write (compacted, or split in two);
  // the caller starts again from the root.
  Status replace(const std::vector<Step>& path, size_t depth);
  Result<uint64_t> allocate();
  void collect_retired();
  void write_node(uint64_t n, bool leaf, uint32_t level, const std::vector<uint64_t>& slots);

  Status recover_node(uint64_t n, uint32_t level, std::vector<bool>* seen, uint32_t depth);
  Status damaged(uint64_t n, const std::string& what) const {
    return Status::corruption(path_ + ": node " + std::to_string(n) + " " + what +
                              " (the tree is damaged; restore it from a copy)");
  }

  std::string path_;
  pm::FileLock lock_;
  std::unique_ptr<pm::Persist> p_;
  Layout l_;
  // A fork()ed child shares the file's mapping: its writes are refused.
  const uint64_t forks_at_open_ = pm::FileLock::forks();
  const std::byte* base_ = nullptr;

  mutable std::shared_mutex mu_;
  uint64_t committed_ = 0;
  uint64_t committed_root_ = 0;
  uint64_t root_ = 0;  // working root
  // The node each slot of root[2] holds durably (kInf: unknown). A commit
  // whose slot already holds the working root skips writing and flushing
  // it, one line fewer per commit while the root stays (most commits). Only
  // what recovery read from the committed slot (drained before that
  // version was stored) or a drain of this session made durable counts:
  // the other slot's bytes may be a write a killed session never drained,
  // and a slot written and not yet drained is unknown.
  uint64_t durable_root_[2] = {kInf, kInf};
  uint32_t height_ = 1;
  std::vector<uint64_t> free_;
  std::vector<std::pair<uint64_t, uint64_t>> retired_;  // (version, node)
  std::vector<std::pair<uint64_t, size_t>> dirty_;      // written this epoch
  bool epoch_dirty_ = false;
  std::vector<std::unique_ptr<Routes>> routes_;  // by node; inner nodes reachable at W
  std::vector<uint8_t> live_;  // by node and slot, leaves reachable at W: 1 if visible at W
  std::vector<uint16_t> ord_;                     // by node; leaves reachable at W
  std::vector<uint64_t> ord_prefix_;              // by node and ord_ position
  SlotIndex idx_;                                 // every key visible at W: its slot
  // During recovery: what idx_ will be built from, in one pass at the end.
  std::vector<std::pair<uint64_t, uint64_t>>* recovered_ = nullptr;
  std::vector<Step> path_scratch_;                // the writer's, reused
  std::vector<std::byte> slot_scratch_;
  Status failed_;  // a commit whose outcome is unknown: reopen to recover
  uint64_t splits_ = 0, compactions_ = 0, root_changes_ = 0;

  mutable std::mutex pins_mu_;
  mutable std::multiset<uint64_t> pins_;
  mutable std::atomic<uint64_t> oldest_pin_{kInf};  // *pins_.begin(), kept under pins_mu_
};

}  // namespace kv

#endif  // KVSTORE_VERSION_TREE_IMPL_H_
