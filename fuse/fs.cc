#include "fuse/fs.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "fuse/errno_map.h"
#include "fuse/fs_internal.h"
#include "fuse/planted_bugs.h"

namespace pmfs {

FusePlantedBugs g_fuse_planted_bugs;

namespace {

// kv::StoreStats::keys costs a scan of the store: statfs answers from
// numbers at most this old.
constexpr auto kStatfsMaxAge = std::chrono::seconds(5);

// Chunks of large files (file_content.h): a chunk is rewritten whole when
// any byte of it changes, and read whole (then cached) by sequential reads.
constexpr uint32_t kChunkBytes = 1u << 20;
// What a transaction's log record needs besides its values: op headers and
// the keys of a manifest and a metadata record.
constexpr uint64_t kTxnSlack = 4096;
// Discarded chunks wait for a sync of the store; past this many (up to 64
// MiB of dead data), the next discard syncs. A put the store has no room
// for syncs too (Fs::store_staged): removed files' chunks may be what
// holds the room (a user trial on a full 200 MiB tmpfs: after 30 files of
// 5 MB were removed, no write went in until an fsync, as 256 chunks were
// allowed to wait).
constexpr size_t kMaxPendingGarbage = 64;

Meta default_meta(mode_t type_and_perm) {
  Meta m;
  m.mode = static_cast<uint32_t>(type_and_perm);
  m.uid = static_cast<uint32_t>(getuid());
  m.gid = static_cast<uint32_t>(getgid());
  m.mtime_ns = m.ctime_ns = m.atime_ns = now_ns();
  return m;
}

}  // namespace

Fs::Fs(std::unique_ptr<kv::Store> store, const MountOptions& o)
    : store_(std::move(store)),
      o_(o),
      default_file_(default_meta(S_IFREG | 0644)),
      default_dir_(default_meta(S_IFDIR | 0755)),
      generation_(static_cast<uint32_t>(now_ns() / 1000)),
      table_(default_dir_) {
  chunk_ids_.ready = [this] { return learn_ids(); };
  chunk_ids_.make_room = [this] { return make_room(); };
  const kv::StoreStats st = store_->stats();
  layout_.inline_max = st.max_value_bytes;
  layout_.chunk_bytes = std::min<uint32_t>(st.max_value_bytes, kChunkBytes);
  // A manifest commits with the metadata record in one log record, and is
  // one value: that bounds the chunks a file may have.
  const uint64_t room = std::min<uint64_t>(
      st.max_value_bytes, st.max_record_bytes > kTxnSlack ? st.max_record_bytes - kTxnSlack : 0);
  const uint64_t chunks = room > kManifestHeaderBytes ? (room - kManifestHeaderBytes) / 8 : 0;
  layout_.max_file = std::max<uint64_t>(layout_.inline_max, chunks * layout_.chunk_bytes);
  if (o.max_file_bytes != 0) layout_.max_file = std::min(layout_.max_file, o.max_file_bytes);
  commits_durable_ = st.durability == kv::Durability::kSync;
  ordered_ = st.ordered;
}

void Fs::fail(const char* why) {
  if (failed_.exchange(true, std::memory_order_acq_rel)) return;
  fuse_log(FUSE_LOG_ERR, "pmfs: %s in a request: every request fails with EIO from now on; "
           "unmount and mount again\n", why);
}

Fs::~Fs() {
  if (failed()) return;  // the index may not match the store: write nothing
  // Handles whose release never came: the session ended first. One whose
  // descriptor was closed is released as the kernel would have (it sends
  // releases in the background, and an unmount need not wait for them).
  // One still open in a process (a SIGTERM to the daemon, a lazy unmount)
  // drops what was staged since its last flush: nothing was promised for
  // it, and storing it replaced a file's stored content with a rewrite cut
  // off half way (open O_TRUNC, write, no close), which a kill did not.
  // A file also open through a closed handle has its staged content
  // stored by that one (the two share it): the closed ones go first, so
  // that "dropped" is said only of what is.
  std::vector<Handle*> open;
  {
    std::lock_guard g(handles_mu_);
    open.assign(handles_.begin(), handles_.end());
  }
  std::stable_partition(open.begin(), open.end(), [](Handle* h) { return h->closed.load(); });
  for (Handle* h : open) do_release(h, /*store=*/h->closed.load());
  pm::Status s = sync_and_collect();
  if (s.ok() && chunk_ids_.leftovers) s = pm::Status::io_error("a chunk could not be removed");
  if (s.ok() && !indexed_) return;  // the index was never read: nothing to say
  // Ended cleanly: no chunk is left that no manifest names, durably. The
  // mark is the number its own put takes (ended_cleanly); one that still
  // holds (a mount that changed nothing) is left as it is.
  pm::Result<bool> holds = s.ok() ? ended_cleanly() : pm::Result<bool>(s);
  if (holds.ok() && *holds) return;
  s = holds.status();
  if (s.ok()) s = store_->sync();
  if (s.ok()) {
    std::string mark(8, '\0');
    put_le(&mark, 0, store_->next_seq());
    s = store_->put(kCleanKey, mark);
  }
  if (!s.ok()) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: %s (the next mount reads every key and removes the "
             "unused chunks)\n", s.to_string().c_str());
  }
}

