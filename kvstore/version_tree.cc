#include "kvstore/version_tree.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "kvstore/version_tree_impl.h"
#include "libpm/file_lock.h"
#include "libpm/publish.h"

namespace kv {

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
  using Layout = TreeFormat::Layout;
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
  if ((*p)->size() < 4096 || std::memcmp(sb, TreeFormat::kMagic, 8) != 0) {
    return Status::corruption(path + " is not a version tree (no PMVTREE1 header)");
  }
  uint64_t sum;
  std::memcpy(&sum, sb + TreeFormat::kSbChecksum, 8);
  if (sum != TreeFormat::sb_checksum(sb)) {
    return Status::corruption(path + ": the header checksum fails");
  }
  uint32_t head[5];
  std::memcpy(head, sb + 8, 20);
  if (head[0] != TreeFormat::kFormat) {
    return Status::not_supported(path + ": tree format " + std::to_string(head[0]) +
                                 "; this build reads format " +
                                 std::to_string(TreeFormat::kFormat));
  }
  Result<TreeFormat::Layout> l = TreeFormat::Layout::make(head[1], head[2], head[3], head[4]);
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
