#include "kvstore/ordered_index.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "kvstore/planted_bugs.h"

namespace kv {

namespace {

constexpr uint32_t kLeafMagic = 0x4641454c;   // "LEAF"
constexpr uint32_t kInnerMagic = 0x524e4e49;  // "INNR"
constexpr uint32_t kMaxHeight = 32;

struct NodeHeader {
  uint32_t magic;
  uint32_t level;  // 0: a leaf
  uint32_t n;      // cells
  uint32_t heap;   // offset of the lowest cell byte
  uint32_t dead;   // cell bytes no slot points to
  uint32_t reserved;
  uint64_t first;  // inner: the child for keys below cell 0
};
static_assert(sizeof(NodeHeader) == 32);
constexpr uint32_t kHeader = sizeof(NodeHeader);
// A slot: the cell's u32 offset. (Slots that also held the key's first 8
// bytes, so that a search would read fewer cells, measured slower: inserts
// shift three times the bytes, and the epoch's commit journals them.)
constexpr uint32_t kSlot = 4;

// Cell bytes: leaf u16 length + key; inner u64 child + u16 length + key.
uint32_t cell_bytes(bool leaf, size_t klen) { return (leaf ? 2 : 10) + static_cast<uint32_t>(klen); }

}  // namespace

Status OrderedIndex::damaged(uint64_t addr, const std::string& what) const {
  std::string path = c_->usage().path;  // only when damage is found: usage() costs a system call
  if (!path.empty()) path += ": ";
  return Status::corruption(path + "store index: node at " + std::to_string(addr) +
                            " is damaged (" + what + "); run 'pm check', then 'pm kv salvage'");
}

// A node, read through checks: header fields when made (node()), a cell's
// offset and length when it is read (a damaged cell reads as an empty key
// and marks the node bad; callers test bad() before trusting a result).
class OrderedIndex::Node {
 public:
  Node(pm::Container* c, uint64_t addr, uint32_t bytes, uint32_t max_key)
      : c_(c), p_(reinterpret_cast<char*>(addr)), bytes_(bytes), max_key_(max_key) {}

  uint64_t addr() const { return reinterpret_cast<uint64_t>(p_); }
  uint32_t bytes() const { return bytes_; }
  NodeHeader* h() const { return reinterpret_cast<NodeHeader*>(p_); }
  bool leaf() const { return h()->level == 0; }
  uint32_t n() const { return h()->n; }
  bool bad() const { return bad_; }
  uint32_t room() const { return h()->heap - kHeader - kSlot * n(); }