// ---------------------------------------------------------------- attributes

// REQUIRES: n loaded, if a directory (its attributes are its entries').
void Fs::fill_stat(const Node& n, struct stat* st) const {
  *st = {};
  st->st_ino = n.ino;
  st->st_mode = n.meta.mode;
  st->st_uid = n.meta.uid;
  st->st_gid = n.meta.gid;
  if (n.is_dir()) {
    // A removed or replaced directory has no links left (generic/035).
    st->st_nlink = n.parent == 0 && n.ino != kRootIno ? 0 : 2 + n.dir->subdirs;
    st->st_size = static_cast<off_t>(n.dir->by_cookie.size());
  } else {
    st->st_nlink = n.parent == 0 ? 0 : n.nlink;
    st->st_size = static_cast<off_t>(n.size);
  }
  st->st_rdev = static_cast<dev_t>(n.meta.rdev);
  st->st_blksize = 4096;
  // Holes hold no space (Node::hole_bytes: staged or stored).
  const uint64_t held =
      n.is_dir() ? n.dir->by_cookie.size() : n.size - std::min(n.size, n.hole_bytes);
  st->st_blocks = static_cast<blkcnt_t>((held + 511) / 512);
  st->st_mtim = to_timespec(n.meta.mtime_ns);
  st->st_atim = to_timespec(n.meta.atime_ns);
  st->st_ctim = to_timespec(n.meta.ctime_ns);
}

void Fs::fill_entry(Node* n, fuse_entry_param* e) const {
  *e = {};
  e->ino = n->ino;
  e->generation = generation_;
  e->attr_timeout = kCacheSeconds;
  e->entry_timeout = kCacheSeconds;
  fill_stat(*n, &e->attr);
  n->nlookup.fetch_add(1);
}

int Fs::do_lookup(Ino parent, const char* name, fuse_entry_param* e) {
  // The reply carries the entry's attributes: a directory's are its
  // entries' (st_nlink, st_size), so it is loaded too.
  return with_index([&](bool exclusive) {
    Node* p = table_.get(parent);
    if (p == nullptr) return ENOENT;
    // "." and ".." of any inode the index holds: how the kernel decodes a
    // file handle (open_by_handle_at, NFS export) of an inode it no longer
    // caches.
    const std::string_view dots(name);
    if (dots == "." || (dots == ".." && p->is_dir())) {
      Node* n = dots == "." ? p : table_.get(p->parent != 0 ? p->parent : p->ino);
      if (n == nullptr || (n->parent == 0 && n->ino != kRootIno)) return ESTALE;
      if (int r = ready(n, exclusive)) return r;
      fill_entry(n, e);
      return 0;
    }
    if (!p->is_dir()) return ENOTDIR;
    if (std::strlen(name) > kNameMax) return ENAMETOOLONG;
    if (int r = ready(p, exclusive)) return r;
    Node* n = table_.child(*p, name);
    if (n == nullptr) {
      *e = {};  // a negative entry the kernel may cache
      e->entry_timeout = kCacheSeconds;
      return 0;
    }
    if (int r = ready(n, exclusive)) return r;
    fill_entry(n, e);
    return 0;
  });
}

