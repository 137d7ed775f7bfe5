// OrderedIndex: every live key of the store's backend in byte order (memcmp,
// a shorter key before its extensions), a B+tree of keys in the container's
// heap beside the hash table (backend.h). Values stay in the hash table; the
// index holds keys only, so an overwrite never touches it: only a key that
// becomes live (a put of an absent or removed key) or stops being live (a
// remove) changes it.
//
// Crash safety rests on one rule, enforced by Backend::apply_put/apply_remove
// (the only writers): the index changes in the same working view and under
// the same commit as the hash table entry that makes the key live or dead,
// so every commit, and so every state recovery can find, has
// index keys == the backend's live keys. Nothing here is persisted on its
// own: the epoch's container commit makes both durable together.
//
// Nodes are pointer-free data blocks of node_bytes (from the key limit: at
// least three of the largest cells fit, so a split by bytes always fits). A
// node: a 32-byte header, then a sorted array of 4-byte cell offsets
// growing up, and cells growing down from the end
// (leaf cell: u16 key length, key; inner cell: u64 child, u16 key length,
// key: the child holds keys >= key and below the next cell's key; the
// header's `first` holds the keys below cell 0). Removed cells leave dead
// bytes that the next insert needing them compacts away. An emptied node
// leaves the tree (else a queue's keys, inserted ascending and removed
// oldest first, would leave a trail of empty leaves for every scan to walk);
// underfull ones are packed together only when a split finds the heap full
// (merge_leaves). A key appended at a node's end (ascending
// keys) leaves the node full and starts the new one.
//
// Damage: every node is checked (inside the heap, magic, level, counts,
// offsets, key lengths) before it is read, so a damaged file gives
// kCorruption naming the node, never a crash or a loop. Ordered reads
// (collect) check more, so that damage is never a silently shorter scan:
// each node's cells must fill it as its counts say, its keys must lie
// within its parent's separators and rise as they are read (see collect);
// a key damaged into one that still sorts between its neighbours is found
// by the store's scan, which reads every key from the table
// (Backend::check_indexed).
//
// Thread safety: insert and erase take the index's lock exclusively
// (callers hold a backend stripe lock: stripe, then index), reads share it.
#ifndef KVSTORE_ORDERED_INDEX_H_
#define KVSTORE_ORDERED_INDEX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pm/container.h"
#include "pm/status.h"

namespace kv {

using pm::Result;
using pm::Status;

inline constexpr uint64_t kIndexMagic = 0x3158444e494b564bull;  // "KVKINDX1"

struct IndexRoot {
  uint64_t magic;
  uint32_t node_bytes;
  uint32_t height;  // 1: the root is a leaf
  uint64_t root;    // address of the root node
  uint64_t keys;    // live keys (as of the last commit, once committed)
  uint64_t nodes;
};

class OrderedIndex {
 public:
  // An empty index for keys of up to max_key bytes, in new blocks of c (the
  // caller links the root and commits).
  static Result<IndexRoot*> create(pm::Container* c, uint32_t max_key);
  // Checks the root's fields; nodes are checked as they are read.
  static Result<std::unique_ptr<OrderedIndex>> attach(pm::Container* c, IndexRoot* root,
                                                      uint32_t max_key);
  // Node size for a key limit: the smallest power of two, at least 4 KiB,
  // that holds three cells of the longest key.
  static uint32_t node_bytes_for(uint32_t max_key);

  // Adds key. All or nothing: kNoSpace (the heap is full, and no
  // neighbouring leaves could be packed to give a node) leaves the index
  // with the keys it had. A key already present is left alone.
  Status insert(std::string_view key);
  // Removes key; an absent key is left alone.
  Status erase(std::string_view key);

