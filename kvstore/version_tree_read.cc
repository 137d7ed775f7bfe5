// The version tree's reads: descents, leaf searches and ordered scans at a
// version, through the working state's DRAM indexes or the nodes.

#include <algorithm>
#include <string>
#include <vector>

#include "kvstore/version_tree_impl.h"

namespace kv {

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

}  // namespace kv