void Fs::do_forget(Ino ino, uint64_t nlookup) {
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return;
  n->nlookup.fetch_sub(std::min(nlookup, n->nlookup.load()));
  table_.erase_if_unused(n);
}

int Fs::do_getattr(Ino ino, struct stat* st) {
  return with_index([&](bool exclusive) {
    Node* n = table_.get(ino);
    if (n == nullptr) return ENOENT;
    if (int r = ready(n, exclusive)) return r;
    fill_stat(*n, st);
    return 0;
  });
}

// Loads the file's committed form into d unless it holds the file already.
// REQUIRES: d->mu and mu_ held.
int Fs::load(FileData* d, const Node& n) {
  if (d->content.loaded()) return 0;
  if (failed()) return EIO;  // (as in commit)
  std::string value;
  if (n.parent != 0) {
    pm::Status s = store_->get(n.key, &value);
    if (!s.ok() && !s.is_not_found()) return to_errno(s);
  } else {
    value = n.unlinked_value;
  }
  d->content.load(value, n.meta.chunked, n.key);
  return 0;
}

int Fs::put_content(FileData* d, Node* n, Meta m, Batch* b) {
  std::string value;
  bool chunked = false, wrote = false;
  d->generation++;  // stored or dropped, what was staged is nobody's now
  int err = d->content.prepare(&value, &chunked, &wrote);
  // The chunks a manifest names are durable before it is: on pmem each put
  // is, elsewhere a sync makes them so.
  if (err == 0 && wrote && !commits_durable_) err = to_errno(store_->sync());
  if (err == 0) {
    m.chunked = chunked;
    b->put(n->key, value);
    b->put(meta_key(n->key), encode_meta(m));
    err = commit(*b, EFBIG);
  }
  if (err != 0) {
    remove_chunks(d->content.abandon());
    d->put_errors++;
    d->last_put_error = err;
    return err;
  }
  n->meta.chunked = chunked;
  n->hole_bytes = d->content.hole_bytes();
  discard_chunks(d->content.committed());
  return 0;
}

int Fs::removed_content(const Node& n, Removed* r) {
  if (n.is_dir() || (n.open_count == 0 && !n.meta.chunked)) return 0;
  if (n.open_count > 0 && n.has_xattrs) {  // its descriptors read and set them on
    pm::Status s = store_->get(xattr_key(n.key), &r->xattrs);
    if (!s.ok() && !s.is_not_found()) return to_errno(s);
  }
  pm::Status s = store_->get(n.key, &r->value);
  if (s.is_not_found()) return 0;
  if (!s.ok()) return to_errno(s);
  if (!n.meta.chunked) return 0;
  if (std::optional<Manifest> m = decode_manifest(r->value)) r->chunks = std::move(m->ids);
  return 0;
}

std::vector<uint64_t> Fs::retire(Node* n, Removed r) {
  if (n->open_count == 0) return std::move(r.chunks);
  n->unlinked_value = std::move(r.value);  // its descriptors read on from what it held
  n->unlinked_xattrs = std::move(r.xattrs);
  n->retired_chunks.insert(n->retired_chunks.end(), r.chunks.begin(), r.chunks.end());
  return {};
}

void Fs::discard_chunks(std::vector<uint64_t> ids) {
  std::erase(ids, 0);
  if (ids.empty()) return;
  if (commits_durable_) {
    remove_chunks(ids);
    return;
  }
  size_t pending;
  {
    std::lock_guard g(garbage_mu_);
    garbage_.insert(garbage_.end(), ids.begin(), ids.end());
    pending = garbage_.size();
  }
  if (pending > kMaxPendingGarbage) {
    if (pm::Status s = sync_and_collect(); !s.ok()) {
      fuse_log(FUSE_LOG_WARNING, "pmfs: %s\n", s.to_string().c_str());
    }
  }
}

