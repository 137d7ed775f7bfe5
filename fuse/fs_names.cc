// Fs: names (create, link, unlink, rename, symlinks) and directory
// listings.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fuse/errno_map.h"
#include "fuse/fs.h"
#include "fuse/fs_internal.h"
#include "fuse/planted_bugs.h"

namespace pmfs {

// ---------------------------------------------------------------- names

// 0 when `name` may be created in `parent`; *component is its key component.
// Loads parent. REQUIRES: mu_ exclusive.
int Fs::check_new_name(Node* parent, const char* name, std::string* component) {
  if (parent == nullptr) return ENOENT;
  if (!parent->is_dir()) return ENOTDIR;
  if (int err = ready(parent, true)) return err;
  if (parent->parent == 0) return ENOENT;  // removed directory
  if (std::strlen(name) > kNameMax) return ENAMETOOLONG;
  auto c = decode_name(name);
  if (!c || (c->empty() && parent->key.empty())) return EINVAL;  // "%%" at the root: key ""
  const size_t key_bytes = child_key(parent->key, *c).size() + kMetaPrefix.size();
  if (key_bytes > o_.max_key_bytes) return ENAMETOOLONG;
  if (table_.child(*parent, name) != nullptr) return EEXIST;
  *component = std::move(*c);
  return 0;
}

// dir's metadata after an entry was added or removed.
Meta Fs::touched(const Node& dir) const {
  Meta m = dir.meta;
  m.mtime_ns = m.ctime_ns = now_ns();
  return m;
}

// Stable numbers are reserved in blocks: kInoKey moves past a block, and
// the move is durable, before any number of the block is written into a
// record. A record's transaction may land in another log than the move's,
// and a crash keeps a prefix of each log, not an order across them: with
// the move lost, a later mount would hand the record's number out again.
int Fs::take_ino(uint64_t* ino) {
  constexpr uint64_t kBlock = 4096;
  *ino = 0;
  if (next_stable_ino_ == 0) return 0;  // kInoKey damaged
  // A number a node of this mount has (kInoKey behind the records: deleted,
  // copied from elsewhere) is skipped.
  for (;; next_stable_ino_++) {
    if (next_stable_ino_ == stable_ino_end_) {
      const uint64_t end = std::min(next_stable_ino_ + kBlock, kStableInoEnd);
      if (end == next_stable_ino_) return 0;  // every stable number given
      std::string v(8, '\0');
      put_le(&v, 0, end);
      Batch b(store_.get());
      if (!g_fuse_planted_bugs.ino_block_unsaved) b.put(kInoKey, v);
      if (int err = commit(b, EIO)) return err;
      if (!commits_durable_) {
        if (int err = to_errno(store_->sync())) return err;
      }
      stable_ino_end_ = end;
    }
    if (table_.stable_ino_free(next_stable_ino_)) break;
  }
  *ino = next_stable_ino_++;
  return 0;
}

int Fs::do_make(Ino parent, const char* name, mode_t mode, dev_t rdev, std::string_view value,
                const Caller& c, fuse_entry_param* e) {
  const bool dir = S_ISDIR(mode);
  if (S_ISLNK(mode) && (value.size() >= PATH_MAX || value.size() > layout_.inline_max)) {
    return ENAMETOOLONG;
  }
  std::unique_lock lock(mu_);
  Node* p = table_.get(parent);
  std::string component;
  if (int err = check_new_name(p, name, &component)) return err;
  const int64_t now = now_ns();
  Meta m{static_cast<uint32_t>((mode & S_IFMT) | (mode & 07777)), c.uid, c.gid, now, now, now, 0};
  if (S_ISCHR(mode) || S_ISBLK(mode)) m.rdev = rdev;
  if (int err = take_ino(&m.ino)) return err;
  if (p->meta.mode & S_ISGID) {  // BSD group semantics, as ext4 gives them
    m.gid = p->meta.gid;
    if (dir) m.mode |= S_ISGID;
  }
  const std::string key = child_key(p->key, component);
  const Meta pm = touched(*p);
  Batch b(store_.get());
  if (dir) {
    b.put_dir(key, m);
  } else {
    b.put(key, value);
    b.put(meta_key(key), encode_meta(m));
  }
  b.put_dir(p->key, pm);
  if (int err = commit(b, ENAMETOOLONG)) return err;
  p->meta = pm;
  p->has_record = true;
  Node* n = table_.add(p, name, key, dir, m);
  n->has_record = true;
  n->size = n->committed_size = value.size();
  fill_entry(n, e);
  return 0;
}

int Fs::do_readlink(Ino ino, std::string* target) {
  std::string key;
  {
    std::shared_lock lock(mu_);
    Node* n = table_.get(ino);
    if (n == nullptr) return ENOENT;
    if (!S_ISLNK(n->meta.mode)) return EINVAL;
    key = n->key;
  }
  // A symlink's value never changes (rename moves it whole): no lock needed.
  return to_errno(store_->get(key, target));
}

int Fs::do_remove(Ino parent, const char* name, bool dir) {
  std::unique_lock lock(mu_);
  Node* p = table_.get(parent);
  if (p == nullptr) return ENOENT;
  if (!p->is_dir()) return ENOTDIR;
  if (int err = ready(p, true)) return err;
  Node* n = table_.child(*p, name);
  if (n == nullptr) return ENOENT;
  if (int err = ready(n, true)) return err;  // empty?
  if (dir && !n->is_dir()) return ENOTDIR;
  if (!dir && n->is_dir()) return EISDIR;
  if (dir && !n->dir->by_cookie.empty()) return ENOTEMPTY;
  // The parent's marker is written with its new times, so a directory that
  // becomes empty stays after a remount even if it was only implied.
  const Meta pm = touched(*p);
  Meta m = n->meta;
  m.ctime_ns = pm.ctime_ns;
  const bool last = dir || n->nlink == 1;
  Removed removed;
  if (last) {
    if (int err = removed_content(*n, &removed)) return err;
  }
  Batch b(store_.get());
  if (dir) {
    b.remove(dir_key(n->key));
  } else {
    remove_name(*n, child_key(p->key, *decode_name(name)), last, m, &b);
  }
  if (n->has_xattrs && last) b.remove(xattr_key(n->key));
  b.put_dir(p->key, pm);
  if (int err = commit(b, EIO)) return err;
  std::vector<uint64_t> garbage;
  if (last) garbage = retire(n, std::move(removed));
  p->meta = pm;
  p->has_record = true;
  n->meta = m;
  table_.unlink(p, name);
  table_.erase_if_unused(n);
  lock.unlock();  // a large file's chunks: one store removal each, which other requests need not wait for
  discard_chunks(std::move(garbage));
  return 0;
}

// Adds to b the removal of the file n's name at name_key: with its content
// and record when it is the last name (a linked file's inode key goes with
// it), else the inode's record with its new metadata m (ctime).
void Fs::remove_name(const Node& n, const std::string& name_key, bool last, const Meta& m,
                     Batch* b) {
  b->remove(name_key);
  b->remove(meta_key(name_key));
  if (!n.linked) return;
  if (last) {
    b->remove(n.key);
    b->remove(meta_key(n.key));
  } else {
    b->put(meta_key(n.key), encode_meta(m));
  }
}

int Fs::do_link(Ino ino, Ino newparent, const char* newname, fuse_entry_param* e) {
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  if (n->is_dir()) return EPERM;
  if (n->parent == 0) return ENOENT;  // unlinked: no name to link to, as Linux says
  if (n->nlink >= kLinkMax) return EMLINK;
  Node* np = table_.get(newparent);
  std::string component;
  if (int err = check_new_name(np, newname, &component)) return err;
  const std::string key = child_key(np->key, component);
  Meta m = n->meta;
  m.ctime_ns = now_ns();
  const Meta npm = touched(*np);
  Batch b(store_.get());
  // A file's first link moves its content, record and attributes to an
  // inode key, and its name becomes a link like the new one: all in the
  // transaction that adds the name.
  if (!n->linked) {
    if (int err = to_errno(learn_ids())) return err;
    next_inode_id_ = std::max(next_inode_id_, inode_floor_.load());
  }
  const uint64_t id = n->linked ? *key_id(kInodePrefix, n->key) : next_inode_id_;
  const std::string ikey = inode_key(id);
  if (!n->linked && g_fuse_planted_bugs.link_name_first) {
    Batch first(store_.get());
    first.put_link(key, id, m);
    if (int err = commit(first, ENOSPC)) return err;
  }
  if (!n->linked) {
    std::string value;
    pm::Status s = store_->get(n->key, &value);
    if (!s.ok() && !s.is_not_found()) return to_errno(s);
    b.put(ikey, value);
    if (int err = move_xattrs(*n, ikey, &b)) return err;
    b.put_link(n->key, id, m);
  }
  b.put_link(key, id, m);
  b.put(meta_key(ikey), encode_meta(m));
  b.put_dir(np->key, npm);
  if (int err = commit(b, ENOSPC)) return err;
  if (!n->linked) {
    next_inode_id_++;
    n->key = ikey;
    n->linked = true;
  }
  n->meta = m;
  n->has_record = true;
  np->meta = npm;
  np->has_record = true;
  table_.link(n, np, newname);
  fill_entry(n, e);
  return 0;
}

// ---------------------------------------------------------------- directory renames

namespace {
// A path names four kinds of keys: data keys, records, directory markers
// and extended attributes.
constexpr std::string_view kPathKinds[] = {std::string_view(), kMetaPrefix, kDirPrefix,
                                           kXattrPrefix};
// Per moved key, besides its bytes: a put and a remove in a log record.
constexpr uint64_t kMoveOverhead = 64;
}  // namespace

uint64_t Fs::rename_step_bytes() {
  if (rename_step_ == 0) {
    const kv::StoreStats st = store_->stats();
    rename_step_ = o_.rename_step_bytes != 0 ? o_.rename_step_bytes
                                             : std::max<uint64_t>(st.max_record_bytes / 2, 4096);
    store_key_limit_ = st.max_key_bytes;
  }
  return rename_step_;
}

// Whether every move below `from` can be made, before the first: a
// failure after it would stop the mount, and one that would always recur
// (a key over the store's limit) would stop every mount after it too.
int Fs::check_moves(const std::string& from, const std::string& to) {
  const uint64_t step = rename_step_bytes();
  uint64_t bytes = 0;
  bool too_long = false;
  for (std::string_view kind : kPathKinds) {
    const std::string prefix = std::string(kind) + from + '/';
    pm::Status s = store_->scan(prefix, [&](std::string_view k, std::string_view v) {
      too_long = k.size() - from.size() + to.size() > store_key_limit_;
      bytes += 2 * k.size() + v.size() + kMoveOverhead;
      return !too_long;
    });
    if (!s.ok()) return to_errno(s);
    if (too_long) return ENAMETOOLONG;
  }
  // Room for a whole copy: the new entries are written before the old are
  // freed, and a full store half way would stop the mount.
  if (bytes > step && space().free < bytes + 2 * step) return ENOSPC;
  return 0;
}

// Adds to b the moves of the keys below directory key `from` to below `to`
// until b holds rename_step_bytes() of them (at least one); whether any
// may be left. Each scan starts at the prefix: the moves committed before
// removed what they moved.
pm::Result<bool> Fs::add_moves(const std::string& from, const std::string& to, Batch* b) {
  const uint64_t budget = rename_step_bytes();
  uint64_t bytes = 0;
  for (std::string_view kind : kPathKinds) {
    const std::string prefix = std::string(kind) + from + '/';
    const std::string target = std::string(kind) + to;
    bool full = false;
    PM_TRY(store_->scan(prefix, [&](std::string_view k, std::string_view v) {
      const uint64_t n = 2 * k.size() + v.size() + kMoveOverhead;
      if (bytes != 0 && bytes + n > budget) {
        full = true;
        return false;
      }
      bytes += n;
      b->put(target + std::string(k.substr(prefix.size() - 1)), v);  // from the '/'
      b->remove(k);
      return true;
    }));
    if (full) return true;
  }
  return false;
}

// The keys below directory key `from` move to below `to` (every kind of
// key a path names); `first` holds the rest of the rename and commits with
// the first moves. When all fit in rename_step_bytes(), that one
// transaction is the rename. Otherwise it also puts kRenameKey, naming
// both, and is made durable before any other transaction of the rename
// (they may land in other logs); finish_moves does the rest and removes
// the key. A crash after the first leaves the key, and the next mount
// finishes the moves: the rename happens whole at its first transaction.
// The errno of a failure before it (nothing changed); after it, EIO with
// the mount stopped (the index would no longer match the store), which
// the next mount finishes.
int Fs::move_below(const std::string& from, const std::string& to, Batch* first) {
  if (int err = check_moves(from, to)) return err;
  pm::Result<bool> more = add_moves(from, to, first);
  if (!more.ok()) return to_errno(more.status());
  if (!*more) return commit(*first, EXDEV);
  if (!g_fuse_planted_bugs.rename_steps_without_intent) {
    std::string intent(4, '\0');
    put_le(&intent, 0, static_cast<uint32_t>(from.size()));
    (intent += from) += to;
    first->put(kRenameKey, intent);
  }
  if (int err = commit(*first, EXDEV)) return err;
  pm::Status s = store_->sync();
  if (s.ok()) s = finish_moves(from, to);
  if (!s.ok()) {
    const std::string why = fmt::format(
        "the rename of directory '{}' to '{}' stopped half way ({}); the next mount finishes it",
        from, to, s.to_string());
    fail(why.c_str());
    return EIO;
  }
  return 0;
}

// After kRenameKey is durable: the moves left, in transactions of
// rename_step_bytes(); the last also removes the key, after a sync that
// makes every move before it durable.
pm::Status Fs::finish_moves(const std::string& from, const std::string& to) {
  for (;;) {
    Batch b(store_.get());
    pm::Result<bool> more = add_moves(from, to, &b);
    if (!more.ok()) return more.status();
    if (!*more) {
      PM_TRY(store_->sync());
      b.remove(kRenameKey);
    }
    PM_TRY(commit_with_room(b));
    // Durable before any later change: one in another log that survived a
    // crash this removal did not would be moved by the next mount.
    if (!*more) return store_->sync();
  }
}

// A directory rename that a crash or a failure stopped after its first
// transaction (move_below): its moves are finished before anything reads
// the tree.
pm::Status Fs::finish_rename() {
  std::string v;
  pm::Status s = store_->get(kRenameKey, &v);
  if (s.is_not_found()) return pm::Status();
  PM_TRY(s.with_context("read the pending directory rename"));
  const uint32_t n = v.size() >= 4 ? get_le<uint32_t>(v, 0) : 0;
  if (v.size() < 4 || n > v.size() - 4) {
    return pm::Status::corruption(fmt::format(
        "the pending directory rename (key \\0r) is damaged ({} bytes): nothing is renamed",
        v.size()));
  }
  const std::string from = v.substr(4, n), to = v.substr(4 + n);
  auto below = [](const std::string& a, const std::string& b) {
    return a.size() > b.size() && a.compare(0, b.size(), b) == 0 && a[b.size()] == '/';
  };
  if (from.empty() || to.empty() || from == to || below(to, from) || below(from, to)) {
    return pm::Status::corruption(fmt::format(
        "the pending directory rename (key \\0r) names '{}' to '{}', which no rename "
        "makes (damaged): nothing is renamed",
        from, to));
  }
  fuse_log(FUSE_LOG_INFO, "pmfs: finishing the rename of directory '%s' to '%s'\n",
           from.c_str(), to.c_str());
  return finish_moves(from, to).with_context(
      fmt::format("finish the rename of directory '{}' to '{}'", from, to));
}

int Fs::move_file(const Node& n, const std::string& old_key, const std::string& new_key,
                  const Meta& m, Batch* b, std::string* value) {
  b->remove(old_key);
  b->remove(meta_key(old_key));
  if (n.linked) {  // a name moves alone: the content stays at the inode key
    b->put_link(new_key, *key_id(kInodePrefix, n.key), m);
    return 0;
  }
  pm::Status s = store_->get(n.key, value);
  if (s.is_not_found()) value->clear();
  if (!s.ok() && !s.is_not_found()) return to_errno(s);
  b->put(new_key, *value);
  b->put(meta_key(new_key), encode_meta(m));
  return move_xattrs(n, new_key, b);
}

int Fs::move_xattrs(const Node& n, const std::string& new_key, Batch* b) {
  if (!n.has_xattrs) return 0;
  std::string value;
  pm::Status s = store_->get(xattr_key(n.key), &value);
  if (s.is_not_found()) return 0;
  if (!s.ok()) return to_errno(s);
  b->remove(xattr_key(n.key));
  b->put(xattr_key(new_key), value);
  return 0;
}

int Fs::do_rename(Ino parent, const char* name, Ino newparent, const char* newname,
                  unsigned flags) {
  if (flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) return EINVAL;  // EXCHANGE, WHITEOUT
  std::unique_lock lock(mu_);
  Node* p = table_.get(parent);
  Node* np = table_.get(newparent);
  if (p == nullptr || np == nullptr) return ENOENT;
  if (!p->is_dir() || !np->is_dir()) return ENOTDIR;
  if (int err = ready(p, true)) return err;
  if (int err = ready(np, true)) return err;
  Node* src = table_.child(*p, name);
  if (src == nullptr) return ENOENT;
  if (std::strlen(newname) > kNameMax) return ENAMETOOLONG;
  auto component = decode_name(newname);
  if (!component || (component->empty() && np->key.empty())) return EINVAL;
  Node* dst = table_.child(*np, newname);
  if (dst == src) return 0;  // the same name, or two names of one file: POSIX says do nothing
  if (int err = ready(dst, true)) return err;  // empty?
  if (dst != nullptr) {
    if (flags & RENAME_NOREPLACE) return EEXIST;
    if (src->is_dir() && !dst->is_dir()) return ENOTDIR;
    if (!src->is_dir() && dst->is_dir()) return EISDIR;
    if (dst->is_dir() && !dst->dir->by_cookie.empty()) return ENOTEMPTY;
  }
  for (Node* a = np; src->is_dir(); a = table_.get(a->parent)) {  // no move into itself
    if (a == src) return EINVAL;
    if (a == nullptr || a->ino == kRootIno) break;
  }
  const std::string new_key = child_key(np->key, *component);
  if (new_key.size() + kMetaPrefix.size() > o_.max_key_bytes) return ENAMETOOLONG;
  // Every key below a directory moves with it, found from the index.
  if (src->is_dir()) {
    if (int err = ready_tree(src)) return err;
  }
  const int64_t now = now_ns();
  Meta sm = src->meta;
  sm.ctime_ns = now;
  // The replaced file loses a name; its content goes with its last one.
  const bool dst_last = dst != nullptr && (dst->is_dir() || dst->nlink == 1);
  Meta dm = dst != nullptr ? dst->meta : Meta();
  dm.ctime_ns = now;
  Removed replaced;
  if (dst_last) {
    if (int err = removed_content(*dst, &replaced)) return err;
  }
  Batch b(store_.get());
  if (dst != nullptr && dst->is_dir()) b.remove(dir_key(dst->key));
  if (dst != nullptr && !dst->is_dir()) remove_name(*dst, new_key, dst_last, dm, &b);
  if (dst_last && dst->has_xattrs) b.remove(xattr_key(dst->key));  // src's may replace it
  if (src->is_dir()) {  // the keys below it move last (move_below)
    b.remove(dir_key(src->key));
    b.put_dir(new_key, sm);
    if (int err = move_xattrs(*src, new_key, &b)) return err;
  } else {
    std::string value;
    const std::string old_key = child_key(p->key, *decode_name(name));
    if (int err = move_file(*src, old_key, new_key, sm, &b, &value)) return err;
    if (src->linked) b.put(meta_key(src->key), encode_meta(sm));  // the inode's new ctime
    if (g_fuse_planted_bugs.rename_copies_first && !src->linked) {
      Batch copy(store_.get());
      copy.put(new_key, value);
      copy.put(meta_key(new_key), encode_meta(sm));
      if (int err = commit(copy, EFBIG)) return err;
    }
  }
  // One clock reading when both are one directory: the store and the
  // table must hold the same times (a second reading once went to the
  // table only, and a remount changed the directory's mtime).
  const Meta pm = touched(*p), npm = np == p ? pm : touched(*np);
  b.put_dir(p->key, pm);
  if (np != p) b.put_dir(np->key, npm);
  if (src->is_dir()) {
    if (int err = move_below(src->key, new_key, &b)) return err;
  } else if (int err = commit(b, EFBIG)) {
    return err;
  }
  p->meta = pm;
  np->meta = npm;
  p->has_record = np->has_record = src->has_record = true;
  src->meta = sm;
  std::vector<uint64_t> garbage;
  if (dst != nullptr) {
    if (dst_last) garbage = retire(dst, std::move(replaced));
    dst->meta = dm;
    table_.unlink(np, newname);
    table_.erase_if_unused(dst);
  }
  table_.move(p, name, np, newname, new_key);
  lock.unlock();
  discard_chunks(std::move(garbage));
  return 0;
}

// ---------------------------------------------------------------- directories

int Fs::do_readdir(fuse_req_t req, Ino ino, size_t size, off_t off, bool plus, std::string* out) {
  return with_index([&](bool exclusive) {
    Node* d = table_.get(ino);
    if (d == nullptr) return ENOENT;
    if (!d->is_dir()) return ENOTDIR;
    if (int r = ready(d, exclusive)) return r;
    const auto& entries = d->dir->by_cookie;
    const auto first = entries.upper_bound(static_cast<uint64_t>(std::max<off_t>(off, 2)));
    Node* up = d->parent != 0 ? table_.get(d->parent) : d;
    if (up == nullptr) up = d;
    if (plus) {
      if (int r = ready(up, exclusive)) return r;
      // Each entry of readdirplus carries its attributes: the directories
      // among as many entries as the reply can hold are loaded first, so
      // that nothing is emitted (and no lookup counted) before a retry.
      fuse_entry_param none{};
      const size_t least = fuse_add_direntry_plus(req, nullptr, 0, "", &none, 0);
      size_t room = size / std::max<size_t>(least, 1) + 1;
      for (auto it = first; room-- > 0 && it != entries.end(); ++it) {
        if (int r = ready(table_.get(it->second->second.second), exclusive)) return r;
      }
    }
    out->resize(size);
    size_t pos = 0;
    // False when the entry does not fit; it is then left for the next call
    // (and, for readdirplus, gets no lookup reference).
    auto emit = [&](const char* name, Node* n, bool dot, uint64_t next) {
      fuse_entry_param e{};
      size_t need;
      if (plus) {
        fill_stat(*n, &e.attr);
        if (!dot) {
          e.ino = n->ino;
          e.generation = generation_;
          e.attr_timeout = e.entry_timeout = kCacheSeconds;
        }
        need = fuse_add_direntry_plus(req, out->data() + pos, size - pos, name, &e,
                                      static_cast<off_t>(next));
      } else {  // the inode number and type are all a plain entry holds
        e.attr.st_ino = n->ino;
        e.attr.st_mode = n->meta.mode;
        need = fuse_add_direntry(req, out->data() + pos, size - pos, name, &e.attr,
                                 static_cast<off_t>(next));
      }
      if (need > size - pos) return false;
      if (plus && !dot) n->nlookup.fetch_add(1);
      pos += need;
      return true;
    };
    bool more = true;
    if (off < 1) more = emit(".", d, true, 1);
    if (more && off < 2) more = emit("..", up, true, 2);
    for (auto it = first; more && it != entries.end(); ++it) {
      const auto& [name, ci] = *it->second;
      more = emit(name.c_str(), table_.get(ci.second), false, it->first);
    }
    out->resize(pos);
    return 0;
  });
}

}  // namespace pmfs
