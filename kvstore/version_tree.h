// VersionTree: an ordered, multi-version B+tree in a file of its own, after
// CDDS (Venkataraman et al., FAST'11): updates never overwrite what the last
// committed version can see, and one atomic 8-byte store of the version
// number commits an epoch. No journal, no log.
//
// Entries carry [start, end) versions; an entry is visible at version v when
// start <= v < end. Writes go to the working version W = committed + 1:
//   - a put adds an entry {W, inf} (ending the key's older entry at W), or
//     rewrites in place an entry that W itself added;
//   - a delete sets end = W (or frees an entry W added);
//   - a node without a usable slot is replaced copy-on-write by one or two
//     new nodes holding its entries visible at W; the parent's entry for it
//     ends at W and new entries {W, inf} point to the new nodes (a full root
//     gets a new root).
// commit() makes every write of the epoch and the root for W (root[W & 1]
// in the superblock, read only once the version is W) durable under one
// drain, then stores the version: that store is
// the commit. Recovery (open) walks what the committed version can see and
// undoes what is newer: entries with start > committed become free, ends
// > committed become inf (the paper's forward garbage collection); nodes
// nothing visible points to are free.
//
// A slot is reusable when it is free or dead: its end is at most both the
// committed version and the oldest version a snapshot holds. A retired
// node is reused once its retiring version is committed and no snapshot is
// older than it. Format and invariants: docs/ordered.md.
//
// Thread safety: writers (put, del, commit) are serialised with each other
// and with readers by one shared_mutex; gets and scans share it. Snapshots
// hold no lock: they pin a version, and iterators re-seek after each batch.
#ifndef KVSTORE_VERSION_TREE_H_
#define KVSTORE_VERSION_TREE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "libpm/persist.h"
#include "pm/status.h"

namespace kv {

struct VersionTreeOptions {
  uint32_t key_max = 32;      // longest key, 1..255 bytes
  uint32_t value_max = 128;   // longest value, 0..node_bytes/8 bytes
  uint32_t node_bytes = 4096; // a multiple of 4096
  uint64_t initial_nodes = 64;
  uint32_t fanout = 0;        // most entries per node; 0: all that fit (tests: deep trees)
};

struct VersionTreeStats {
  uint64_t version = 0;  // committed
  uint64_t nodes = 0;    // in the file
  uint64_t free_nodes = 0;
  uint64_t retired_nodes = 0;  // waiting for commits or snapshots
  uint64_t splits = 0, compactions = 0, root_changes = 0;
  uint32_t height = 0;
  uint32_t key_max = 0, value_max = 0, node_bytes = 0;
};

class VersionTree {
 public:
  // A pinned version: gets and scans through it see the tree as committed
  // then, whatever commits later. Movable; unpins on destruction.
  class Snapshot {
   public:
    Snapshot() = default;
    Snapshot(Snapshot&& o) noexcept : tree_(o.tree_), version_(o.version_), root_(o.root_) {
      o.tree_ = nullptr;
    }
    Snapshot& operator=(Snapshot&& o) noexcept;
    ~Snapshot();
    uint64_t version() const { return version_; }

   private:
    friend class VersionTree;
    Snapshot(const VersionTree* t, uint64_t v, uint64_t root)
        : tree_(t), version_(v), root_(root) {}
    const VersionTree* tree_ = nullptr;
    uint64_t version_ = 0;
    uint64_t root_ = 0;  // the root node at version_ (kept while pinned)
  };

  // Key order, from `begin` (inclusive) to `end` (exclusive; empty: no end).
  using ScanFn = std::function<bool(std::string_view key, std::string_view value)>;

  // Creates `path` (kInvalidArgument if it exists). `opener` maps the file
  // (tests substitute a recording Persist); empty: libpmem.
  static pm::Result<std::unique_ptr<VersionTree>> create(const std::string& path,
                                                         const VersionTreeOptions& options,
                                                         const pm::PersistOpener& opener = {});
  // Opens and recovers `path`: kCorruption names what is damaged.
  static pm::Result<std::unique_ptr<VersionTree>> open(const std::string& path,
                                                       const pm::PersistOpener& opener = {});
  ~VersionTree();
  VersionTree(const VersionTree&) = delete;
  VersionTree& operator=(const VersionTree&) = delete;

  // Writes of the working version; durable and visible to snapshots after
  // commit(). kInvalidArgument for a key or value over the limits.
  pm::Status put(std::string_view key, std::string_view value);
  pm::Status del(std::string_view key);  // kNotFound when absent
  // Makes the working version durable and current. After a failure the
  // epoch stays open: a later commit() retries it.
  pm::Status commit();

  // The working state (what put and del wrote, committed or not).
  pm::Result<std::string> get(std::string_view key) const;
  pm::Result<std::string> get(std::string_view key, const Snapshot& snap) const;
  // At most `limit` entries (0: all) in key order, at `snap` (null: the
  // working state), while fn returns true.
  pm::Status scan(const Snapshot* snap, std::string_view begin, std::string_view end, size_t limit,
                  const ScanFn& fn) const;

  Snapshot snapshot() const;
  uint64_t committed_version() const;
  VersionTreeStats stats() const;

  class Impl;

 private:
  explicit VersionTree(std::unique_ptr<Impl> impl);
  void unpin(uint64_t version) const;
  std::unique_ptr<Impl> impl_;
};

// Streams a range in key order, a batch at a time (no lock held between
// calls; each batch re-seeks after the last key seen).
class VersionTreeIterator {
 public:
  VersionTreeIterator(const VersionTree& tree, const VersionTree::Snapshot* snap,
                      std::string end = {}, size_t batch = 128)
      : tree_(&tree), snap_(snap), end_(std::move(end)), batch_(batch) {}
  void seek(std::string_view key);
  bool valid() const { return pos_ < keys_.size(); }
  void next();
  const std::string& key() const { return keys_[pos_]; }
  const std::string& value() const { return values_[pos_]; }
  pm::Status status() const { return status_; }

 private:
  void fill(std::string_view from, bool skip_from);
  const VersionTree* tree_;
  const VersionTree::Snapshot* snap_;
  std::string end_;
  size_t batch_;
  std::vector<std::string> keys_, values_;
  size_t pos_ = 0;
  bool exhausted_ = false;
  pm::Status status_;
};

}  // namespace kv

#endif  // KVSTORE_VERSION_TREE_H_
