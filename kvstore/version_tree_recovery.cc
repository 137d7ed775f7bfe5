// The version tree's file set-up and recovery: a new file's superblock,
// and the forward garbage collection an open runs (docs/ordered.md).

#include <cstring>
#include <string>
#include <vector>

#include "kvstore/version_tree_impl.h"

namespace kv {

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

}  // namespace kv
