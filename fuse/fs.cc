#include "fuse/fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "fuse/errno_map.h"
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
// Discarded chunks wait for a sync of the store; past this many, the next
// discard syncs.
constexpr size_t kMaxPendingGarbage = 256;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

timespec to_timespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) ts.tv_nsec += 1000000000, ts.tv_sec--;
  return ts;
}

int64_t to_ns(const timespec& ts) { return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec; }

std::string meta_key(std::string_view key) { return std::string(kMetaPrefix) += key; }
std::string dir_key(std::string_view key) { return std::string(kDirPrefix) += key; }
std::string xattr_key(std::string_view key) { return std::string(kXattrPrefix) += key; }

bool writable(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

bool valid_file_type(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
      return true;
    default:
      return false;
  }
}

Meta default_meta(mode_t type_and_perm) {
  Meta m;
  m.mode = static_cast<uint32_t>(type_and_perm);
  m.uid = static_cast<uint32_t>(getuid());
  m.gid = static_cast<uint32_t>(getgid());
  m.mtime_ns = m.ctime_ns = m.atime_ns = now_ns();
  return m;
}

}  // namespace

// Puts and removes that commit as one store transaction; the first failed
// step is kept and returned by commit().
class Fs::Batch {
 public:
  explicit Batch(kv::Store* s) : t_(s->begin()) {}
  void put(std::string_view k, std::string_view v) {
    if (s_.ok()) s_ = t_->put(k, v);
  }
  void remove(std::string_view k) {
    if (s_.ok()) s_ = t_->remove(k);
  }
  void put_dir(std::string_view key, const Meta& m) { put(dir_key(key), encode_meta(m)); }
  // A name of the file with hard links whose inode key holds id; m is kept
  // in its record for readers that know no links (only the flag counts).
  void put_link(std::string_view name_key, uint64_t id, Meta m) {
    m.link = true;
    m.chunked = false;
    put(name_key, id_key("", id));
    put(meta_key(name_key), encode_meta(m));
  }
  pm::Status commit() { return s_.ok() ? t_->commit() : s_; }

 private:
  std::unique_ptr<kv::Transaction> t_;
  pm::Status s_;
};

Fs::Fs(std::unique_ptr<kv::Store> store, const MountOptions& o)
    : store_(std::move(store)),
      o_(o),
      default_file_(default_meta(S_IFREG | 0644)),
      default_dir_(default_meta(S_IFDIR | 0755)),
      generation_(static_cast<uint32_t>(now_ns() / 1000)),
      table_(default_dir_) {
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
}

Fs::~Fs() {
  // Handles whose release never came: the session ended first (the kernel
  // sends releases in the background, and an unmount need not wait for
  // them). Released here, as the kernel would have.
  std::vector<Handle*> open;
  {
    std::lock_guard g(handles_mu_);
    open.assign(handles_.begin(), handles_.end());
  }
  for (Handle* h : open) do_release(h);
  if (pm::Status s = sync_and_collect(); !s.ok()) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: %s (the next mount removes the unused chunks)\n",
             s.to_string().c_str());
  }
}

// ---------------------------------------------------------------- index