void Fs::remove_chunks(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    if (id == 0) continue;
    if (pm::Status s = store_->remove(chunk_key(id)); !s.ok() && !s.is_not_found()) {
      chunk_ids_.leftovers = true;  // the next mount's sweep removes it
      fuse_log(FUSE_LOG_WARNING, "pmfs: remove chunk %llu: %s\n",
               static_cast<unsigned long long>(id), s.to_string().c_str());
    }
  }
}

pm::Status Fs::commit_with_room(Batch& b) {
  pm::Status s = b.commit();
  if (s.code() == pm::Code::kNoSpace && make_room()) s = b.commit();
  return s;
}

bool Fs::make_room() {
  {
    std::lock_guard g(garbage_mu_);
    if (garbage_.empty()) return false;
  }
  if (pm::Status s = sync_and_collect(); !s.ok()) return false;
  // The removes free their values' room once applied and committed.
  if (pm::Status s = store_->checkpoint(); !s.ok() && s.code() != pm::Code::kNoSpace) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: %s\n", s.to_string().c_str());
  }
  return true;
}

pm::Status Fs::sync_and_collect() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard g(garbage_mu_);
    ids.swap(garbage_);
  }
  // Only what was discarded before the sync began: its commit is durable
  // when the sync returns.
  pm::Status s = store_->sync();
  if (!s.ok()) {
    std::lock_guard g(garbage_mu_);
    garbage_.insert(garbage_.end(), ids.begin(), ids.end());
    return s;
  }
  remove_chunks(ids);
  return s;
}

// Commits b; a value or transaction too large for the store is size_errno.
int Fs::commit(Batch& b, int size_errno) {
  // A request that passed Guarded's check before the mount stopped (it
  // waited for mu_) must not change a store its index no longer matches.
  if (failed()) return EIO;
  pm::Status s = commit_with_room(b);
  if (s.code() == pm::Code::kInvalidArgument) return size_errno;
  if (!s.ok()) fuse_log(FUSE_LOG_ERR, "pmfs: %s\n", s.to_string().c_str());
  return to_errno(s);
}

int Fs::do_setattr(Ino ino, const struct stat& attr, int to_set, Handle* h, const Caller& c,
                   struct stat* out) {
  const bool resize = to_set & FUSE_SET_ATTR_SIZE;
  // A resize goes through the file's content: an open file's shared one,
  // put at flush with the writes through the handle's (ftruncate) and at
  // once without one (truncate by name); a closed file's, read for it.
  std::shared_ptr<FileData> d;
  std::unique_lock<std::mutex> dl;
  if (resize) {
    if (h != nullptr) {
      d = h->data;
    } else {
      std::shared_lock lock(mu_);
      if (Node* n = table_.get(ino)) d = n->data;
    }
    if (d != nullptr) dl = std::unique_lock(d->mu);
  }
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  if (int err = ready(n, true)) return err;  // the reply carries its attributes
  if (resize && n->data != d) {  // opened or closed meanwhile: look again
    lock.unlock();
    if (dl.owns_lock()) dl.unlock();
    return do_setattr(ino, attr, to_set, h, c, out);
  }
  const bool deferred = d != nullptr && h != nullptr;
  if (resize && d == nullptr) {
    d = new_file_data();
  }
  const int64_t now = now_ns();
  Meta m = n->meta;
  if (to_set & FUSE_SET_ATTR_MODE) m.mode = (m.mode & S_IFMT) | (attr.st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) m.uid = attr.st_uid;
  if (to_set & FUSE_SET_ATTR_GID) m.gid = attr.st_gid;
  if (to_set & FUSE_SET_ATTR_MTIME) m.mtime_ns = to_ns(attr.st_mtim);
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) m.mtime_ns = now;
  if (to_set & FUSE_SET_ATTR_ATIME) m.atime_ns = to_ns(attr.st_atim);
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) m.atime_ns = now;
  m.ctime_ns = (to_set & FUSE_SET_ATTR_CTIME) ? to_ns(attr.st_ctim) : now;
  Batch b(store_.get());
  if (resize) {
    if (n->is_dir()) return EISDIR;
    const auto size = static_cast<uint64_t>(attr.st_size);
    if (!(to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))) m.mtime_ns = now;
    if (!(to_set & FUSE_SET_ATTR_MODE)) (void)kill_suid(&m, c);  // the reply carries the mode
    if (int err = load(d.get(), *n)) return err;
    if (int err = d->content.truncate(size)) return err;
    if (deferred) h->changed_in = d->generation;
    n->size = size;
    n->hole_bytes = d->content.hole_bytes();
    if (deferred) b.put(meta_key(n->key), encode_meta(m));
  } else if (n->is_dir()) {
    b.put_dir(n->key, m);
  } else {
    b.put(meta_key(n->key), encode_meta(m));
  }
  // A detached file has no keys left to update.
  if (n->parent != 0 || n->ino == kRootIno) {
    // A truncate by name puts the content (every write staged so far with it).
    const int err = resize && !deferred ? put_content(d.get(), n, m, &b) : commit(b, EFBIG);
    if (err != 0 && resize && !deferred) {  // d shows the store again, without the staged writes
      n->size = n->committed_size;
      n->hole_bytes = 0;  // unknown until the content is read again: counted as data
      lock.unlock();
      if (dl.owns_lock()) dl.unlock();
      invalidate_content(ino);
    }
    if (err != 0) return err;
    n->has_record = true;
    if (resize && !deferred) n->size = n->committed_size = static_cast<uint64_t>(attr.st_size);
    m.chunked = n->meta.chunked;
  }
  n->meta = m;
  fill_stat(*n, out);
  return 0;
}

