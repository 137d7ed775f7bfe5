#include "kvstore/version_tree.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "kvstore/planted_bugs.h"
#include "kvstore/slot_index.h"
#include "libpm/file_lock.h"
#include "libpm/publish.h"

namespace kv {

namespace {

using pm::Result;
using pm::Status;

constexpr char kMagic[8] = {'P', 'M', 'V', 'T', 'R', 'E', 'E', '1'};
constexpr uint32_t kFormat = 1;
constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kLeafMagic = 0x4641454c;   // "LEAF"
constexpr uint32_t kInnerMagic = 0x524e4e49;  // "INNR"
constexpr uint64_t kNodeHeader = 64;
constexpr uint32_t kMaxHeight = 32;

// Superblock, node 0 of the file. The immutable part and its checksum, then
// the two root slots, then the committed version alone in its line.
constexpr uint64_t kSbChecksum = 32;
constexpr uint64_t kSbRoots = 64;
constexpr uint64_t kSbVersion = 128;

// Node header: u32 magic, u32 level (0: leaf), u32 slot count.
// Leaf slot:  u64 start, u64 end, u16 key length, u16 value length, u32 0,
//             key[key_max], value[value_max].
// Inner slot: u64 start, u64 end, u64 child, u16 key length, 6 bytes 0,
//             key[key_max]: the child holds keys >= key (below the next).
constexpr uint64_t kStart = 0, kEnd = 8, kLeafKlen = 16, kLeafVlen = 18, kLeafKey = 24;
constexpr uint64_t kChild = 16, kInnerKlen = 24, kInnerKey = 32;

// Slots are 16-byte multiples after a 64-byte header, so a slot's start and
// end versions share one aligned 16 bytes: one cache line, one disk sector.
// A torn write of a reused slot therefore leaves both old (the dead entry,
// invisible) or both new (start > committed: freed by recovery), never an
// old start with a new end, which would revive a dead entry.
uint64_t round16(uint64_t n) { return (n + 15) & ~uint64_t{15}; }
uint64_t round8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }  // planted bug only

bool visible(uint64_t start, uint64_t end, uint64_t v) {
  return start != 0 && start <= v && v < end;
}

struct Layout {
  uint32_t node_bytes = 0, key_max = 0, value_max = 0, fanout = 0;
  uint64_t leaf_slot = 0, inner_slot = 0;
  uint32_t leaf_slots = 0, inner_slots = 0;

  static Result<Layout> make(uint32_t node_bytes, uint32_t key_max, uint32_t value_max,
                            uint32_t fanout) {
    Layout l{node_bytes, key_max, value_max, fanout, 0, 0, 0, 0};
    if (node_bytes < 4096 || node_bytes % 4096 != 0 || node_bytes > (1u << 24)) {
      return Status::invalid_argument("node size " + std::to_string(node_bytes) +
                                      " is not a multiple of 4096 up to 16 MiB");
    }
    if (key_max < 1 || key_max > 255) {
      return Status::invalid_argument("key limit " + std::to_string(key_max) +
                                      " is outside 1..255 bytes");
    }
    const auto round = g_kv_planted_bugs.tree_unaligned_slots ? round8 : round16;
    l.leaf_slot = round(kLeafKey + key_max + value_max);
    l.inner_slot = round(kInnerKey + key_max);
    l.leaf_slots = static_cast<uint32_t>((node_bytes - kNodeHeader) / l.leaf_slot);
    l.inner_slots = static_cast<uint32_t>((node_bytes - kNodeHeader) / l.inner_slot);
    if (fanout != 0 && fanout < 4) {
      return Status::invalid_argument("fanout " + std::to_string(fanout) + " is below 4");
    }
    if (fanout != 0) {
      l.leaf_slots = std::min(l.leaf_slots, fanout);
      l.inner_slots = std::min(l.inner_slots, fanout);
    }
    l.leaf_slots = std::min(l.leaf_slots, 65535u);  // the DRAM order holds u16 slot ids
    l.inner_slots = std::min(l.inner_slots, 65535u);
    if (l.leaf_slots < std::min<uint32_t>(8, fanout == 0 ? 8 : fanout)) {
      return Status::invalid_argument("value limit " + std::to_string(value_max) +
                                      " leaves fewer than 8 entries in a " +
                                      std::to_string(node_bytes) + "-byte node");
    }
    return l;
  }
  uint64_t slot_bytes(bool leaf) const { return leaf ? leaf_slot : inner_slot; }
  uint32_t slots(bool leaf) const { return leaf ? leaf_slots : inner_slots; }
};

// memcpy of a string_view that may be empty (with a null data()).
void copy_to(std::byte* dst, std::string_view src) {
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
}

uint64_t sb_checksum(const std::byte* sb) { return XXH3_64bits(sb, kSbChecksum); }

}  // namespace