pm::Status Fs::build_index() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  // One scan collects data keys, records and markers (records may come
  // before or after their data). Then, in key order: first every parent
  // directory, so that directories win over files of the same path (a key
  // "a" beside "a/b": such files are hidden and counted) whatever the scan
  // order; then the files, each directory's entries reserved at once.
  struct DataKey {
    std::string key;
    uint64_t size;
    std::optional<uint64_t> link;  // the id it holds, if it could be a link
  };
  std::vector<DataKey> data;
  std::unordered_map<uint64_t, uint64_t> inodes;  // id -> size of the inode key's value
  std::unordered_map<std::string, Meta> records;
  std::vector<std::pair<std::string, Meta>> markers;
  std::vector<std::string> xattrs;
  std::vector<uint64_t> chunks;
  PM_TRY(store_->scan("", [&](std::string_view k, std::string_view v) {
    if (auto id = chunk_id(k)) {
      chunks.push_back(*id);
    } else if (auto ino = key_id(kInodePrefix, k)) {
      inodes.emplace(*ino, v.size());
    } else if (k.starts_with(kXattrPrefix)) {
      xattrs.emplace_back(k.substr(kXattrPrefix.size()));
    } else if (k.starts_with(kDirPrefix)) {
      markers.emplace_back(k.substr(kDirPrefix.size()), decode_meta(v).value_or(default_dir_));
    } else if (k.starts_with(kMetaPrefix)) {
      records.emplace(k.substr(kMetaPrefix.size()), decode_meta(v).value_or(default_file_));
    } else if (!k.empty() && k[0] != '\0') {
      data.push_back({std::string(k), v.size(), key_id("", v)});
    }
    return true;
  }));
  std::sort(data.begin(), data.end(),
            [](const DataKey& a, const DataKey& b) { return a.key < b.key; });
  uint64_t unnamable = 0;
  for (auto& [key, m] : markers) {
    Node* d = key_to_names(key) ? table_.ensure_dir(key, default_dir_) : nullptr;
    if (d == nullptr) {
      unnamable++;
      continue;
    }
    d->meta = m;
    d->has_record = true;
  }
  // The directory of each data key, nullptr when the key has no file name.
  std::vector<Node*> dirs(data.size());
  std::unordered_map<Node*, size_t> entries;
  std::string_view last_parent;
  Node* last_dir = nullptr;
  for (size_t i = 0; i < data.size(); i++) {
    const std::string& key = data[i].key;
    const size_t slash = key.rfind('/');
    const std::string_view parent =
        slash == std::string::npos ? std::string_view() : std::string_view(key).substr(0, slash);
    if (i == 0 || parent != last_parent) {
      last_parent = parent;
      const bool named = parent.empty() || key_to_names(parent).has_value();
      last_dir = named ? table_.ensure_dir(parent, default_dir_) : nullptr;
    }
    const bool ok = last_dir != nullptr &&
                    encode_name(std::string_view(key).substr(slash + 1)).size() <= kNameMax;
    if (!ok) {
      unnamable++;
      continue;
    }
    dirs[i] = last_dir;
    entries[last_dir]++;
  }
  for (auto& [dir, n] : entries) dir->dir->by_name.reserve(dir->dir->by_name.size() + n);
  table_.reserve(table_.nodes() + data.size());
  // Names of files with hard links: a data key whose record has the link
  // flag and whose value is the id of an inode key. A name whose inode is
  // gone shows its raw value. Ids are never handed out again while a name
  // holds them.
  auto link_of = [&](const DataKey& k) -> std::optional<uint64_t> {
    auto r = records.find(k.key);
    if (r == records.end() || !r->second.link || !k.link) return std::nullopt;
    return k.link;
  };
  std::unordered_set<uint64_t> linked;
  for (size_t i = 0; i < data.size(); i++) {
    const std::optional<uint64_t> id = link_of(data[i]);
    if (!id) continue;
    next_inode_id_ = std::max(next_inode_id_, *id + 1);
    if (inodes.contains(*id)) linked.insert(*id);  // shown or not, as chunks are
  }
  PM_TRY(sweep_inodes(inodes, linked, &records));
  uint64_t hidden = 0, nfiles = 0;
  std::unordered_set<uint64_t> named;
  std::unordered_map<std::string, uint64_t> chunked_sizes;
  PM_TRY(index_manifests(records, &named, &chunked_sizes));
  std::unordered_map<uint64_t, Node*> by_inode;
  for (size_t i = 0; i < data.size(); i++) {
    if (dirs[i] == nullptr) continue;
    const std::string& key = data[i].key;
    std::string name = encode_name(std::string_view(key).substr(key.rfind('/') + 1));
    if (table_.child(*dirs[i], name) != nullptr) {
      hidden++;
      continue;
    }
    std::optional<uint64_t> id = link_of(data[i]);
    if (id && !linked.contains(*id)) id.reset();
    if (id && by_inode.contains(*id)) {
      table_.link(by_inode[*id], dirs[i], std::move(name));
      continue;
    }
    const std::string content_key = id ? inode_key(*id) : key;
    auto r = records.find(content_key);
    Meta m = r != records.end() ? r->second : default_file_;
    m.link = false;
    // A record may make a key anything but a directory.
    if (S_ISDIR(m.mode) || !valid_file_type(m.mode)) m.mode = S_IFREG | (m.mode & 07777);
    Node* n = table_.add(dirs[i], std::move(name), content_key, /*dir=*/false, m);
    n->has_record = r != records.end();
    n->size = n->committed_size = id ? inodes[*id] : data[i].size;
    if (id) {
      n->linked = true;
      by_inode[*id] = n;
    }
    if (m.chunked) {
      auto c = chunked_sizes.find(content_key);
      if (c != chunked_sizes.end()) n->size = n->committed_size = c->second;
      n->meta.chunked = c != chunked_sizes.end();  // a damaged manifest shows as content
    }
    nfiles++;
  }
  PM_TRY(sweep_chunks(chunks, named));
  for (const std::string& key : xattrs) {  // whose attributes: walk the names
    Node* n = table_.get(kRootIno);
    if (auto id = key_id(kInodePrefix, key)) {
      auto it = by_inode.find(*id);
      n = it != by_inode.end() ? it->second : nullptr;
    } else if (auto names = key_to_names(key); names && !key.empty()) {
      for (const std::string& name : *names) n = n && n->is_dir() ? table_.child(*n, name) : nullptr;
    }
    if (n != nullptr) n->has_xattrs = true;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  fuse_log(FUSE_LOG_INFO,
           "pmfs: indexed %llu files, %llu inodes in %lld ms (%llu keys without a file name, "
           "%llu files hidden by directories of the same path)\n",
           static_cast<unsigned long long>(nfiles), static_cast<unsigned long long>(table_.nodes()),
           static_cast<long long>(ms), static_cast<unsigned long long>(unnamable),
           static_cast<unsigned long long>(hidden));
  return pm::Status();
}

