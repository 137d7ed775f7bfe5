// The version tree's writes: pinned versions and what no reader needs,
// puts and deletes at the working version, copy-on-write of full nodes,
// and the commit (one 8-byte store after a drain).

#include <algorithm>
#include <string>
#include <vector>

#include "kvstore/version_tree_impl.h"

namespace kv {

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

}  // namespace kv
