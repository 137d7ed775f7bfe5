// Fs::build_index: the DRAM index of a mount, from one scan of the store,
// and the sweeps of what no file names (docs/fuse.md, "The index").
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/errno_map.h"
#include "fuse/file_content.h"
#include "fuse/fs.h"
#include "fuse/fs_internal.h"
#include "fuse/planted_bugs.h"

namespace pmfs {

// ---------------------------------------------------------------- index

pm::Status Fs::build_index() {
  std::unique_lock lock(mu_);
  PM_TRY(finish_rename());
  PM_TRY(read_ino_counter());
  pm::Result<bool> lazy = o_.index_at_mount ? pm::Result<bool>(false) : can_load_lazily();
  if (!lazy.ok()) return lazy.status();
  PM_TRY(*lazy ? index_root() : index_all());
  indexed_ = true;
  return pm::Status();
}

pm::Status Fs::read_ino_counter() {
  std::string v;
  pm::Status s = store_->get(kInoKey, &v);
  if (s.is_not_found()) {
    next_stable_ino_ = stable_ino_end_ = kRootIno + 1;  // a new store (or one older than them)
    return pm::Status();
  }
  if (!s.ok()) return s.with_context("read the next inode number");
  const uint64_t next = v.size() == 8 ? get_le<uint64_t>(v, 0) : 0;
  if (next <= kRootIno || next > kStableInoEnd) {
    fuse_log(FUSE_LOG_ERR,
             "pmfs: the next inode number (key \\0n) is damaged: the files this mount "
             "creates keep their inode numbers only while it lasts\n");
    next_stable_ino_ = stable_ino_end_ = 0;
    return pm::Status();
  }
  next_stable_ino_ = stable_ino_end_ = next;
  return pm::Status();
}

// The mark holds the sequence number its own put took (~Fs), and holds
// while no update followed it: the store's next number is one past it.
// Any update after it (a chunk a crash then left unnamed, a change made
// outside any mount, such as `pm kv del` of a large file's key) moves the
// store's number on, and the next mount sweeps.
pm::Result<bool> Fs::ended_cleanly() {
  std::string v;
  pm::Status s = store_->get(kCleanKey, &v);
  if (s.is_not_found()) return false;
  if (!s.ok()) return s.with_context("read the clean-end mark");
  if (v.size() != 8) return false;  // (an earlier binary's mark, with no number)
  return g_fuse_planted_bugs.clean_mark_trusted ||
         store_->next_seq() == get_le<uint64_t>(v, 0) + 1;
}

// Directories load at their first use when the store's ordered index makes
// a directory's entries a few seeks away, and nothing needs every key at
// mount: a file's link count (the names of a hard-linked file are all over
// the tree), and the sweep of chunks no manifest names, which any update
// since the last clean end may have left (a crash between putting chunks
// and committing their manifest, a large file's key removed outside a
// mount). The next ids are learned when first needed (learn_ids).
pm::Result<bool> Fs::can_load_lazily() {
  if (!ordered_) return false;
  auto any = [&](std::string_view prefix) -> pm::Result<bool> {
    bool found = false;
    PM_TRY(store_->scan(prefix, kv::Store::prefix_end(prefix), 1,
                        [&](std::string_view, std::string_view) { return !(found = true); }));
    return found;
  };
  pm::Result<bool> inodes = any(kInodePrefix);
  if (!inodes.ok() || *inodes) return inodes.ok() ? pm::Result<bool>(false) : inodes;
  pm::Result<bool> clean = ended_cleanly();
  if (!clean.ok() || *clean) return clean;
  pm::Result<bool> chunks = any(kChunkPrefix);
  if (!chunks.ok()) return chunks;
  return !*chunks;
}

pm::Status Fs::index_root() {
  Node* root = table_.get(kRootIno);
  std::string value;
  pm::Status s = store_->get(kDirPrefix, &value);
  if (s.ok()) {
    root->meta = decode_meta(value).value_or(default_dir_);
    root->meta.mode = S_IFDIR | (root->meta.mode & 07777);
    root->meta.ino = 0;  // always kRootIno
    root->has_record = true;
  } else if (!s.is_not_found()) {
    return s.with_context("read the root's record");
  }
  s = store_->get(kXattrPrefix, &value);
  if (!s.ok() && !s.is_not_found()) return s.with_context("read the root's attributes");
  root->has_xattrs = s.ok();
  root->dir->loaded = false;
  ids_known_ = false;
  fuse_log(FUSE_LOG_INFO, "pmfs: each directory is indexed at its first use\n");
  return pm::Status();
}

pm::Status Fs::index_all() {
  const auto start = std::chrono::steady_clock::now();
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
    Node* d = key_to_names(key) ? table_.ensure_dir(key, default_dir_, &m) : nullptr;
    if (d == nullptr) {
      unnamable++;
      continue;
    }
    d->meta = m;
    if (d->ino != m.ino) d->meta.ino = 0;  // numbered already (see InodeTable::add)
    d->meta.mode = S_IFDIR | (m.mode & 07777);  // a damaged marker: still a directory
    d->has_record = true;
  }
  // The directory of each data key, nullptr when the key has no file name.
  std::vector<Node*> dirs(data.size());
  std::unordered_map<Node*, size_t> entries;
  std::optional<std::string_view> last_parent;
  Node* last_dir = nullptr;
  for (size_t i = 0; i < data.size(); i++) {
    const std::string& key = data[i].key;
    const size_t slash = key.rfind('/');
    if (slash == 0) {  // the root's "%%", the empty key (key_names.h)
      unnamable++;
      continue;
    }
    const std::string_view parent =
        slash == std::string::npos ? std::string_view() : std::string_view(key).substr(0, slash);
    if (parent != last_parent) {
      last_parent = parent;
      const bool named = slash == std::string::npos || key_to_names(parent).has_value();
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
    if (*id < kMaxId) next_inode_id_ = std::max(next_inode_id_, *id + 1);
    if (inodes.contains(*id)) linked.insert(*id);  // shown or not, as chunks are
  }
  PM_TRY(sweep_inodes(inodes, linked, &records));
  uint64_t hidden = 0, nfiles = 0;
  std::unordered_set<uint64_t> named;
  std::unordered_map<std::string, ChunkedSize> chunked_sizes;
  PM_TRY(index_manifests(records, &named, &chunked_sizes));
  std::unordered_map<uint64_t, Node*> by_inode;
  for (size_t i = 0; i < data.size(); i++) {
    if (dirs[i] == nullptr) continue;
    std::string& key = data[i].key;  // moved into its node below: read last here
    std::string name = encode_name(std::string_view(key).substr(key.rfind('/') + 1));
    std::optional<uint64_t> id = link_of(data[i]);
    if (id && !linked.contains(*id)) id.reset();
    if (id && by_inode.contains(*id)) {
      if (table_.child(*dirs[i], name) != nullptr) {
        hidden++;
      } else {
        table_.link(by_inode[*id], dirs[i], std::move(name));
      }
      continue;
    }
    std::string content_key = id ? inode_key(*id) : std::move(key);
    auto r = records.find(content_key);
    Meta m = r != records.end() ? r->second : default_file_;
    m.link = false;
    // A record may make a key anything but a directory.
    if (!valid_file_type(m.mode)) m.mode = S_IFREG | (m.mode & 07777);
    // The keys are unique, so a name taken is a directory's of the same path.
    Node* n = table_.add(dirs[i], std::move(name), std::move(content_key), /*dir=*/false, m);
    if (n == nullptr) {
      hidden++;
      continue;
    }
    n->has_record = r != records.end();
    n->size = n->committed_size = id ? inodes[*id] : data[i].size;
    if (id) {
      n->linked = true;
      by_inode[*id] = n;
    }
    if (m.chunked) {
      auto c = chunked_sizes.find(n->key);
      if (c != chunked_sizes.end()) {
        n->size = n->committed_size = c->second.size;
        n->hole_bytes = c->second.holes;
      }
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
                               std::unordered_map<std::string, ChunkedSize>* sizes) {
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
    sizes->emplace(key, ChunkedSize{m->size, hole_bytes(m->chunk_bytes, m->size, m->ids)});
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
    if (id < kMaxId) next_inode_id_ = std::max(next_inode_id_, id + 1);
    if (linked.contains(id)) continue;
    const std::string key = inode_key(id);
    Batch b(store_.get());
    b.remove(key);
    b.remove(meta_key(key));
    b.remove(xattr_key(key));
    // A full store must still mount, as with chunks below: the file stays
    // (no name shows it, its record keeps its chunks named) and the next
    // mount tries again.
    if (pm::Status s = b.commit(); !s.ok()) {
      if (s.code() != pm::Code::kNoSpace) return s.with_context("remove a file no name links to");
      fuse_log(FUSE_LOG_WARNING, "pmfs: remove a file no name links to: %s\n",
               s.to_string().c_str());
      continue;
    }
    records->erase(key);
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
  for (uint64_t id : named) {
    if (id < kMaxId) max_id = std::max(max_id, id);
  }
  for (uint64_t id : chunks) {
    if (id < kMaxId) max_id = std::max(max_id, id);
    if (named.contains(id)) continue;
    // A full store must still mount: the next mount tries again.
    if (pm::Status s = store_->remove(chunk_key(id)); !s.ok() && !s.is_not_found()) {
      chunk_ids_.leftovers = true;
      fuse_log(FUSE_LOG_WARNING, "pmfs: remove an unused chunk: %s\n", s.to_string().c_str());
      continue;
    }
    removed++;
  }
  chunk_ids_.next = max_id + 1;
  if (removed != 0) {
    fuse_log(FUSE_LOG_INFO, "pmfs: removed %llu chunks no file names (left by a crash)\n",
             static_cast<unsigned long long>(removed));
  }
  return pm::Status();
}

}  // namespace pmfs