// The chunks that every manifest names go to *named, shown files or not (a
// file hidden by a directory of the same path, or without a file name,
// keeps its chunks); the size of each chunked file to *sizes.
pm::Status Fs::index_manifests(const std::unordered_map<std::string, Meta>& records,
                               std::unordered_set<uint64_t>* named,
                               std::unordered_map<std::string, uint64_t>* sizes) {
  std::string value;
  for (const auto& [key, meta] : records) {
    if (!meta.chunked) continue;
    pm::Status s = store_->get(key, &value);
    if (s.is_not_found()) continue;  // a record left by `pm kv del`: its chunks are unnamed
    PM_TRY(s.with_context(fmt::format("manifest of {}", key)));
    std::optional<Manifest> m = decode_manifest(value);
    if (!m) {  // shown as its raw value, which the user can read and fix
      fuse_log(FUSE_LOG_ERR, "pmfs: %s: damaged chunk manifest (%zu bytes): shown as content\n",
               key.c_str(), value.size());
      continue;
    }
    named->insert(m->ids.begin(), m->ids.end());
    sizes->emplace(key, m->size);
  }
  return pm::Status();
}

// Inode keys no name links to are what `pm kv del` of every name left
// (a crash cannot: the last name goes in one transaction with them):
// removed with their records and attributes, and their records dropped from
// *records, so that the chunks of their manifests are swept as unnamed.
pm::Status Fs::sweep_inodes(const std::unordered_map<uint64_t, uint64_t>& inodes,
                            const std::unordered_set<uint64_t>& linked,
                            std::unordered_map<std::string, Meta>* records) {
  uint64_t removed = 0;
  for (const auto& [id, size] : inodes) {
    next_inode_id_ = std::max(next_inode_id_, id + 1);
    if (linked.contains(id)) continue;
    const std::string key = inode_key(id);
    records->erase(key);
    Batch b(store_.get());
    b.remove(key);
    b.remove(meta_key(key));
    b.remove(xattr_key(key));
    PM_TRY(b.commit().with_context("remove a file no name links to"));
    removed++;
  }
  if (removed != 0) {
    fuse_log(FUSE_LOG_INFO, "pmfs: removed %llu files no name links to\n",
             static_cast<unsigned long long>(removed));
  }
  return pm::Status();
}