void Fs::invalidate_attr(Ino ino) { invalidate(ino, -1); }

// The kernel grew its cached size and pages with the writes it sent; after
// a failed flush the file has its stored size and bytes again, which only
// a getattr and fresh reads tell it.
void Fs::invalidate_content(Ino ino) { invalidate(ino, 0); }

void Fs::invalidate(Ino ino, off_t off) {
  if (se_ == nullptr) return;
  const int err = fuse_lowlevel_notify_inval_inode(se_, ino, off, 0);
  if (err != 0 && err != -ENOENT) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: inode %llu: cache invalidation failed: %s\n",
             static_cast<unsigned long long>(ino), std::strerror(-err));
  }
}

// ---------------------------------------------------------------- space

Fs::Space Fs::space() {
  struct statvfs host {};
  const std::string dir = o_.store_path.substr(0, o_.store_path.rfind('/') + 1);
  if (statvfs(dir.empty() ? "." : dir.c_str(), &host) != 0) host = {};
  kv::StoreStats st;
  {
    std::lock_guard l(statfs_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (statfs_at_ == std::chrono::steady_clock::time_point() || now - statfs_at_ > kStatfsMaxAge) {
      statfs_stats_ = store_->stats();
      statfs_at_ = now;
    }
    st = statfs_stats_;
  }
  // Free is what file data may still take: the heap's free bytes, and the
  // disk's free space as far as the heap may grow into it. The rest of the
  // file (logs, journal room, metadata) counts as used: a user trial saw
  // df show 35% free on a full disk where no write went in.
  const uint64_t grow = std::min<uint64_t>(uint64_t{host.f_bavail} * host.f_frsize,
                                           st.container_growth_bytes);
  const uint64_t heap_free = std::min(st.container_heap_free_bytes, st.container_file_bytes);
  return Space{st.container_file_bytes + grow, heap_free + grow};
}

int Fs::do_statfs(struct statvfs* out) {
  constexpr uint64_t kBlock = 4096;
  const Space sp = space();
  *out = {};
  out->f_bsize = out->f_frsize = kBlock;
  out->f_blocks = sp.total / kBlock;
  out->f_bfree = out->f_bavail = sp.free / kBlock;
  std::shared_lock lock(mu_);
  out->f_files = table_.nodes() + out->f_bfree;
  out->f_ffree = out->f_favail = out->f_bfree;
  out->f_namemax = kNameMax;
  return 0;
}

}  // namespace pmfs