  std::string_view key(uint32_t i) const {
    const uint32_t off = slot(i);
    const uint32_t at = off + (leaf() ? 0 : 8);
    if (off < h()->heap || uint64_t{at} + 2 > bytes_) return mark_bad();
    uint16_t len;
    std::memcpy(&len, p_ + at, 2);
    if (len == 0 || len > max_key_ || uint64_t{at} + 2 + len > bytes_) return mark_bad();
    return {p_ + at + 2, len};
  }
  // Cell i's child (i == -1: `first`); 0 for a damaged cell.
  uint64_t child(int i) const {
    if (i < 0) return h()->first;
    const uint32_t off = slot(static_cast<uint32_t>(i));
    if (off < h()->heap || uint64_t{off} + 8 > bytes_) {
      mark_bad();
      return 0;
    }
    uint64_t c;
    std::memcpy(&c, p_ + off, 8);
    return c;
  }
  // First cell whose key is >= k (or > k when `after`).
  uint32_t bound(std::string_view k, bool after) const {
    uint32_t lo = 0, hi = n();
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      const std::string_view m = key(mid);
      if (after ? m <= k : m < k) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Adds a cell at position pos. REQUIRES: room() >= its cell and slot.
  void put(uint32_t pos, std::string_view k, uint64_t child) {
    const uint32_t size = cell_bytes(leaf(), k.size());
    NodeHeader* hd = h();
    const uint32_t off = hd->heap - size;
    c_->will_write(p_ + off, size);
    char* cell = p_ + off;
    if (!leaf()) {
      std::memcpy(cell, &child, 8);
      cell += 8;
    }
    const auto len = static_cast<uint16_t>(k.size());
    std::memcpy(cell, &len, 2);
    std::memcpy(cell + 2, k.data(), k.size());
    char* s = slot_at(pos);
    c_->will_write(s, kSlot * (n() - pos + 1));
    std::memmove(s + kSlot, s, kSlot * (n() - pos));
    std::memcpy(s, &off, 4);
    c_->will_write(hd, kHeader);
    hd->heap = off;
    hd->n++;
  }
  void remove(uint32_t pos) {
    const uint32_t size = cell_bytes(leaf(), key(pos).size());
    char* s = slot_at(pos);
    c_->will_write(s, kSlot * (n() - pos));
    std::memmove(s, s + kSlot, kSlot * (n() - pos - 1));
    NodeHeader* hd = h();
    c_->will_write(hd, kHeader);
    hd->n--;
    hd->dead += size;
  }
  // Whether the cells fill the node as its header says: each inside it
  // (from `heap` to the end) with a key length in (0, max_key], and their
  // bytes plus the dead ones exactly `bytes - heap`. O(1) per cell (its slot
  // and its length, which a read of the cell reads anyway; no key bytes):
  // what makes a damaged length (a key that runs on over the cells beside
  // it) or count (cells that are never read) corruption rather than a key
  // that was never written or keys that are silently left out.
  bool cells_fill() const {
    const uint32_t heap = h()->heap, pre = leaf() ? 0 : 8;
    uint64_t used = 0;
    for (uint32_t i = 0; i < n(); i++) {
      const uint32_t off = slot(i);
      if (off < heap || uint64_t{off} + pre + 2 > bytes_) return false;
      uint16_t len;
      std::memcpy(&len, p_ + off + pre, 2);
      if (len == 0 || len > max_key_ || uint64_t{off} + pre + 2 + len > bytes_) return false;
      used += pre + 2 + len;
    }
    return used + h()->dead == uint64_t{bytes_} - heap;
  }
  // Whether the two keys before position pos rise (true below 2): after a
  // binary search that stopped at pos, they are the keys that would reveal
  // a damaged key at pos - 1 that sent it past keys it should have stopped
  // at (see collect()).
  bool rises_before(uint32_t pos) const { return pos < 2 || key(pos - 2) < key(pos - 1); }

  // Every cell, in order (for a rewrite), into *out (cleared first). False
  // when the node is damaged in a way the header checks cannot see: its
  // cells plus its dead bytes must fill it from `heap` to the end (so that
  // no two slots share a cell and `dead` is true) and its keys must rise.
  // A rewrite trusts this: it is what keeps the rewrite inside the node.
  bool entries(std::vector<Entry>* out) const {
    out->clear();
    uint64_t used = 0;
    for (uint32_t i = 0; i < n(); i++) {
      const std::string_view k = key(i);
      if (bad_ || (i > 0 && k <= out->back().key)) return false;
      used += cell_bytes(leaf(), k.size());
      out->push_back({std::string(k), leaf() ? 0 : child(i)});
    }
    return !bad_ && used + h()->dead == uint64_t{bytes_} - h()->heap;
  }

 private:
  char* slot_at(uint32_t i) const { return p_ + kHeader + kSlot * i; }
  uint32_t slot(uint32_t i) const {
    uint32_t off;
    std::memcpy(&off, slot_at(i), 4);
    return off;
  }
  std::string_view mark_bad() const {
    bad_ = true;
    return {};
  }

  pm::Container* c_;
  char* p_;
  uint32_t bytes_, max_key_;
  mutable bool bad_ = false;
};

uint32_t OrderedIndex::node_bytes_for(uint32_t max_key) {
  // Three of the largest cells: a split by bytes leaves each half at most
  // half of the node plus one cell, which then fits.
  const uint64_t want = kHeader + 3ull * (kSlot + cell_bytes(false, max_key));
  uint64_t b = 4096;
  while (b < want) b *= 2;
  return static_cast<uint32_t>(b);
}

Result<IndexRoot*> OrderedIndex::create(pm::Container* c, uint32_t max_key) {
  Result<void*> mem = c->alloc(sizeof(IndexRoot), pm::AllocKind::kData);
  if (!mem.ok()) return mem.status();
  auto* r = static_cast<IndexRoot*>(*mem);
  c->will_write(r, sizeof *r);
  *r = IndexRoot{kIndexMagic, node_bytes_for(max_key), 1, 0, 0, 0};
  OrderedIndex idx(c, r, max_key);
  std::vector<uint64_t> none;
  Result<uint64_t> leaf = idx.new_node(&none);
  if (!leaf.ok()) {
    (void)c->free(r);
    return leaf.status();
  }
  (void)idx.write_node(*leaf, 0, 0, {}, 0, 0);  // an empty node always fits
  r->root = *leaf;
  r->nodes = 1;
  return r;
}

Result<std::unique_ptr<OrderedIndex>> OrderedIndex::attach(pm::Container* c, IndexRoot* r,
                                                           uint32_t max_key) {
  const char* p = reinterpret_cast<const char*>(r);
  if (!c->contains(p) || !c->contains(p + sizeof *r - 1) || r->magic != kIndexMagic ||
      r->node_bytes != node_bytes_for(max_key) || r->height == 0 || r->height > kMaxHeight) {
    return Status::corruption("store index: its root is damaged; run 'pm check', then 'pm kv salvage'");
  }
  return std::unique_ptr<OrderedIndex>(new OrderedIndex(c, r, max_key));
}

uint64_t OrderedIndex::keys() const {
  std::shared_lock<std::shared_mutex> l(mu_);
  return root_->keys;
}

Result<OrderedIndex::Node> OrderedIndex::node(uint64_t addr, uint32_t level) const {
  const uint32_t bytes = root_->node_bytes;
  const char* p = reinterpret_cast<const char*>(addr);
  if (addr % 16 != 0 || !c_->contains(p) || !c_->contains(p + bytes - 1)) {
    return damaged(addr, "outside the heap");
  }
  const auto* h = reinterpret_cast<const NodeHeader*>(p);
  if (h->magic != (level == 0 ? kLeafMagic : kInnerMagic) || h->level != level) {
    return damaged(addr, "not a level " + std::to_string(level) + " node");
  }
  if (h->heap > bytes || h->n > (bytes - kHeader) / kSlot || kHeader + kSlot * h->n > h->heap ||
      h->dead > bytes) {
    return damaged(addr, "counts out of range");
  }
  return Node(c_, addr, bytes, max_key_);
}

Result<uint64_t> OrderedIndex::new_node(std::vector<uint64_t>* pool) {
  if (!pool->empty()) {
    const uint64_t a = pool->back();
    pool->pop_back();
    return a;
  }
  Result<void*> m = c_->alloc(root_->node_bytes, pm::AllocKind::kData);
  if (!m.ok()) return m.status();
  return reinterpret_cast<uint64_t>(*m);
}

Status OrderedIndex::write_node(uint64_t addr, uint32_t level, uint64_t first,
                                const std::vector<Entry>& es, size_t from, size_t to) {
  const uint32_t bytes = root_->node_bytes;
  uint64_t total = kHeader;
  for (size_t i = from; i < to; i++) total += kSlot + cell_bytes(level == 0, es[i].key.size());
  if (total > bytes) return damaged(addr, "its cells do not fit it");  // entries() lets none through
  std::vector<char> img(bytes, 0);
  auto* h = reinterpret_cast<NodeHeader*>(img.data());
  h->magic = level == 0 ? kLeafMagic : kInnerMagic;
  h->level = level;
  h->first = first;
  uint32_t heap = bytes;
  for (size_t i = from; i < to; i++) {
    const Entry& e = es[i];
    heap -= cell_bytes(level == 0, e.key.size());
    char* cell = img.data() + heap;
    if (level != 0) {
      std::memcpy(cell, &e.child, 8);
      cell += 8;
    }
    const auto len = static_cast<uint16_t>(e.key.size());
    std::memcpy(cell, &len, 2);
    std::memcpy(cell + 2, e.key.data(), e.key.size());
    std::memcpy(img.data() + kHeader + kSlot * (i - from), &heap, 4);
  }
  h->n = static_cast<uint32_t>(to - from);
  h->heap = heap;
  c_->will_write(reinterpret_cast<void*>(addr), bytes);
  std::memcpy(reinterpret_cast<void*>(addr), img.data(), bytes);
  return Status();
}

Status OrderedIndex::descend(std::string_view key, std::vector<Step>* path) const {
  path->clear();
  uint64_t addr = root_->root;
  for (uint32_t level = root_->height; level-- > 0;) {
    Result<Node> nd = node(addr, level);
    if (!nd.ok()) return nd.status();
    if (level == 0) {
      path->push_back({addr, 0});
      break;
    }
    const int c = static_cast<int>(nd->bound(key, true)) - 1;
    path->push_back({addr, c});
    addr = nd->child(c);
    if (nd->bad()) return damaged(nd->addr(), "a cell out of range");
  }
  return Status();
}

Result<OrderedIndex::Node> OrderedIndex::leaf_for(std::string_view key, std::vector<Step>* path,
                                                  uint32_t* pos, bool* present) const {
  PM_TRY(descend(key, path));
  Result<Node> leaf = node(path->back().node, 0);
  if (!leaf.ok()) return leaf.status();
  *pos = leaf->bound(key, false);
  *present = *pos < leaf->n() && leaf->key(*pos) == key;
  if (leaf->bad()) return damaged(leaf->addr(), "a cell out of range");
  return leaf;
}

Status OrderedIndex::insert(std::string_view key) {
  thread_local std::vector<Step> path;
  uint32_t pos;
  bool present;
  {
    // The descent first under the shared lock: its cache misses (a node a
    // level in a large index) are then taken while other inserts go on,
    // and the exclusive section below finds the path in cache. Two
    // gleaners inserting at once spent most of their time in the lock.
    std::shared_lock<std::shared_mutex> r(mu_);
    Result<Node> leaf = leaf_for(key, &path, &pos, &present);
    if (leaf.ok() && present) return Status();
  }
  std::unique_lock<std::shared_mutex> l(mu_);
  std::vector<uint64_t> pool;
  Status s = insert_locked(key, &pool);
  if (s.code() == pm::Code::kNoSpace) {
    // The heap has no node for a split. Removes may have left leaves
    // sparse, and their freed bytes never add up to a free node (a full
    // disk of small values whose every other key was removed took no new
    // key: a user trial). Neighbours packed into one node fewer give one.
    Status m = merge_futile_ ? Status() : merge_leaves(root_->height + 1, &pool);
    if (!m.ok()) {
      s = m;
    } else if (!pool.empty()) {
      s = insert_locked(key, &pool);
    }
  }
  for (uint64_t a : pool) {  // out of the tree and not needed: free
    Status f = c_->free(reinterpret_cast<void*>(a));
    if (s.ok()) s = f;
  }
  return s;
}

Status OrderedIndex::insert_locked(std::string_view key, std::vector<uint64_t>* pool) {
  thread_local std::vector<Step> path;
  uint32_t pos;
  bool present;
  Result<Node> leaf = leaf_for(key, &path, &pos, &present);
  if (!leaf.ok()) return leaf.status();
  if (present) return Status();
  const uint32_t need = kSlot + cell_bytes(true, key.size());
  if (leaf->room() >= need) {
    leaf->put(pos, key, 0);
  } else if (leaf->room() + leaf->h()->dead >= need) {  // removed cells make room
    std::vector<Entry> es;
    if (!leaf->entries(&es)) return damaged(leaf->addr(), "its cells and counts disagree");
    es.insert(es.begin() + pos, Entry{std::string(key), 0});
    PM_TRY(write_node(leaf->addr(), 0, 0, es, 0, es.size()));
  } else {
    return insert_split(path, key, static_cast<int>(pos), pool);
  }
  set(&root_->keys, root_->keys + 1);
  return Status();
}

// The leaf has no room without a rewrite: rewrite (compact) or split it,
// and each ancestor that cannot take the separator, and the root. Every
// node this may need is allocated first, so that kNoSpace changes nothing.
Status OrderedIndex::insert_split(std::vector<Step>& path, std::string_view key, int pos,
                                  std::vector<uint64_t>* pool) {
  const uint32_t height = root_->height;
  const uint32_t widest = kSlot + cell_bytes(false, max_key_);
  // Every node the split may rewrite is checked before anything is
  // written (a damaged one stops the insert with nothing changed), and
  // counted: the loop below splits exactly the nodes counted here.
  std::vector<Entry> es;
  {
    Result<Node> leaf = node(path.back().node, 0);
    if (!leaf.ok()) return leaf.status();
    if (!leaf->entries(&es)) return damaged(leaf->addr(), "its cells and counts disagree");
  }
  size_t splits = 1;
  for (size_t d = path.size() - 1; d > 0; d--, splits++) {
    Result<Node> parent = node(path[d - 1].node, height - static_cast<uint32_t>(d));
    if (!parent.ok()) return parent.status();
    if (!parent->entries(&es)) return damaged(parent->addr(), "its cells and counts disagree");
    if (parent->room() + parent->h()->dead >= widest) break;
  }
  if (splits == path.size()) splits++;  // a new root
  std::vector<uint64_t> spare;
  for (size_t i = 0; i < splits; i++) {
    Result<uint64_t> m = new_node(pool);
    if (!m.ok()) {
      pool->insert(pool->end(), spare.begin(), spare.end());  // freed by insert()
      return m.status();
    }
    spare.push_back(*m);
  }
  std::string carry(key);
  uint64_t carry_child = 0;
  bool placed = false;
  for (size_t d = path.size(); d-- > 0 && !placed;) {
    const auto level = static_cast<uint32_t>(path.size() - 1 - d);
    Result<Node> nd = node(path[d].node, level);
    if (!nd.ok()) return nd.status();
    const uint32_t old_n = nd->n();
    if (level > 0 && nd->room() >= kSlot + cell_bytes(false, carry.size())) {
      nd->put(static_cast<uint32_t>(pos), carry, carry_child);
      placed = true;
      break;
    }
    if (!nd->entries(&es)) return damaged(nd->addr(), "its cells and counts disagree");
    es.insert(es.begin() + pos, Entry{carry, carry_child});
    uint64_t total = 0;
    for (const Entry& e : es) total += kSlot + cell_bytes(level == 0, e.key.size());
    const uint64_t first = level == 0 ? 0 : nd->h()->first;
    if (total + kHeader <= root_->node_bytes) {  // the dead bytes make room: rewrite in place
      PM_TRY(write_node(nd->addr(), level, first, es, 0, es.size()));
      placed = true;
      break;
    }
    // Split. Appending at a node's end (ascending keys) leaves the node
    // full and starts the new one with the new entry; otherwise half the
    // bytes go each way.
    size_t m = es.size() - 1;
    if (static_cast<uint32_t>(pos) != old_n) {
      uint64_t acc = 0;
      for (m = 0; m + 1 < es.size(); m++) {
        acc += kSlot + cell_bytes(level == 0, es[m].key.size());
        if (acc * 2 >= total) break;
      }
      m = std::max<size_t>(m, 1);
    }
    if (spare.empty()) return damaged(nd->addr(), "it splits past what its counts allowed");
    const uint64_t right = spare.back();
    spare.pop_back();
    if (level == 0) {
      PM_TRY(write_node(nd->addr(), 0, 0, es, 0, m));
      PM_TRY(write_node(right, 0, 0, es, m, es.size()));
    } else {
      // es[m]'s key goes up; its child becomes the right node's first.
      PM_TRY(write_node(nd->addr(), level, first, es, 0, m));
      PM_TRY(write_node(right, level, es[m].child, es, m + 1, es.size()));
    }
    carry = es[m].key;
    carry_child = right;
    pos = d > 0 ? path[d - 1].child + 1 : 0;
    set(&root_->nodes, root_->nodes + 1);
    if (g_kv_planted_bugs.index_split_drops_separator) {
      placed = true;  // the new right node is never linked
      break;
    }
  }
  if (!placed) {  // the root split: a new root above it
    if (spare.empty()) return damaged(root_->root, "it splits past what its counts allowed");
    const uint64_t top = spare.back();
    spare.pop_back();
    PM_TRY(write_node(top, height, root_->root, {Entry{carry, carry_child}}, 0, 1));
    set(&root_->root, top);
    set(&root_->height, height + 1);
    set(&root_->nodes, root_->nodes + 1);
  }
  pool->insert(pool->end(), spare.begin(), spare.end());
  set(&root_->keys, root_->keys + 1);
  return Status();
}

Status OrderedIndex::erase(std::string_view key) {
  std::unique_lock<std::shared_mutex> l(mu_);
  thread_local std::vector<Step> path;
  uint32_t pos;
  bool present;
  Result<Node> leaf = leaf_for(key, &path, &pos, &present);
  if (!leaf.ok()) return leaf.status();
  if (!present) return Status();
  merge_futile_ = false;
  leaf->remove(pos);
  set(&root_->keys, root_->keys - std::min<uint64_t>(root_->keys, 1));
  if (leaf->n() == 0 && path.size() > 1) return drop_empty(path);
  return Status();
}

// The leaf at the end of `path` is empty. Left in place, emptied leaves
// would pile up (keys inserted in ascending order and removed from the
// oldest, as a queue's, never reach them again) and every scan would walk
// them. So it leaves its parent (a parent left without any child leaves its
// own, up to the root, which then becomes an empty leaf), and a root with
// one child and no key gives way to that child.
Status OrderedIndex::drop_empty(const std::vector<Step>& path) {
  const uint32_t height = root_->height;
  std::vector<uint64_t> dropped;
  for (size_t d = path.size() - 1; d > 0; d--) {
    Result<Node> parent = node(path[d - 1].node, height - static_cast<uint32_t>(d));
    if (!parent.ok()) return parent.status();
    const int c = path[d - 1].child;
    if (c >= 0 && static_cast<uint32_t>(c) < parent->n()) {
      parent->remove(static_cast<uint32_t>(c));
    } else if (c < 0 && parent->n() > 0) {
      // The first child goes: cell 0's child takes its place, and cell 0's
      // key (the bound between them) is no longer needed.
      const uint64_t next = parent->child(0);
      if (parent->bad()) return damaged(parent->addr(), "a cell out of range");
      set(&parent->h()->first, next);
      parent->remove(0);
    } else if (c < 0 && d - 1 > 0) {
      dropped.push_back(path[d].node);  // the parent's only child: the parent goes too
      continue;
    } else if (c < 0) {
      // The root's only child: the root becomes an empty leaf.
      dropped.push_back(path[d].node);
      PM_TRY(write_node(parent->addr(), 0, 0, {}, 0, 0));
      set(&root_->height, 1u);
      break;
    } else {
      return damaged(parent->addr(), "a child out of range");
    }
    dropped.push_back(path[d].node);
    break;
  }
  for (uint64_t a : dropped) PM_TRY(c_->free(reinterpret_cast<void*>(a)));
  set(&root_->nodes, root_->nodes - std::min<uint64_t>(root_->nodes, dropped.size()));
  return shrink_root();
}

Status OrderedIndex::shrink_root() {
  while (root_->height > 1) {
    Result<Node> top = node(root_->root, root_->height - 1);
    if (!top.ok()) return top.status();
    if (top->n() > 0) break;
    const uint64_t child = top->child(-1);
    PM_TRY(c_->free(reinterpret_cast<void*>(root_->root)));
    set(&root_->root, child);
    set(&root_->height, root_->height - 1);
    set(&root_->nodes, root_->nodes - std::min<uint64_t>(root_->nodes, 1));
  }
  return Status();
}

Status OrderedIndex::merge_leaves(size_t want, std::vector<uint64_t>* pool) {
  const size_t had = pool->size();
  Status s = pack_all(want, pool);
  // Until a key is erased, no leaf thins out: a walk that found nothing to
  // pack would find nothing again (a full disk's retries of a blocked
  // update walked the whole tree for each record behind it).
  merge_futile_ = s.ok() && pool->size() == had && c_->commit_fits();
  return s;
}

Status OrderedIndex::pack_all(size_t want, std::vector<uint64_t>* pool) {
  if (root_->height < 2) return Status();
  // Depth first to the parents of leaves; in each, two or three
  // neighbouring leaves whose cells fit one node fewer are packed into it
  // (every other key removed leaves leaves half full: two of them may not
  // fit one node, three fit two).
  // Each pack rewrites up to four nodes, which the epoch's commit
  // journals: on a full disk, a pack only while the commit has room for it
  // (else the epoch outgrows its journal's room, and no commit goes
  // through until the disk has room: Container::commit_fits). The rest
  // after the next commit.
  std::vector<std::pair<uint64_t, uint32_t>> todo{{root_->root, root_->height - 1}};
  while (!todo.empty() && pool->size() < want && c_->commit_fits()) {
    const auto [addr, level] = todo.back();
    todo.pop_back();
    Result<Node> nd = node(addr, level);
    if (!nd.ok()) return nd.status();
    if (level > 1) {
      for (int i = -1; i < static_cast<int>(nd->n()); i++) todo.emplace_back(nd->child(i), level - 1);
      if (nd->bad()) return damaged(addr, "a cell out of range");
      continue;
    }
    for (int i = -1; i + 1 < static_cast<int>(nd->n()) && pool->size() < want && c_->commit_fits();) {
      Result<bool> merged = pack_leaves(*nd, i, 2, pool);
      if (merged.ok() && !*merged && i + 2 < static_cast<int>(nd->n())) {
        merged = pack_leaves(*nd, i, 3, pool);
      }
      if (!merged.ok()) return merged.status();
      if (!*merged) i++;  // else child i may take its new neighbours too
    }
  }
  return shrink_root();
}

Result<bool> OrderedIndex::pack_leaves(Node& parent, int from, int count,
                                       std::vector<uint64_t>* pool) {
  const uint32_t cap = root_->node_bytes - kHeader;
  std::vector<uint64_t> addrs;
  std::vector<Node> leaves;
  uint64_t used = 0;
  for (int k = 0; k < count; k++) {
    addrs.push_back(parent.child(from + k));
    if (parent.bad()) return damaged(parent.addr(), "a cell out of range");
    Result<Node> leaf = node(addrs.back(), 0);
    if (!leaf.ok()) return leaf.status();
    // The live cells' bytes, from the header alone (no key is read).
    used += kSlot * leaf->n() + (leaf->bytes() - leaf->h()->heap - leaf->h()->dead);
    leaves.push_back(*leaf);
  }
  if (used > uint64_t{cap} * (count - 1)) return false;
  std::vector<Entry> es, part;
  for (const Node& leaf : leaves) {
    if (!leaf.entries(&part)) return damaged(leaf.addr(), "its cells and counts disagree");
    es.insert(es.end(), part.begin(), part.end());
  }
  // Greedy: each node as full as it goes; cut[k] is node k's first entry.
  std::vector<size_t> cut{0};
  uint64_t acc = 0;
  for (size_t j = 0; j < es.size(); j++) {
    const uint32_t c = kSlot + cell_bytes(true, es[j].key.size());
    if (acc + c > cap) {
      cut.push_back(j);
      acc = 0;
    }
    acc += c;
  }
  const size_t nodes = cut.size();
  if (es.empty() || nodes >= static_cast<size_t>(count)) return false;
  // The parent: the cells of children from+1 .. from+count-1 give way to
  // one per node after the first, keyed by its first key (the first keeps
  // its cell, or `first`, and its lower bound).
  std::vector<Entry> pes;
  if (!parent.entries(&pes)) return damaged(parent.addr(), "its cells and counts disagree");
  const auto at = static_cast<size_t>(from + 1);
  const size_t drop = g_kv_planted_bugs.index_merge_keeps_cell ? count - 2 : count - 1;
  pes.erase(pes.begin() + at, pes.begin() + at + drop);
  for (size_t k = 1; k < nodes; k++) pes.insert(pes.begin() + at + k - 1, Entry{es[cut[k]].key, addrs[k]});
  uint64_t total = kHeader;
  for (const Entry& e : pes) total += kSlot + cell_bytes(false, e.key.size());
  if (total > root_->node_bytes) return false;  // a longer separator that does not fit
  cut.push_back(es.size());
  for (size_t k = 0; k < nodes; k++) PM_TRY(write_node(addrs[k], 0, 0, es, cut[k], cut[k + 1]));
  PM_TRY(write_node(parent.addr(), parent.h()->level, parent.h()->first, pes, 0, pes.size()));
  for (size_t k = nodes; k < addrs.size(); k++) pool->push_back(addrs[k]);
  const uint64_t freed = addrs.size() - nodes;
  set(&root_->nodes, root_->nodes - std::min<uint64_t>(root_->nodes, freed));
  return true;
}

Result<bool> OrderedIndex::contains(std::string_view key) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  thread_local std::vector<Step> path;
  uint32_t pos;
  bool present;
  Result<Node> leaf = leaf_for(key, &path, &pos, &present);
  if (!leaf.ok()) return leaf.status();
  return present;
}

Status OrderedIndex::collect(std::string_view from, bool inclusive, std::string_view end,
                             size_t max, std::vector<std::string>* out) const {
  return collect(from, inclusive, end, max, [out](std::string_view k) { out->emplace_back(k); });
}

Result<OrderedIndex::Node> OrderedIndex::enter(uint64_t addr, uint32_t level, std::string_view lo,
                                               std::string_view hi) const {
  Result<Node> nd = node(addr, level);
  if (!nd.ok()) return nd.status();
  if (!nd->cells_fill()) return damaged(addr, "its cells and counts disagree");
  // cells_fill() checked every cell: key() cannot fail here.
  const uint32_t n = nd->n();
  if (n > 0 && (nd->key(0) < lo || (!hi.empty() && nd->key(n - 1) >= hi))) {
    return damaged(addr, "keys outside the range its parent gives it");
  }
  return nd;
}

// Every node read is entered (enter(): header, cells, range) once per call;
// the keys between a node's first and last are compared as they are read:
// each key returned with the one before it (the first with `from`), and
// the last with the one after it in its leaf (the next call starts from
// it). A damaged node thus gives kCorruption, never a key that was never
// written or keys silently left out, except a key damaged into another
// that still falls between its neighbours (only the table can tell: a
// store's scan asks it, Backend::check_indexed). The cost: a slot and a
// length per cell of each node read, and a few key comparisons per node.
Status OrderedIndex::collect(std::string_view from, bool inclusive, std::string_view end,
                             size_t max, const std::function<void(std::string_view)>& fn) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  thread_local std::vector<Step> path;
  // path[d]'s upper bound (node memory: stable under the lock; empty: none).
  thread_local std::vector<std::string_view> his;
  const uint32_t height = root_->height;
  path.assign(height, Step{0, 0});
  his.assign(height, std::string_view());
  // Down to the leaf for `from`, each node within the bounds of the cells
  // followed above it ([lo, hi); keys are never empty, so "" bounds none).
  std::string_view lo, hi;
  uint64_t addr = root_->root;
  for (uint32_t d = 0; d + 1 < height; d++) {
    Result<Node> nd = enter(addr, height - 1 - d, lo, hi);
    if (!nd.ok()) return nd.status();
    his[d] = hi;
    const uint32_t pos = nd->bound(from, true);
    if (!nd->rises_before(pos)) return damaged(addr, "keys out of order");
    const int c = static_cast<int>(pos) - 1;
    path[d] = {addr, c};
    if (c >= 0) lo = nd->key(static_cast<uint32_t>(c));
    if (pos < nd->n()) hi = nd->key(pos);
    addr = nd->child(c);
    if (nd->bad()) return damaged(nd->addr(), "a cell out of range");
  }
  Result<Node> leaf = enter(addr, 0, lo, hi);
  if (!leaf.ok()) return leaf.status();
  his[height - 1] = hi;
  path[height - 1] = {addr, 0};
  uint32_t i = leaf->bound(from, !inclusive);
  // As read, key(i - 1) <= from < key(i). A damaged key at i - 1 that reads
  // <= from though it was above would have sent the search past the keys
  // between from and it: the key before it is then above it.
  if (!leaf->rises_before(i)) return damaged(leaf->addr(), "keys out of order");
  std::string_view prev;  // the last key passed to fn (node memory: stable under the lock)
  // Bounded however the nodes point: each step moves a cell forward in a
  // node of the path, keys must keep rising, and no more leaves are visited
  // than the tree has nodes (a damaged tree that leads back, or into one
  // subtree from many cells, ends the walk with kCorruption).
  uint64_t leaves = 1;
  size_t got = 0;
  while (got < max) {
    if (i < leaf->n()) {
      std::string_view k = leaf->key(i++);
      if (leaf->bad()) return damaged(leaf->addr(), "a cell out of range");
      // Before the end test: a key damaged upward must not end the range.
      if (got > 0 ? k <= prev : (inclusive ? k < from : k <= from)) {
        return damaged(leaf->addr(), "keys out of order");
      }
      if (!end.empty() && k >= end) break;
      fn(k);
      prev = k;
      got++;
      continue;
    }
    // The next leaf: up to the nearest ancestor with a cell to the right,
    // then down its leftmost path.
    size_t d = path.size() - 1;
    Node up = *leaf;
    while (d > 0) {
      Result<Node> p = node(path[d - 1].node, height - static_cast<uint32_t>(d));
      if (!p.ok()) return p.status();
      if (path[d - 1].child + 1 < static_cast<int>(p->n())) {
        up = *p;
        break;
      }
      d--;
    }
    if (d == 0) break;  // past the last leaf
    if (++leaves > root_->nodes) return damaged(leaf->addr(), "the walk passes more leaves than nodes");
    const int c = ++path[d - 1].child;
    lo = up.key(static_cast<uint32_t>(c));  // its cells were checked when it was entered
    hi = static_cast<uint32_t>(c) + 1 < up.n() ? up.key(static_cast<uint32_t>(c) + 1) : his[d - 1];
    addr = up.child(c);
    if (up.bad()) return damaged(up.addr(), "a cell out of range");
    for (size_t e = d; e < path.size(); e++) {
      const auto level = height - 1 - static_cast<uint32_t>(e);
      Result<Node> nd = enter(addr, level, lo, hi);
      if (!nd.ok()) return nd.status();
      path[e] = {addr, -1};
      his[e] = hi;
      if (level == 0) {
        leaf = nd;
        break;
      }
      if (nd->n() > 0) hi = nd->key(0);
      addr = nd->child(-1);
    }
    i = 0;
  }
  // Stopped at max inside a leaf: the last key returned must be below the
  // next one, or the next call, which starts from it, would pass over the
  // keys between them. (At a leaf's end, the leaf's bound did that.)
  if (got > 0 && got == max && i < leaf->n()) {
    const std::string_view next = leaf->key(i);
    if (leaf->bad() || next <= prev) return damaged(leaf->addr(), "keys out of order");
  }
  return Status();
}