// Chunks no manifest names are what a crash left between putting them and
// committing (or durably dropping) their manifest: removed. Chunk ids start
// above every id in the store or named by a manifest.
pm::Status Fs::sweep_chunks(const std::vector<uint64_t>& chunks,
                            const std::unordered_set<uint64_t>& named) {
  // Above the ids manifests name too: one whose chunk is missing (a damaged
  // store) must not be handed out again.
  uint64_t max_id = 0, removed = 0;
  for (uint64_t id : named) max_id = std::max(max_id, id);
  for (uint64_t id : chunks) {
    max_id = std::max(max_id, id);
    if (named.contains(id)) continue;
    PM_TRY(store_->remove(chunk_key(id)).with_context("remove an unused chunk"));
    removed++;
  }
  next_chunk_id_ = max_id + 1;
  if (removed != 0) {
    fuse_log(FUSE_LOG_INFO, "pmfs: removed %llu chunks no file names (left by a crash)\n",
             static_cast<unsigned long long>(removed));
  }
  return pm::Status();
}

// ---------------------------------------------------------------- attributes

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
  st->st_blocks = (st->st_size + 511) / 512;
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
  std::shared_lock lock(mu_);
  Node* p = table_.get(parent);
  if (p == nullptr) return ENOENT;
  // "." and ".." of any inode the index holds: how the kernel decodes a file
  // handle (open_by_handle_at, NFS export) of an inode it no longer caches.
  const std::string_view dots(name);
  if (dots == "." || (dots == ".." && p->is_dir())) {
    Node* n = dots == "." ? p : table_.get(p->parent != 0 ? p->parent : p->ino);
    if (n == nullptr || (n->parent == 0 && n->ino != kRootIno)) return ESTALE;
    fill_entry(n, e);
    return 0;
  }
  if (!p->is_dir()) return ENOTDIR;
  if (std::strlen(name) > kNameMax) return ENAMETOOLONG;
  Node* n = table_.child(*p, name);
  if (n == nullptr) {
    *e = {};  // a negative entry the kernel may cache
    e->entry_timeout = kCacheSeconds;
    return 0;
  }
  fill_entry(n, e);
  return 0;
}

void Fs::do_forget(Ino ino, uint64_t nlookup) {
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return;
  n->nlookup.fetch_sub(std::min(nlookup, n->nlookup.load()));
  table_.erase_if_unused(n);
}

int Fs::do_getattr(Ino ino, struct stat* st) {
  std::shared_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  fill_stat(*n, st);
  return 0;
}

// Loads the file's committed form into d unless it holds the file already.
// REQUIRES: d->mu and mu_ held.
int Fs::load(FileData* d, const Node& n) {
  if (d->content.loaded()) return 0;
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
    return err;
  }
  n->meta.chunked = chunked;
  discard_chunks(d->content.committed());
  return 0;
}

int Fs::removed_content(const Node& n, Removed* r) {
  if (n.is_dir() || (n.open_count == 0 && !n.meta.chunked)) return 0;
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
    if (pm::Status s = store_->remove(chunk_key(id)); !s.ok()) {  // the next mount's sweep does it
      fuse_log(FUSE_LOG_WARNING, "pmfs: remove chunk %llu: %s\n",
               static_cast<unsigned long long>(id), s.to_string().c_str());
    }
  }
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
  pm::Status s = b.commit();
  if (s.code() == pm::Code::kInvalidArgument) return size_errno;
  if (!s.ok()) fuse_log(FUSE_LOG_ERR, "pmfs: %s\n", s.to_string().c_str());
  return to_errno(s);
}