class VersionTree::Impl {
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

// ---- file set-up and recovery ----

Status VersionTree::Impl::init_file(pm::Persist& p, const Layout& l) {
  std::vector<std::byte> sb(4096);
  std::memcpy(sb.data(), kMagic, 8);
  const uint32_t head[5] = {kFormat, l.node_bytes, l.key_max, l.value_max, l.fanout};
  std::memcpy(sb.data() + 8, head, 20);
  const uint64_t sum = sb_checksum(sb.data());
  std::memcpy(sb.data() + kSbChecksum, &sum, 8);
  const uint64_t roots[2] = {0, 1};  // version 1's root is node 1
  std::memcpy(sb.data() + kSbRoots, roots, 16);
  p.write(0, sb.data(), sb.size());  // version 0: not yet a tree
  std::vector<std::byte> leaf(l.node_bytes);
  const uint32_t nh[3] = {kLeafMagic, 0, l.leaf_slots};
  std::memcpy(leaf.data(), nh, 12);
  p.write(l.node_bytes, leaf.data(), leaf.size());
  p.flush(0, 4096);
  p.flush(l.node_bytes, l.node_bytes);
  PM_TRY(p.drain());
  const uint64_t one = 1;
  p.write(kSbVersion, &one, 8);
  return p.persist_range(kSbVersion, 8);
}

Status VersionTree::Impl::recover() {
  if (p_->size() < 2 * uint64_t{l_.node_bytes} || p_->size() % l_.node_bytes != 0) {
    return Status::corruption(path_ + ": " + std::to_string(p_->size()) +
                              " bytes is not a whole number of " +
                              std::to_string(l_.node_bytes) + "-byte nodes (truncated?)");
  }
  idx_.clear();
  committed_ = u64(kSbVersion);
  if (committed_ == 0) {
    return Status::corruption(path_ + ": the tree was never completely created; remove it");
  }
  root_ = committed_root_ = u64(kSbRoots + 8 * (committed_ & 1));
  durable_root_[committed_ & 1] = committed_root_;
  durable_root_[(committed_ + 1) & 1] = kInf;
  if (root_ == 0 || root_ >= nodes()) {
    return Status::corruption(path_ + ": root node " + std::to_string(root_) +
                              " is outside the file's " + std::to_string(nodes()) + " nodes");
  }
  const uint32_t level = u32(node_off(root_) + 4);
  if (level >= kMaxHeight) return damaged(root_, "claims a height over 32");
  height_ = level + 1;
  std::vector<bool> seen(nodes(), false);
  seen[0] = true;
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  recovered_ = &keys;
  Status walked = recover_node(root_, level, &seen, 0);
  recovered_ = nullptr;
  PM_TRY(walked);
  idx_.build(keys);
  for (uint64_t n = nodes(); n-- > 1;) {
    if (!seen[n]) free_.push_back(n);
  }
  // What recovery rewrote is durable before the next epoch writes anything
  // with the same version numbers.
  for (const auto& [off, n] : dirty_) p_->flush(off, n);
  if (!dirty_.empty()) PM_TRY(p_->drain().with_context("recover " + path_));
  dirty_.clear();
  epoch_dirty_ = false;
  return Status();
}

// Forward garbage collection of one node: what is newer than the committed
// version goes; what it can see is checked and followed.
Status VersionTree::Impl::recover_node(uint64_t n, uint32_t level, std::vector<bool>* seen,
                                       uint32_t depth) {
  if (n == 0 || n >= nodes()) return damaged(n, "is outside the file");
  if ((*seen)[n]) return damaged(n, "is reachable twice (a cycle or a shared node)");
  (*seen)[n] = true;
  const uint64_t off = node_off(n);
  const bool leaf = level == 0;
  if (u32(off) != (leaf ? kLeafMagic : kInnerMagic) || u32(off + 4) != level ||
      u32(off + 8) != l_.slots(leaf)) {
    return damaged(n, "has a bad header for a level-" + std::to_string(level) + " node");
  }
  const uint64_t c = committed_;
  for (uint32_t i = 0; i < l_.slots(leaf); i++) {
    const uint64_t s = slot_off(n, leaf, i);
    uint64_t start = u64(s + kStart), end = u64(s + kEnd);
    if (start == 0 && end == 0) continue;
    if (start == 0 || start > c) {  // written by an epoch that never committed
      const uint64_t zero[2] = {0, 0};
      write(s, zero, 16);
      continue;
    }
    if (end != kInf && end > c) {  // ended by an epoch that never committed
      end = kInf;
      write_u64(s + kEnd, end);
    }
    if (!visible(start, end, c)) continue;
    if (u16(s + (leaf ? kLeafKlen : kInnerKlen)) > l_.key_max) {
      return damaged(n, "has a key longer than the tree's limit");
    }
    if (leaf && u16(s + kLeafVlen) > l_.value_max) {
      return damaged(n, "has a value longer than the tree's limit");
    }
    if (!leaf) PM_TRY(recover_node(u64(s + kChild), level - 1, seen, depth + 1));
  }
  leaf ? index_leaf(n) : index_inner(n);
  return Status();
}

// ---- reads ----

size_t VersionTree::Impl::covering(const std::vector<Entry>& es, std::string_view key) {
  auto it = std::upper_bound(es.begin(), es.end(), key,
                             [](std::string_view k, const Entry& e) { return k < e.key; });
  return it == es.begin() ? 0 : static_cast<size_t>(it - es.begin()) - 1;
}

size_t VersionTree::Impl::Routes::covering(std::string_view key) const {
  const uint64_t p = key_prefix(key);
  size_t lo = 0, n = prefixes.size();  // upper_bound: the first entry above key
  // A binary search would miss one line after another: ask for all at once.
  for (size_t i = 0; i < n; i += 8) __builtin_prefetch(&prefixes[i]);
  while (n > 0) {
    const size_t half = n / 2, mid = lo + half;
    if (p != prefixes[mid] ? p < prefixes[mid] : key < entries[mid].key) {
      n = half;
    } else {
      lo = mid + 1;
      n -= half + 1;
    }
  }
  return lo == 0 ? 0 : lo - 1;
}

void VersionTree::Impl::index_inner(uint64_t n) {
  if (routes_.size() < nodes()) routes_.resize(nodes());
  auto r = std::make_unique<Routes>();
  std::vector<Entry> es = visible_sorted(n, false, working());
  size_t bytes = 0;
  for (const Entry& e : es) bytes += e.key.size();
  r->keys.reserve(bytes);
  for (const Entry& e : es) r->keys.append(e.key);
  size_t at = 0;
  for (Entry& e : es) {
    const size_t len = e.key.size();
    e.key = std::string_view(r->keys).substr(at, len);
    at += len;
  }
  r->children.reserve(es.size());
  r->prefixes.reserve(es.size());
  for (const Entry& e : es) {
    const uint64_t slot = (e.off - node_off(n) - kNodeHeader) / l_.inner_slot;
    r->children.push_back({u64(e.off + kChild), slot});
    r->prefixes.push_back(key_prefix(e.key));
  }
  r->entries = std::move(es);
  routes_[n] = std::move(r);
}

int64_t VersionTree::Impl::route(uint64_t n, std::string_view key, uint64_t v,
                                 uint64_t* child) const {
  if (const Routes* r = routes(n, v)) {
    if (r->entries.empty()) return -1;
    const size_t j = r->covering(key);
    *child = r->children[j].node;
    return static_cast<int64_t>(r->children[j].slot);
  }
  int64_t best = -1, lowest = -1;
  std::string_view best_key, lowest_key;
  for (uint32_t i = 0; i < l_.inner_slots; i++) {
    const uint64_t s = slot_off(n, false, i);
    if (!visible(u64(s + kStart), u64(s + kEnd), v)) continue;
    const std::string_view k = key_at(s, false);
    if (k <= key && (best < 0 || k > best_key)) best = i, best_key = k;
    if (lowest < 0 || k < lowest_key) lowest = i, lowest_key = k;
  }
  const int64_t i = best >= 0 ? best : lowest;
  if (i >= 0) *child = u64(slot_off(n, false, static_cast<uint32_t>(i)) + kChild);
  return i;
}

uint64_t VersionTree::Impl::descend(std::string_view key, uint64_t v, uint64_t root,
                                    std::vector<Step>* path) const {
  uint64_t n = root;
  // The working tree's height is known: its descents read no node headers
  // (each one a cache miss on a large tree).
  int64_t level = root == root_ && v == working() ? int64_t{height_} - 1 : -1;
  while (level > 0 || (level < 0 && !is_leaf(n))) {
    uint64_t child = 0;
    const int64_t i = route(n, key, v, &child);
    if (path) path->push_back({n, i});
    if (i < 0) return 0;  // an inner node with nothing visible: no such key
    n = child;
    if (level > 0) level--;
  }
  if (path) path->push_back({n, -1});
  return n;
}

void VersionTree::Impl::index_leaf(uint64_t n) {
  uint8_t* f = live(n);
  uint16_t* o = ord(n);
  std::vector<Entry> es;
  std::vector<uint64_t> hs;
  for (uint32_t i = 0; i < l_.leaf_slots; i++) {
    const uint64_t s = slot_off(n, true, i);
    f[i] = 0;
    if (!visible(u64(s + kStart), u64(s + kEnd), working())) continue;
    f[i] = 1;
    es.push_back({key_at(s, true), i});
    hs.push_back(hash(es.back().key));
    idx_.prefetch(hs.back());  // a node's keys land all over the index: overlap the misses
  }
  for (size_t i = 0; i < es.size(); i++) {
    const uint64_t s = slot_off(n, true, es[i].off);
    recovered_ ? recovered_->push_back({hs[i], s}) : index_set(es[i].key, hs[i], s);
  }
  std::sort(es.begin(), es.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  o[0] = static_cast<uint16_t>(es.size());
  uint64_t* p = ord_prefix(n);
  for (size_t i = 0; i < es.size(); i++) {
    o[i + 1] = static_cast<uint16_t>(es[i].off);
    p[i] = key_prefix(es[i].key);
  }
}

const uint16_t* VersionTree::Impl::lower_in_leaf(uint64_t leaf, const uint16_t* o,
                                                 const uint64_t* p, std::string_view key) const {
  const uint64_t kp = key_prefix(key);
  size_t lo = 0, n = o[0];
  while (n > 0) {
    const size_t half = n / 2, mid = lo + half;
    if (p[mid] != kp ? p[mid] < kp : key_at(slot_off(leaf, true, o[1 + mid]), true) < key) {
      lo = mid + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  return o + 1 + lo;
}

void VersionTree::Impl::ord_insert(uint64_t leaf, uint32_t slot, std::string_view key) {
  uint16_t* o = ord(leaf);
  uint64_t* p = ord_prefix(leaf);
  const size_t at = static_cast<size_t>(lower_in_leaf(leaf, o, p, key) - (o + 1));
  const size_t tail = o[0] - at;
  std::memmove(o + 1 + at + 1, o + 1 + at, tail * sizeof *o);
  std::memmove(p + at + 1, p + at, tail * sizeof *p);
  o[1 + at] = static_cast<uint16_t>(slot);
  p[at] = key_prefix(key);
  o[0]++;
}

void VersionTree::Impl::ord_remove(uint64_t leaf, uint32_t slot) {
  uint16_t* o = ord(leaf);
  uint64_t* p = ord_prefix(leaf);
  uint16_t* last = o + 1 + o[0];
  const size_t at = static_cast<size_t>(std::find(o + 1, last, static_cast<uint16_t>(slot)) -
                                        (o + 1));
  if (at == o[0]) return;
  const size_t tail = o[0] - at - 1;
  std::memmove(o + 1 + at, o + 1 + at + 1, tail * sizeof *o);
  std::memmove(p + at, p + at + 1, tail * sizeof *p);
  o[0]--;
}

int64_t VersionTree::Impl::find_in_leaf(uint64_t leaf, std::string_view key, uint64_t v) const {
  for (uint32_t i = 0; i < l_.leaf_slots; i++) {
    const uint64_t s = slot_off(leaf, true, i);
    if (u16(s + kLeafKlen) != key.size()) continue;
    if (!visible(u64(s + kStart), u64(s + kEnd), v)) continue;
    if (key_at(s, true) == key) return i;
  }
  return -1;
}

Result<std::string> VersionTree::Impl::get(std::string_view key, uint64_t v,
                                           uint64_t root) const {
  std::shared_lock lk(mu_);
  if (root == 0) {  // the working state: one probe of its index
    const uint64_t s = indexed(key, hash(key));
    if (s == 0) return Status::not_found("no key '" + std::string(key) + "'");
    return std::string(value_at(s));
  }
  const uint64_t leaf = descend(key, v, root, nullptr);
  const int64_t i = leaf == 0 ? -1 : find_in_leaf(leaf, key, v);
  if (i < 0) return Status::not_found("no key '" + std::string(key) + "'");
  return std::string(value_at(slot_off(leaf, true, static_cast<uint32_t>(i))));
}

std::vector<VersionTree::Impl::Entry> VersionTree::Impl::visible_sorted(uint64_t n, bool leaf,
                                                                        uint64_t v) const {
  std::vector<Entry> out;
  const uint64_t stride = l_.leaf_slots + 1;
  if (leaf && v == working() && (n + 1) * stride <= ord_.size()) {  // already in order
    const uint16_t* o = &ord_[n * stride];
    out.reserve(o[0]);
    for (uint16_t i = 1; i <= o[0]; i++) {
      const uint64_t s = slot_off(n, true, o[i]);
      out.push_back({key_at(s, true), s});
    }
    return out;
  }
  out.reserve(l_.slots(leaf));
  for (uint32_t i = 0; i < l_.slots(leaf); i++) {
    const uint64_t s = slot_off(n, leaf, i);
    if (visible(u64(s + kStart), u64(s + kEnd), v)) out.push_back({key_at(s, leaf), s});
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  return out;
}

bool VersionTree::Impl::scan_node(uint64_t n, int64_t level, uint64_t v, std::string_view begin,
                                  std::string_view end, size_t* left, const ScanFn& fn,
                                  uint32_t depth) const {
  const bool leaf = level >= 0 ? level == 0 : is_leaf(n);
  const uint64_t stride = l_.leaf_slots + 1;
  if (leaf && v == working() && (n + 1) * stride <= ord_.size()) {
    return scan_ordered_leaf(n, &ord_[n * stride], begin, end, left, fn);
  }
  const Routes* r = leaf ? nullptr : routes(n, v);
  std::vector<Entry> own;
  if (r == nullptr) own = visible_sorted(n, leaf, v);
  const std::vector<Entry>& es = r ? r->entries : own;
  const size_t first = leaf || es.empty() || begin.empty() ? 0
                       : r                                 ? r->covering(begin)
                                                           : covering(es, begin);
  for (size_t i = first; i < es.size(); i++) {
    if (!end.empty() && es[i].key >= end) return false;
    if (leaf) {
      if (es[i].key < begin) continue;
      if (!fn(es[i].key, value_at(es[i].off))) return false;
      if (*left != 0 && --*left == 0) return false;
      continue;
    }
    if (i + 1 < es.size() && es[i + 1].key <= begin) continue;  // child wholly below begin
    if (depth >= kMaxHeight) return false;
    const uint64_t child = r ? r->children[i].node : u64(es[i].off + kChild);
    if (level == 1 && r && i + 1 < es.size()) prefetch_order(r->children[i + 1].node);
    if (!scan_node(child, level - (level > 0), v, begin, end, left, fn, depth + 1)) {
      return false;
    }
    begin = {};  // every later child's keys are above it
  }
  return true;
}

// A leaf of the working version through its slots in key order: a binary
// search to `begin`, then no copy.
bool VersionTree::Impl::scan_ordered_leaf(uint64_t n, const uint16_t* o, std::string_view begin,
                                          std::string_view end, size_t* left,
                                          const ScanFn& fn) const {
  prefetch_keys(n, o);
  const uint16_t* first =
      begin.empty() ? o + 1 : lower_in_leaf(n, o, &ord_prefix_[n * l_.leaf_slots], begin);
  for (const uint16_t* at = first; at != o + 1 + o[0]; at++) {
    const uint64_t s = slot_off(n, true, *at);
    const std::string_view key = key_at(s, true);
    if (!end.empty() && key >= end) return false;
    if (!fn(key, value_at(s))) return false;
    if (*left != 0 && --*left == 0) return false;
  }
  return true;
}

Status VersionTree::Impl::scan(uint64_t v, uint64_t root, std::string_view begin,
                               std::string_view end, size_t limit, const ScanFn& fn) const {
  std::shared_lock lk(mu_);
  if (root == 0) root = root_, v = working();
  size_t left = limit;
  // As in descend(): the working tree's height spares each node's header.
  const int64_t level = root == root_ && v == working() ? int64_t{height_} - 1 : -1;
  scan_node(root, level, v, begin, end, &left, fn, 0);
  return Status();
}

// ---- snapshots and reclamation ----

VersionTree::Snapshot VersionTree::Impl::snapshot(const VersionTree* owner) const {
  std::shared_lock lk(mu_);
  std::lock_guard g(pins_mu_);
  pins_.insert(committed_);
  oldest_pin_.store(*pins_.begin(), std::memory_order_release);
  return Snapshot(owner, committed_, committed_root_);
}

void VersionTree::Impl::unpin(uint64_t v) const {
  std::lock_guard g(pins_mu_);
  auto it = pins_.find(v);
  if (it != pins_.end()) pins_.erase(it);
  oldest_pin_.store(pins_.empty() ? kInf : *pins_.begin(), std::memory_order_release);
}

bool VersionTree::Impl::reusable(uint64_t slot, uint64_t bound) const {
  const uint64_t start = u64(slot + kStart), end = u64(slot + kEnd);
  if (start == 0) return true;
  if (g_kv_planted_bugs.tree_reuse_uncommitted_end) return end <= working();
  return end <= bound;
}

int64_t VersionTree::Impl::find_reusable(uint64_t node, bool leaf, uint64_t bound,
                                         int need) const {
  // A slot visible at W ends at inf: never reusable.
  const uint8_t* f = leaf && (node + 1) * l_.leaf_slots <= live_.size()
                         ? &live_[node * l_.leaf_slots]
                         : nullptr;
  int64_t first = -1;
  for (uint32_t i = 0; i < l_.slots(leaf) && need > 0; i++) {
    if (f != nullptr && f[i] != 0) continue;
    if (!reusable(slot_off(node, leaf, i), bound)) continue;
    if (first < 0) first = i;
    need--;
  }
  return need == 0 ? first : -1;
}

void VersionTree::Impl::collect_retired() {
  const uint64_t bound = reclaim_bound();
  auto keep = std::remove_if(retired_.begin(), retired_.end(), [&](const auto& r) {
    if (r.first > bound) return false;
    free_.push_back(r.second);
    return true;
  });
  retired_.erase(keep, retired_.end());
}

Result<uint64_t> VersionTree::Impl::allocate() {
  if (free_.empty()) collect_retired();
  if (free_.empty()) {
    const uint64_t have = nodes(), grow = std::max<uint64_t>(64, have / 2);
    Status s = p_->resize(p_->size(), (have + grow) * l_.node_bytes);
    if (!s.ok()) return s.with_context("grow " + path_);
    base_ = p_->view();
    for (uint64_t n = have + grow; n-- > have;) free_.push_back(n);
  }
  const uint64_t n = free_.back();
  free_.pop_back();
  return n;
}

// ---- writes ----

void VersionTree::Impl::write_node(uint64_t n, bool leaf, uint32_t level,
                                   const std::vector<uint64_t>& slots) {
  std::vector<std::byte> buf(l_.node_bytes);
  const uint32_t head[3] = {leaf ? kLeafMagic : kInnerMagic, level, l_.slots(leaf)};
  std::memcpy(buf.data(), head, 12);
  const uint64_t sb = l_.slot_bytes(leaf);
  for (size_t i = 0; i < slots.size(); i++) {
    std::memcpy(buf.data() + kNodeHeader + i * sb, base_ + slots[i], sb);
  }
  write(node_off(n), buf.data(), buf.size());
}

Status VersionTree::Impl::replace(const std::vector<Step>& path, size_t depth) {
  const uint64_t old = path[depth].node, w = working();
  const bool leaf = is_leaf(old);
  const uint32_t level = u32(node_off(old) + 4);
  std::vector<Entry> live = visible_sorted(old, leaf, w);
  // Split when a compacted copy would keep too little room: a quarter of
  // the node, and at least the three slots a child's split takes here.
  const uint32_t slots = l_.slots(leaf);
  const bool split = live.size() > std::min(slots * 3 / 4, slots - 3);
  // The parent must take the new entries first.
  const bool root = depth == 0;
  uint64_t pslot = 0;
  if (!root) {
    const Step& up = path[depth - 1];
    pslot = slot_off(up.node, false, static_cast<uint32_t>(up.slot));
    const int need = (u64(pslot + kStart) == w ? 0 : 1) + (split ? 1 : 0);
    const uint64_t bound = reclaim_bound();
    if (need > 0 && find_reusable(up.node, false, bound, need) < 0) return replace(path, depth - 1);
  } else if (split && height_ >= kMaxHeight) {
    return Status::no_space(path_ + ": the tree reached its height limit");
  }
  // Every node it needs comes first: a failure (a full disk) changes nothing.
  uint64_t got[3] = {0, 0, 0};
  const std::byte* const before = base_;
  const int want = 1 + (split ? 1 : 0) + (root && split ? 1 : 0);
  for (int i = 0; i < want; i++) {
    Result<uint64_t> r = allocate();
    if (!r.ok()) {
      for (int j = 0; j < i; j++) free_.push_back(got[j]);
      return r.status();
    }
    got[i] = *r;
  }
  uint64_t a = got[0];
  const uint64_t b = got[1], new_root = got[2];
  if (base_ != before) live = visible_sorted(old, leaf, w);  // growth remapped the keys' file
  if (g_kv_planted_bugs.tree_split_in_place) {
    free_.push_back(a);
    a = old;
  }
  // The index finds a key's entry by the key at its slot: a leaf rewritten
  // in place (only the planted bug above) must drop its entries first.
  if (leaf && a == old) {
    for (const Entry& e : live) index_erase(e.key, hash(e.key));
  }
  const size_t half = split ? live.size() / 2 : live.size();
  std::vector<uint64_t> lo, hi;
  for (size_t i = 0; i < live.size(); i++) (i < half ? lo : hi).push_back(live[i].off);
  const std::string sep = split ? std::string(live[half].key) : std::string();
  write_node(a, leaf, level, lo);
  if (split) write_node(b, leaf, level, hi);
  if (old != a) retired_.push_back({w, old});
  if (leaf) {
    index_leaf(a);
    if (split) index_leaf(b);
  } else {
    if (old < routes_.size()) routes_[old].reset();
    index_inner(a);
    if (split) index_inner(b);
  }
  split ? splits_++ : compactions_++;

  auto inner_slot = [&](uint64_t child, std::string_view key) {
    std::vector<std::byte> s(l_.inner_slot);
    const uint64_t se[3] = {w, kInf, child};
    const uint16_t klen = static_cast<uint16_t>(key.size());
    std::memcpy(s.data(), se, 24);
    std::memcpy(s.data() + kInnerKlen, &klen, 2);
    copy_to(s.data() + kInnerKey, key);
    return s;
  };
  if (root) {
    root_changes_++;
    if (!split) {
      root_ = a;
      return Status();
    }
    const auto s1 = inner_slot(a, {}), s2 = inner_slot(b, sep);
    std::vector<std::byte> buf(l_.node_bytes);
    const uint32_t head[3] = {kInnerMagic, level + 1, l_.inner_slots};
    std::memcpy(buf.data(), head, 12);
    std::memcpy(buf.data() + kNodeHeader, s1.data(), s1.size());
    std::memcpy(buf.data() + kNodeHeader + l_.inner_slot, s2.data(), s2.size());
    write(node_off(new_root), buf.data(), buf.size());
    index_inner(new_root);
    root_ = new_root;
    height_++;
    return Status();
  }
  const uint64_t pnode = path[depth - 1].node;
  const uint64_t bound = reclaim_bound();
  if (u64(pslot + kStart) == w) {
    write_u64(pslot + kChild, a);  // an entry this epoch added: nobody else sees it
    // (index_inner(pnode) below picks the new child up)
  } else {
    const std::string key(key_at(pslot, false));
    write_u64(pslot + kEnd, w);
    const auto s = inner_slot(a, key);
    write(slot_off(pnode, false, static_cast<uint32_t>(find_reusable(pnode, false, bound, 1))),
          s.data(), s.size());
  }
  if (split) {
    const auto s = inner_slot(b, sep);
    write(slot_off(pnode, false, static_cast<uint32_t>(find_reusable(pnode, false, bound, 1))),
          s.data(), s.size());
  }
  index_inner(pnode);
  return Status();
}

Status VersionTree::Impl::put(std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > l_.key_max) {
    return Status::invalid_argument("key of " + std::to_string(key.size()) +
                                    " bytes: the tree takes 1.." + std::to_string(l_.key_max));
  }
  if (value.size() > l_.value_max) {
    return Status::invalid_argument("value of " + std::to_string(value.size()) +
                                    " bytes: the tree takes up to " +
                                    std::to_string(l_.value_max));
  }
  PM_TRY(pm::FileLock::check_not_forked(forks_at_open_, path_));
  std::unique_lock lk(mu_);
  if (!failed_.ok()) return failed_;
  const uint64_t w = working();
  const uint64_t h = hash(key);
  std::vector<Step>& path = path_scratch_;
  for (;;) {
    // A key the working state holds is found by its index, and its leaf
    // needs a descent only if it must be replaced; a new key descends.
    path.clear();
    const uint64_t at = indexed(key, h);
    const uint64_t leaf = at != 0 ? at / l_.node_bytes : descend(key, w, root_, &path);
    if (leaf == 0) return damaged(path.back().node, "routes no key (no visible entry)");
    prefetch_leaf_state(leaf);
    const int64_t old = at != 0 ? static_cast<int64_t>(leaf_slot_of(at)) : -1;
    const uint16_t vlen = static_cast<uint16_t>(value.size());
    if (old >= 0) {
      const uint64_t s = slot_off(leaf, true, static_cast<uint32_t>(old));
      if (u64(s + kStart) == w) {  // this epoch's own entry: nobody else sees it
        if (!value.empty()) write(s + kLeafKey + l_.key_max, value.data(), value.size());
        write(s + kLeafVlen, &vlen, 2);
        return Status();
      }
    }
    const uint64_t bound = reclaim_bound();
    const int64_t i = find_reusable(leaf, true, bound, 1);
    if (i < 0) {
      if (path.empty() && descend(key, w, root_, &path) != leaf) {
        return damaged(leaf, "holds a key its parents do not route to it");
      }
      PM_TRY(replace(path, path.size() - 1));
      continue;
    }
    std::vector<std::byte>& s = slot_scratch_;
    s.assign(l_.leaf_slot, std::byte{0});
    const uint64_t se[2] = {w, kInf};
    const uint16_t klen = static_cast<uint16_t>(key.size());
    std::memcpy(s.data(), se, 16);
    std::memcpy(s.data() + kLeafKlen, &klen, 2);
    std::memcpy(s.data() + kLeafVlen, &vlen, 2);
    copy_to(s.data() + kLeafKey, key);
    copy_to(s.data() + kLeafKey + l_.key_max, value);
    write(slot_off(leaf, true, static_cast<uint32_t>(i)), s.data(),
          kLeafKey + l_.key_max + value.size());
    live(leaf)[i] = 1;
    index_set(key, h, slot_off(leaf, true, static_cast<uint32_t>(i)));
    if (old >= 0) {
      write_u64(slot_off(leaf, true, static_cast<uint32_t>(old)) + kEnd, w);
      live(leaf)[old] = 0;
      uint16_t* o = ord(leaf);  // the same key: the new slot takes the old one's place
      uint16_t* at = std::find(o + 1, o + 1 + o[0], static_cast<uint16_t>(old));
      if (at != o + 1 + o[0]) *at = static_cast<uint16_t>(i);
    } else {
      ord_insert(leaf, static_cast<uint32_t>(i), key);
    }
    return Status();
  }
}

Status VersionTree::Impl::del(std::string_view key) {
  PM_TRY(pm::FileLock::check_not_forked(forks_at_open_, path_));
  std::unique_lock lk(mu_);
  if (!failed_.ok()) return failed_;
  const uint64_t w = working();
  const uint64_t h = hash(key);
  // What the delete writes in DRAM is asked for as soon as the probe names
  // the slot, so that its misses overlap the key compare's.
  const uint64_t s = idx_.find(key, h, [this](uint64_t at) {
    prefetch_leaf_state(at / l_.node_bytes);
    return key_at(at, true);
  });
  if (s == 0) return Status::not_found("no key '" + std::string(key) + "'");
  const uint64_t leaf = s / l_.node_bytes;
  const uint32_t i = leaf_slot_of(s);
  index_erase(key, h);  // before the slot is cleared: it compares the key there
  if (u64(s + kStart) == w) {
    const uint64_t zero[2] = {0, 0};
    write(s, zero, 16);
  } else {
    write_u64(s + kEnd, w);
  }
  live(leaf)[i] = 0;
  ord_remove(leaf, i);
  return Status();
}

// The commit protocol: every write of the epoch and the root for W durable,
// then the version store that makes W current. A crash before that store
// leaves version W-1, whose entries and nodes W never overwrote.
Status VersionTree::Impl::commit() {
  PM_TRY(pm::FileLock::check_not_forked(forks_at_open_, path_));
  std::unique_lock lk(mu_);
  if (!failed_.ok()) return failed_;
  if (!epoch_dirty_) return Status();
  const uint64_t w = working();
  auto bump = [&] {
    p_->write(kSbVersion, &w, 8);
    return p_->persist_range(kSbVersion, 8);
  };
  if (g_kv_planted_bugs.tree_commit_before_persist) {
    p_->write(kSbRoots + 8 * (w & 1), &root_, 8);
    (void)p_->persist_range(kSbRoots, 16);
    (void)bump();
  }
  // root[W & 1] is read only once the version is W: it goes with the
  // epoch's writes, under the same drain (two barriers per commit).
  const bool root_durable = g_kv_planted_bugs.tree_root_kept_if_unchanged
                                ? root_ == committed_root_
                                : durable_root_[w & 1] == root_;
  if (!root_durable) {
    durable_root_[w & 1] = kInf;
    p_->write(kSbRoots + 8 * (w & 1), &root_, 8);
    p_->flush(kSbRoots + 8 * (w & 1), 8);
  }
  for (const auto& [off, n] : dirty_) p_->flush(off, n);
  Status s = p_->drain();
  if (!s.ok()) return s.with_context("commit " + path_);  // nothing current changed: retry
  durable_root_[w & 1] = root_;
  s = bump();
  if (!s.ok()) {
    // The version may or may not be durable: writing more into W could
    // make a crash recover half of it. Refuse until a reopen recovers.
    failed_ = s.with_context("commit " + path_ + " (reopen the tree to recover)");
    return failed_;
  }
  committed_ = w;
  committed_root_ = root_;
  dirty_.clear();
  epoch_dirty_ = false;
  collect_retired();
  return Status();
}

VersionTreeStats VersionTree::Impl::stats() const {
  std::shared_lock lk(mu_);
  VersionTreeStats st;
  st.version = committed_;
  st.nodes = nodes();
  st.free_nodes = free_.size();
  st.retired_nodes = retired_.size();
  st.splits = splits_;
  st.compactions = compactions_;
  st.root_changes = root_changes_;
  st.height = height_;
  st.key_max = l_.key_max;
  st.value_max = l_.value_max;
  st.node_bytes = l_.node_bytes;
  return st;
}

// ---- VersionTree ----

VersionTree::VersionTree(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VersionTree::~VersionTree() = default;

Result<std::unique_ptr<VersionTree>> VersionTree::create(const std::string& path,
                                                         const VersionTreeOptions& o,
                                                         const pm::PersistOpener& opener) {
  Result<Layout> l = Layout::make(o.node_bytes, o.key_max, o.value_max, o.fanout);
  if (!l.ok()) return l.status().with_context("create " + path);
  if (::access(path.c_str(), F_OK) == 0) {
    return Status::invalid_argument("create " + path + ": the file exists");
  }
  // Built under a temporary name and renamed: a crash leaves no half tree
  // at `path` (a stale temporary is harmless; its name holds the pid).
  const std::string tmp = path + ".creating." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  Result<pm::FileLock> lock = pm::FileLock::acquire(tmp, /*create=*/true);
  if (!lock.ok()) return lock.status();
  auto undo = [&](Status s) {
    ::unlink(tmp.c_str());
    return s.with_context("create " + path);
  };
  const uint64_t bytes = std::max<uint64_t>(o.initial_nodes, 2) * o.node_bytes;
  if (Status lim = pm::check_file_size_limit(bytes, tmp); !lim.ok()) return undo(lim);
  if (::ftruncate(lock->fd(), static_cast<off_t>(bytes)) != 0) {
    return undo(Status::from_errno("size " + tmp, errno));
  }
  Status s = pm::allocate_file_space(lock->fd(), 0, bytes, tmp);
  if (!s.ok()) return undo(s);
  Result<std::unique_ptr<pm::Persist>> p = opener ? opener(tmp) : pm::open_pmem_file(tmp);
  if (!p.ok()) return undo(p.status());
  s = Impl::init_file(**p, *l);
  if (s.ok() && ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    s = Status::from_errno("rename " + tmp + " to " + path, errno);
  }
  if (!s.ok()) return undo(s);
  s = pm::fsync_dir_of(path);
  if (!s.ok()) {
    // Renamed, but the name may not last: a create that fails leaves nothing.
    ::unlink(path.c_str());
    return s.with_context("create " + path);
  }
  (*p)->set_path(path);
  auto impl = std::make_unique<Impl>(path, std::move(*lock), std::move(*p), *l);
  PM_TRY(impl->recover());
  return std::unique_ptr<VersionTree>(new VersionTree(std::move(impl)));
}

Result<std::unique_ptr<VersionTree>> VersionTree::open(const std::string& path,
                                                       const pm::PersistOpener& opener) {
  Result<pm::FileLock> lock = pm::FileLock::acquire(path, /*create=*/false);
  if (!lock.ok()) return lock.status();
  Result<std::unique_ptr<pm::Persist>> p = opener ? opener(path) : pm::open_pmem_file(path);
  if (!p.ok()) return p.status();
  const std::byte* sb = (*p)->view();
  if ((*p)->size() < 4096 || std::memcmp(sb, kMagic, 8) != 0) {
    return Status::corruption(path + " is not a version tree (no PMVTREE1 header)");
  }
  uint64_t sum;
  std::memcpy(&sum, sb + kSbChecksum, 8);
  if (sum != sb_checksum(sb)) return Status::corruption(path + ": the header checksum fails");
  uint32_t head[5];
  std::memcpy(head, sb + 8, 20);
  if (head[0] != kFormat) {
    return Status::not_supported(path + ": tree format " + std::to_string(head[0]) +
                                 "; this build reads format " + std::to_string(kFormat));
  }
  Result<Layout> l = Layout::make(head[1], head[2], head[3], head[4]);
  if (!l.ok()) return Status::corruption(path + ": " + l.status().message());
  auto impl = std::make_unique<Impl>(path, std::move(*lock), std::move(*p), *l);
  PM_TRY(impl->recover());
  return std::unique_ptr<VersionTree>(new VersionTree(std::move(impl)));
}

Status VersionTree::put(std::string_view key, std::string_view value) {
  return impl_->put(key, value);
}
Status VersionTree::del(std::string_view key) { return impl_->del(key); }
Status VersionTree::commit() { return impl_->commit(); }
Result<std::string> VersionTree::get(std::string_view key) const { return impl_->get(key, 0, 0); }
Result<std::string> VersionTree::get(std::string_view key, const Snapshot& snap) const {
  return impl_->get(key, snap.version_, snap.root_);
}
Status VersionTree::scan(const Snapshot* snap, std::string_view begin, std::string_view end,
                         size_t limit, const ScanFn& fn) const {
  return snap ? impl_->scan(snap->version_, snap->root_, begin, end, limit, fn)
              : impl_->scan(0, 0, begin, end, limit, fn);
}
VersionTree::Snapshot VersionTree::snapshot() const { return impl_->snapshot(this); }
uint64_t VersionTree::committed_version() const { return impl_->committed(); }
VersionTreeStats VersionTree::stats() const { return impl_->stats(); }
void VersionTree::unpin(uint64_t v) const { impl_->unpin(v); }

VersionTree::Snapshot& VersionTree::Snapshot::operator=(Snapshot&& o) noexcept {
  if (this != &o) {
    if (tree_) tree_->unpin(version_);
    tree_ = o.tree_;
    version_ = o.version_;
    root_ = o.root_;
    o.tree_ = nullptr;
  }
  return *this;
}

VersionTree::Snapshot::~Snapshot() {
  if (tree_) tree_->unpin(version_);
}

// ---- iterator ----

void VersionTreeIterator::fill(std::string_view from, bool skip_from) {
  keys_.clear();
  values_.clear();
  pos_ = 0;
  const std::string start(from);
  status_ = tree_->scan(snap_, start, end_, batch_ + (skip_from ? 1 : 0),
                        [&](std::string_view k, std::string_view v) {
                          if (skip_from && k == start) return true;
                          keys_.emplace_back(k);
                          values_.emplace_back(v);
                          return true;
                        });
  exhausted_ = keys_.size() < batch_;
}

void VersionTreeIterator::seek(std::string_view key) { fill(key, false); }

void VersionTreeIterator::next() {
  if (++pos_ < keys_.size() || exhausted_ || keys_.empty()) return;
  const std::string last = keys_.back();
  fill(last, true);
}

}  // namespace kv