void OrderedIndex::verify(const std::function<void(std::string_view)>& fn,
                          std::vector<std::string>* problems) const {
  std::shared_lock<std::shared_mutex> l(mu_);
  std::unordered_set<uint64_t> seen;
  uint64_t keys = 0;
  std::vector<Entry> es;
  // Each node with the range its parent gives it: [lo, hi), hi empty = none.
  std::function<void(uint64_t, uint32_t, const std::string&, const std::string&, bool)> walk =
      [&](uint64_t addr, uint32_t level, const std::string& lo, const std::string& hi, bool has_lo) {
        if (problems->size() >= 100) return;
        if (!seen.insert(addr).second) {
          problems->push_back("index: node at " + std::to_string(addr) + " is reached twice");
          return;
        }
        Result<Node> nd = node(addr, level);
        if (!nd.ok()) {
          problems->push_back(nd.status().message());
          return;
        }
        if (!nd->entries(&es)) {
          problems->push_back("index: node at " + std::to_string(addr) +
                              ": its cells and counts disagree");
          return;
        }
        std::string prev = lo;
        bool has_prev = has_lo;
        for (uint32_t i = 0; i < nd->n(); i++) {
          const std::string k(nd->key(i));
          if (nd->bad()) {
            problems->push_back("index: node at " + std::to_string(addr) + ": cell " +
                                std::to_string(i) + " out of range");
            return;
          }
          // Keys rise strictly, from the node's lower bound (which the
          // first may equal) to below its upper bound.
          const bool ordered = !has_prev || (i == 0 ? k >= prev : k > prev);
          if (!ordered || (!hi.empty() && k >= hi)) {
            problems->push_back("index: node at " + std::to_string(addr) + ": key " +
                                std::to_string(i) + " out of order");
            return;
          }
          prev = k;
          has_prev = true;
          if (level == 0) {
            keys++;
            fn(k);
          }
        }
        if (level == 0) return;
        walk(nd->child(-1), level - 1, lo, nd->n() > 0 ? std::string(nd->key(0)) : hi, has_lo);
        for (uint32_t i = 0; i < nd->n(); i++) {
          const std::string next = i + 1 < nd->n() ? std::string(nd->key(i + 1)) : hi;
          walk(nd->child(static_cast<int>(i)), level - 1, std::string(nd->key(i)), next, true);
        }
      };
  walk(root_->root, root_->height - 1, "", "", false);
  if (problems->empty() && keys != root_->keys) {
    problems->push_back("index: holds " + std::to_string(keys) + " keys, its root says " +
                        std::to_string(root_->keys));
  }
  if (problems->empty() && seen.size() != root_->nodes) {
    problems->push_back("index: has " + std::to_string(seen.size()) + " nodes, its root says " +
                        std::to_string(root_->nodes));
  }
}

}  // namespace kv