  // Appends to *out up to max keys in order: from `from` (itself included
  // when inclusive) to below `end` (empty: no end).
  Status collect(std::string_view from, bool inclusive, std::string_view end, size_t max,
                 std::vector<std::string>* out) const;
  // The same, each key to fn (under the index's lock: fn must not call
  // into the index; the key's bytes are valid during the call only).
  Status collect(std::string_view from, bool inclusive, std::string_view end, size_t max,
                 const std::function<void(std::string_view)>& fn) const;

  // Whether the index holds key (kCorruption on a damaged node on its path).
  Result<bool> contains(std::string_view key) const;

  uint64_t keys() const;
  const IndexRoot* root() const { return root_; }

  // The whole tree, checked: every key in order to fn; problems found
  // (order, separators, node damage) into *problems. For the store checker.
  void verify(const std::function<void(std::string_view)>& fn,
              std::vector<std::string>* problems) const;

 private:
  class Node;
  struct Step {
    uint64_t node;
    int child;  // -1: `first`; else the cell index followed
  };
  struct Entry {
    std::string key;
    uint64_t child = 0;
  };
  OrderedIndex(pm::Container* c, IndexRoot* root, uint32_t max_key)
      : c_(c), root_(root), max_key_(max_key) {}
  Result<Node> node(uint64_t addr, uint32_t level) const;
  // node(), then its cells (Node::cells_fill) and its first and last keys
  // against the bounds its parent gives it, [lo, hi) (hi empty: none): what
  // collect() checks of each node it reads.
  Result<Node> enter(uint64_t addr, uint32_t level, std::string_view lo, std::string_view hi) const;
  // kCorruption naming the store's file and the node.
  Status damaged(uint64_t addr, const std::string& what) const;
  // The path from the root to the leaf where key belongs.
  Status descend(std::string_view key, std::vector<Step>* path) const;
  // That leaf, key's position in it (the first cell >= key), and whether
  // the cell there is key.
  Result<Node> leaf_for(std::string_view key, std::vector<Step>* path, uint32_t* pos,
                        bool* present) const;
  // A node from *pool (nodes merge_leaves() took out of the tree), else
  // from the heap.
  Result<uint64_t> new_node(std::vector<uint64_t>* pool);
  // insert() under the exclusive lock, splits taking nodes from *pool first.
  Status insert_locked(std::string_view key, std::vector<uint64_t>* pool);
  Status insert_split(std::vector<Step>& path, std::string_view key, int pos,
                      std::vector<uint64_t>* pool);
  // For a full heap: packs neighbouring leaves (pack_leaves) until *pool
  // holds `want` nodes; those it takes out of the tree are still allocated.
  Status merge_leaves(size_t want, std::vector<uint64_t>* pool);
  Status pack_all(size_t want, std::vector<uint64_t>* pool);
  // Packs `count` neighbouring leaves of parent, children from .. from +
  // count - 1 (-1: `first`), into fewer nodes if their cells fit: true,
  // the nodes freed into *pool, the parent's cells rewritten. False, with
  // nothing changed, if they do not fit.
  Result<bool> pack_leaves(Node& parent, int from, int count, std::vector<uint64_t>* pool);
  // A root with one child and no key gives way to that child, repeatedly.
  Status shrink_root();
  // Rewrites node addr with es[from, to). kCorruption when they do not fit
  // (only from a damaged node: see Node::entries).
  Status write_node(uint64_t addr, uint32_t level, uint64_t first, const std::vector<Entry>& es,
                    size_t from, size_t to);
  Status drop_empty(const std::vector<Step>& path);
  template <typename T>
  void set(T* field, T v) {
    c_->will_write(field, sizeof(T));
    *field = v;
  }

  pm::Container* c_;
  IndexRoot* root_;
  uint32_t max_key_;
  mutable std::shared_mutex mu_;
  // The last merge_leaves() found nothing to pack, and no key was erased
  // since (under mu_, exclusive).
  bool merge_futile_ = false;
};

}  // namespace kv

#endif  // KVSTORE_ORDERED_INDEX_H_