namespace {

// What Linux does on a local file system (should_remove_suid): a write or a
// truncation by a process without CAP_FSETID (here: not root) clears
// set-user-ID, and set-group-ID where the group may execute (without group
// execute it marks mandatory locking and stays).
// Returns whether the mode changed.
bool kill_suid(Meta* m, const Caller& c) {
  if (c.uid == 0) return false;
  const uint32_t kill = S_ISUID | ((m->mode & S_IXGRP) ? S_ISGID : 0);
  if ((m->mode & kill) == 0) return false;
  m->mode &= ~kill;
  return true;
}

}  // namespace

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
    n->size = size;
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

// ---------------------------------------------------------------- names

// 0 when `name` may be created in `parent`; *component is its key component.
int Fs::check_new_name(const Node* parent, const char* name, std::string* component) const {
  if (parent == nullptr) return ENOENT;
  if (!parent->is_dir()) return ENOTDIR;
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
  Node* n = table_.child(*p, name);
  if (n == nullptr) return ENOENT;
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

// Adds to b the moves of every key below directory src to below new_key.
int Fs::rename_tree(Node* src, const std::string& new_key, Batch* b) {
  std::vector<std::pair<Node*, std::string>> pending{{src, new_key}};
  std::string value;
  while (!pending.empty()) {
    auto [dir, key] = std::move(pending.back());
    pending.pop_back();
    b->remove(dir_key(dir->key));
    b->put_dir(key, dir->meta);
    if (int err = move_xattrs(*dir, key, b)) return err;
    for (const auto& [name, ci] : dir->dir->by_name) {
      Node* c = table_.get(ci.second);
      const std::string component = *decode_name(name);
      std::string ck = child_key(key, component);
      if (c->is_dir()) {
        pending.emplace_back(c, std::move(ck));
        continue;
      }
      if (c->linked) {  // a name: the content stays at the inode key
        const std::string old = child_key(dir->key, component);
        b->remove(old);
        b->remove(meta_key(old));
        b->put_link(ck, *key_id(kInodePrefix, c->key), c->meta);
        continue;
      }
      pm::Status s = store_->get(c->key, &value);
      if (!s.ok() && !s.is_not_found()) return to_errno(s);
      b->remove(c->key);
      b->remove(meta_key(c->key));
      b->put(ck, value);
      b->put(meta_key(ck), encode_meta(c->meta));
      if (int err = move_xattrs(*c, ck, b)) return err;
    }
  }
  return 0;
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
  Node* src = table_.child(*p, name);
  if (src == nullptr) return ENOENT;
  if (std::strlen(newname) > kNameMax) return ENAMETOOLONG;
  auto component = decode_name(newname);
  if (!component || (component->empty() && np->key.empty())) return EINVAL;
  Node* dst = table_.child(*np, newname);
  if (dst == src) return 0;  // the same name, or two names of one file: POSIX says do nothing
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
  if (src->is_dir()) {
    if (int err = rename_tree(src, new_key, &b)) return err;
    b.put_dir(new_key, sm);
  } else if (src->linked) {  // a name moves; the content stays at the inode key
    const std::string old = child_key(p->key, *decode_name(name));
    b.remove(old);
    b.remove(meta_key(old));
    b.put_link(new_key, *key_id(kInodePrefix, src->key), sm);
    b.put(meta_key(src->key), encode_meta(sm));
  } else {
    std::string value;
    pm::Status s = store_->get(src->key, &value);
    if (!s.ok() && !s.is_not_found()) return to_errno(s);
    b.remove(src->key);
    b.remove(meta_key(src->key));
    b.put(new_key, value);
    b.put(meta_key(new_key), encode_meta(sm));
    if (int err = move_xattrs(*src, new_key, &b)) return err;
    if (g_fuse_planted_bugs.rename_copies_first) {
      Batch copy(store_.get());
      copy.put(new_key, value);
      copy.put(meta_key(new_key), encode_meta(sm));
      if (int err = commit(copy, EFBIG)) return err;
    }
  }
  const Meta pm = touched(*p), npm = touched(*np);
  b.put_dir(p->key, pm);
  if (np != p) b.put_dir(np->key, npm);
  // A tree too large for one log record cannot move atomically: EXDEV makes
  // mv(1) copy and remove instead.
  if (int err = commit(b, src->is_dir() ? EXDEV : EFBIG)) return err;
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

// ---------------------------------------------------------------- file data

int Fs::do_open(Ino ino, int flags, const Caller& c, Handle** out, bool* mode_changed) {
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  h->flags = flags;
  {
    std::unique_lock lock(mu_);
    Node* n = table_.get(ino);
    if (n == nullptr) return ENOENT;
    if (n->is_dir()) return EISDIR;
    if (n->data == nullptr) {
      n->data = new_file_data();
    }
    h->data = n->data;
    n->open_count++;  // keeps the node and its data until release
  }
  if ((flags & O_TRUNC) && writable(flags)) {  // atomic_o_trunc: the put at flush truncates
    int err = 0;
    {
      std::lock_guard dl(h->data->mu);
      std::unique_lock lock(mu_);
      Node* n = table_.get(ino);
      // Loaded first: a chunked file's manifest says which chunks the put
      // at flush drops.
      err = load(h->data.get(), *n);
      if (err == 0) err = h->data->content.truncate(0);
      if (err == 0) {
        n->size = 0;
        n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
        *mode_changed = kill_suid(&n->meta, c);  // stored with the truncated content at flush
      }
    }
    if (err != 0) {
      do_release(h.release());
      return err;
    }
  }
  {
    std::lock_guard g(handles_mu_);
    handles_.insert(h.get());
  }
  *out = h.release();
  return 0;
}

int Fs::do_read(Handle* h, size_t size, off_t off, std::string* out) {
  FileData* d = h->data.get();
  std::lock_guard dl(d->mu);
  if (!d->content.loaded()) {
    std::shared_lock lock(mu_);
    Node* n = table_.get(h->ino);
    if (n == nullptr) return EBADF;
    if (int err = load(d, *n)) return err;
  }
  return d->content.read(static_cast<uint64_t>(off), size, out);
}

int Fs::do_write(Handle* h, const char* data, size_t size, off_t off, const Caller& c,
                 bool* mode_changed) {
  FileData* d = h->data.get();
  std::lock_guard dl(d->mu);
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr) return EBADF;
  if (int err = load(d, *n)) return err;
  const uint64_t o = (h->flags & O_APPEND) ? d->content.size() : static_cast<uint64_t>(off);
  const int err = d->content.write(o, std::string_view(data, size));
  n->size = d->content.size();  // a failed write may have extended the file
  if (err != 0) return err;
  n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
  *mode_changed = kill_suid(&n->meta, c);  // stored with the content at flush
  return 0;
}

int Fs::do_fallocate(Handle* h, int mode, off_t off, off_t len, const Caller& c,
                     bool* mode_changed) {
  const bool keep_size = mode & FALLOC_FL_KEEP_SIZE;
  const int kind = mode & ~FALLOC_FL_KEEP_SIZE;
  if (kind != 0 && kind != FALLOC_FL_PUNCH_HOLE && kind != FALLOC_FL_ZERO_RANGE) return EOPNOTSUPP;
  if (off < 0 || len <= 0) return EINVAL;
  const auto begin = static_cast<uint64_t>(off), end = begin + static_cast<uint64_t>(len);
  if (end < begin) return EFBIG;
  FileData* d = h->data.get();
  std::lock_guard dl(d->mu);
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr) return EBADF;
  if (int err = load(d, *n)) return err;
  const uint64_t size = d->content.size();
  // The store cannot set space aside (a later write may still find it full:
  // docs/fuse.md), but a request for more than it has left fails at once,
  // as on a full disk. Holes and zeros take no space.
  if (kind == 0 && end > size && end - std::max(begin, size) > space().free) {
    return ENOSPC;
  }
  const bool grows = !keep_size && kind != FALLOC_FL_PUNCH_HOLE && end > size;
  if (grows) {
    if (int err = d->content.truncate(end)) return err;
  }
  if (kind != 0) {
    const int err = d->content.zero(begin, end - begin);
    n->size = d->content.size();
    if (err != 0) return err;
  }
  n->size = d->content.size();
  if (!grows && kind == 0) return 0;  // nothing changed
  n->meta.mtime_ns = n->meta.ctime_ns = now_ns();
  *mode_changed = kill_suid(&n->meta, c);  // stored with the content at flush
  return 0;
}

int Fs::do_flush(Handle* h) {
  if (!writable(h->flags)) return 0;  // a reader's close reports no writer's failure
  FileData* d = h->data.get();
  std::unique_lock dl(d->mu);
  if (!d->content.modified()) return 0;
  std::unique_lock lock(mu_);
  Node* n = table_.get(h->ino);
  if (n == nullptr || n->parent == 0) return 0;  // unlinked: nowhere to put it
  Batch b(store_.get());
  if (int err = put_content(d, n, n->meta, &b)) {  // every descriptor shows the store again
    n->size = n->committed_size;
    lock.unlock();
    dl.unlock();  // the kernel may write dirty mapped pages back first: a FUSE_WRITE
    invalidate_content(h->ino);
    return err;
  }
  n->committed_size = n->size = d->content.size();
  n->has_record = true;
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

int Fs::do_fsync(Handle* h) {
  if (int err = do_flush(h)) return err;
  return do_sync();
}

int Fs::do_sync() { return to_errno(sync_and_collect()); }

void Fs::do_release(Handle* h) {
  if (int err = do_flush(h)) {
    fuse_log(FUSE_LOG_WARNING, "pmfs: inode %llu: write at release failed: %s\n",
             static_cast<unsigned long long>(h->ino), std::strerror(err));
  }
  std::vector<uint64_t> staged, retired;
  {
    std::lock_guard dl(h->data->mu);
    std::unique_lock lock(mu_);
    Node* n = table_.get(h->ino);
    if (n != nullptr && --n->open_count == 0) {
      // Named by no committed manifest: what an unflushed writer staged.
      staged = n->data->content.abandon();
      retired.swap(n->retired_chunks);
      std::string().swap(n->unlinked_value);
      n->data.reset();
      table_.erase_if_unused(n);
    }
  }
  remove_chunks(staged);
  discard_chunks(std::move(retired));
  {
    std::lock_guard g(handles_mu_);
    handles_.erase(h);
  }
  delete h;
}

// ---------------------------------------------------------------- directories

int Fs::do_readdir(fuse_req_t req, Ino ino, size_t size, off_t off, bool plus, std::string* out) {
  std::shared_lock lock(mu_);
  Node* d = table_.get(ino);
  if (d == nullptr) return ENOENT;
  if (!d->is_dir()) return ENOTDIR;
  out->resize(size);
  size_t pos = 0;
  // False when the entry does not fit; it is then left for the next call
  // (and, for readdirplus, gets no lookup reference).
  auto emit = [&](const char* name, Node* n, bool dot, uint64_t next) {
    fuse_entry_param e{};
    fill_stat(*n, &e.attr);
    size_t need;
    if (plus) {
      if (!dot) {
        e.ino = n->ino;
        e.generation = generation_;
        e.attr_timeout = e.entry_timeout = kCacheSeconds;
      }
      need = fuse_add_direntry_plus(req, out->data() + pos, size - pos, name, &e,
                                    static_cast<off_t>(next));
    } else {
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
  if (more && off < 2) {
    Node* up = d->parent != 0 ? table_.get(d->parent) : d;
    more = emit("..", up != nullptr ? up : d, true, 2);
  }
  const auto& entries = d->dir->by_cookie;
  for (auto it = entries.upper_bound(static_cast<uint64_t>(std::max<off_t>(off, 2)));
       more && it != entries.end(); ++it) {
    const auto& [name, ci] = *it->second;
    more = emit(name.c_str(), table_.get(ci.second), false, it->first);
  }
  out->resize(pos);
  return 0;
}

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
  const uint64_t host_free = uint64_t{host.f_bavail} * host.f_frsize;
  const uint64_t used = std::min(st.container_used_bytes, st.container_file_bytes);
  return Space{st.container_file_bytes + host_free, st.container_file_bytes - used + host_free};
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

namespace pmfs {

// ---------------------------------------------------------------- extended attributes

namespace {

// Namespaces kept as they are; system.* (POSIX ACLs) would need enforcing.
int check_xattr_name(const char* name) {
  const std::string_view n(name);
  if (n.empty() || n.size() > XATTR_NAME_MAX) return ERANGE;
  for (std::string_view ns : {"user.", "security.", "trusted."}) {
    if (n.starts_with(ns) && n.size() > ns.size()) return 0;
  }
  return ENOTSUP;
}

}  // namespace

int Fs::read_xattrs(const Node& n, Xattrs* out) {
  out->clear();
  if (!n.has_xattrs) return 0;
  std::string record;
  pm::Status s = store_->get(xattr_key(n.key), &record);
  if (s.is_not_found()) return 0;
  if (!s.ok()) return to_errno(s);
  std::optional<Xattrs> x = decode_xattrs(record);
  if (!x) {
    fuse_log(FUSE_LOG_ERR, "pmfs: inode %llu: damaged extended attribute record\n",
             static_cast<unsigned long long>(n.ino));
    return EIO;
  }
  *out = std::move(*x);
  return 0;
}

// Reads the attributes, applies `change`, stores them with the new ctime.
int Fs::change_xattrs(Ino ino, const std::function<int(Xattrs*)>& change) {
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  if (int err = change(&x)) return err;
  Meta m = n->meta;
  m.ctime_ns = now_ns();
  const bool stored = n->parent != 0 || n->ino == kRootIno;  // a detached node has no keys
  if (stored) {
    Batch b(store_.get());
    if (x.empty()) {
      b.remove(xattr_key(n->key));
    } else {
      b.put(xattr_key(n->key), encode_xattrs(x));
    }
    if (n->is_dir()) {
      b.put_dir(n->key, m);
    } else {
      b.put(meta_key(n->key), encode_meta(m));
    }
    if (int err = commit(b, ENOSPC)) return err;  // over the store's value limit
    n->has_record = true;
  }
  n->has_xattrs = !x.empty();
  n->meta = m;
  return 0;
}

int Fs::do_setxattr(Ino ino, const char* name, std::string_view value, int flags) {
  if (int err = check_xattr_name(name)) return err;
  if (value.size() > XATTR_SIZE_MAX) return E2BIG;
  return change_xattrs(ino, [&](Xattrs* x) {
    const bool exists = x->count(name) != 0;
    if ((flags & XATTR_CREATE) && exists) return EEXIST;
    if ((flags & XATTR_REPLACE) && !exists) return ENODATA;
    (*x)[name] = std::string(value);
    return 0;
  });
}

int Fs::do_removexattr(Ino ino, const char* name) {
  if (int err = check_xattr_name(name)) return err == ENOTSUP ? ENODATA : err;
  return change_xattrs(ino, [&](Xattrs* x) { return x->erase(name) == 1 ? 0 : ENODATA; });
}

int Fs::do_getxattr(Ino ino, const char* name, std::string* value) {
  std::shared_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  auto it = x.find(name);
  if (it == x.end()) return ENODATA;
  *value = it->second;
  return 0;
}

int Fs::do_listxattr(Ino ino, std::string* names) {
  std::shared_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  names->clear();
  for (const auto& [k, v] : x) (*names += k) += '\0';
  return 0;
}

}  // namespace pmfs
