// Fs::load_dir: a directory's entries read from the store at its first use
// (docs/fuse.md, "The index"), so that a mount costs the same for ten keys
// and for ten million.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fuse/errno_map.h"
#include "fuse/file_content.h"
#include "fuse/fs.h"
#include "fuse/fs_internal.h"

namespace pmfs {

namespace {

// Keys a scan reads at first after a seek: a directory with many
// subdirectories seeks often, and each scan reads its values too.
constexpr uint64_t kFirstBatch = 16;
constexpr uint64_t kMaxBatch = 4096;

// Walks the keys under `prefix` (one directory's keys under one reserved
// prefix, or its data keys): entry(component, value) for each key prefix +
// component, component without '/'; below(component, key) for the first
// key of a deeper one, and when it returns true, the rest of that
// component's keys are skipped with one seek. So a directory's walk costs
// its entries plus a seek per subdirectory, not its whole subtree.
// `begin` is where the walk starts (>= prefix).
pm::Status walk_entries(kv::Store* store, std::string_view prefix, std::string_view begin,
                        const std::function<void(std::string_view, std::string_view)>& entry,
                        const std::function<bool(std::string_view, std::string_view)>& below) {
  const std::string end = kv::Store::prefix_end(prefix);
  std::string from(begin), last, skip_to;
  for (uint64_t batch = kFirstBatch;;) {
    uint64_t seen = 0;
    bool skipped = false;
    PM_TRY(store->scan(from, end, batch, [&](std::string_view k, std::string_view v) {
      seen++;
      const std::string_view rest = k.substr(prefix.size());
      const size_t slash = rest.find('/');
      if (slash == std::string_view::npos) {
        entry(rest, v);
      } else if (below(rest.substr(0, slash), k)) {
        // '0' follows '/': the first key past every "prefix component/...".
        (skip_to.assign(k.substr(0, prefix.size() + slash))) += '0';
        skipped = true;
        return false;
      }
      last.assign(k);
      return true;
    }));
    if (skipped) {
      from.swap(skip_to);
      batch = kFirstBatch;
    } else if (seen < batch) {
      return pm::Status();
    } else {
      (from = last) += '\0';  // the next key after it
      batch = std::min(batch * 2, kMaxBatch);
    }
  }
}

// The walks return keys in order: sorted vectors, searched by halving,
// cost less than maps for a directory of a million entries.
const Meta* find_record(const std::vector<std::pair<std::string, Meta>>& v, std::string_view k) {
  auto it = std::lower_bound(v.begin(), v.end(), k,
                             [](const auto& e, std::string_view x) { return e.first < x; });
  return it != v.end() && it->first == k ? &it->second : nullptr;
}

bool contains_sorted(const std::vector<std::string>& v, std::string_view k) {
  return std::binary_search(v.begin(), v.end(), k, std::less<>());
}

}  // namespace

// One scan of the records and of the chunk keys: the ids that chunks,
// manifests and names with the link flag hold, wherever they are (a
// directory not read yet, a key without a file name). A store indexed
// this way held no inode key at mount, so a name's id is a damaged store's
// (a name whose inode `pm kv del` removed), and so is a manifest's that no
// chunk has; handing one out again would make the next mount, which reads
// every key, take that name for a name of the new file, or that manifest
// for an owner of the new chunk.
pm::Status Fs::learn_ids() {
  if (ids_known_.load(std::memory_order_acquire)) return pm::Status();
  std::lock_guard g(ids_mu_);
  if (ids_known_.load()) return pm::Status();
  std::vector<std::pair<std::string, Meta>> flagged;  // data keys whose record has a flag
  PM_TRY(store_->scan(kMetaPrefix, [&](std::string_view k, std::string_view v) {
    std::optional<Meta> m = decode_meta(v);
    if (m && (m->link || m->chunked)) flagged.emplace_back(k.substr(kMetaPrefix.size()), *m);
    return true;
  }));
  uint64_t inode = 0, chunk = 0;
  auto raise = [](uint64_t* to, uint64_t id) {
    if (id < kMaxId) *to = std::max(*to, id);
  };
  PM_TRY(store_->scan(kChunkPrefix, [&](std::string_view k, std::string_view) {
    if (std::optional<uint64_t> id = chunk_id(k)) raise(&chunk, *id);
    return true;
  }));
  std::string value;
  for (const auto& [key, m] : flagged) {
    pm::Status s = store_->get(key, &value);
    if (s.is_not_found()) continue;
    PM_TRY(s.with_context(fmt::format("learn the ids in use: read {}", key)));
    std::optional<uint64_t> id = key_id("", value);
    if (m.link && id) raise(&inode, *id);
    std::optional<Manifest> manifest = m.chunked ? decode_manifest(value) : std::nullopt;
    if (manifest) {
      for (uint64_t c : manifest->ids) raise(&chunk, c);
    }
  }
  inode_floor_ = inode + 1;
  for (uint64_t next = chunk_ids_.next.load(); next <= chunk;) {
    if (chunk_ids_.next.compare_exchange_weak(next, chunk + 1)) break;
  }
  ids_known_.store(true, std::memory_order_release);
  if (!flagged.empty()) {
    fuse_log(FUSE_LOG_INFO, "pmfs: new ids go above inode %llu and chunk %llu (%zu records read)\n",
             static_cast<unsigned long long>(inode), static_cast<unsigned long long>(chunk),
             flagged.size());
  }
  return pm::Status();
}

int Fs::ready(Node* n, bool exclusive) {
  if (n == nullptr || !n->is_dir() || n->dir->loaded) return 0;
  if (!exclusive) return kNeedsLoad;
  pm::Status s = load_dir(n);
  if (!s.ok()) fuse_log(FUSE_LOG_ERR, "pmfs: %s\n", s.to_string().c_str());
  return to_errno(s);
}

int Fs::ready_tree(Node* d) {
  std::vector<Node*> pending{d};
  while (!pending.empty()) {
    Node* n = pending.back();
    pending.pop_back();
    if (int err = ready(n, true)) return err;
    for (const auto& [name, ci] : n->dir->by_name) {
      Node* c = table_.get(ci.second);
      if (c->is_dir()) pending.push_back(c);
    }
  }
  return 0;
}

pm::Status Fs::load_dir(Node* d) {
  // Everything is read before the index changes, so that a failed read
  // leaves the directory as it was (not loaded: the next use tries again).
  const auto start = std::chrono::steady_clock::now();
  const bool root = d->ino == kRootIno;
  const std::string base = root ? std::string() : d->key + '/';
  // The root's component "" would be the key "" (refused, key_names.h).
  auto nameable = [&](std::string_view c) {
    return !(root && c.empty()) && encode_name(c).size() <= kNameMax;
  };
  std::map<std::string, std::optional<Meta>, std::less<>> dirs;  // -> its marker's record
  std::vector<std::pair<std::string, Meta>> records;  // in key order
  std::vector<std::string> xattrs;                     // in key order
  auto skip = [](std::string_view, std::string_view) { return true; };
  auto prefixed = [&](std::string_view p) { return std::string(p) + base; };

  std::string prefix = prefixed(kDirPrefix);
  PM_TRY(walk_entries(
      store_.get(), prefix, prefix,
      [&](std::string_view c, std::string_view v) {
        if (!nameable(c)) return;
        Meta m = decode_meta(v).value_or(default_dir_);
        m.mode = S_IFDIR | (m.mode & 07777);
        dirs[std::string(c)] = m;
      },
      [&](std::string_view c, std::string_view k) {  // a marker further down implies c
        if (!nameable(c)) return true;
        if (!key_to_names(k.substr(kDirPrefix.size()))) return false;
        dirs.try_emplace(std::string(c));
        return true;
      }));
  prefix = prefixed(kMetaPrefix);
  PM_TRY(walk_entries(
      store_.get(), prefix, prefix,
      [&](std::string_view c, std::string_view v) {
        records.emplace_back(c, decode_meta(v).value_or(default_file_));
      },
      skip));
  prefix = prefixed(kXattrPrefix);
  PM_TRY(walk_entries(
      store_.get(), prefix, prefix,
      [&](std::string_view c, std::string_view) { xattrs.emplace_back(c); }, skip));

  struct File {
    std::string component;
    uint64_t size;
    std::optional<Manifest> manifest;  // of a chunked file, when it decodes
  };
  std::vector<File> files;
  // The root's data keys are those not reserved (no leading NUL).
  PM_TRY(walk_entries(
      store_.get(), base, root ? std::string_view("\x01", 1) : std::string_view(base),
      [&](std::string_view c, std::string_view v) {
        File f{std::string(c), v.size(), std::nullopt};
        const Meta* r = find_record(records, c);
        if (r != nullptr && r->chunked) f.manifest = decode_manifest(v);
        files.push_back(std::move(f));
      },
      [&](std::string_view c, std::string_view k) {  // a nameable key further down proves c
        if (!nameable(c)) return true;
        if (!key_to_names(k.substr(0, k.rfind('/')))) return false;
        dirs.try_emplace(std::string(c));
        return true;
      }));

  d->dir->by_name.reserve(dirs.size() + files.size());
  table_.reserve(table_.nodes() + dirs.size() + files.size());
  for (auto& [c, marker] : dirs) {
    Node* n = table_.add(d, encode_name(c), child_key(d->key, c), /*dir=*/true,
                         marker.value_or(default_dir_));
    n->has_record = marker.has_value();
    n->has_xattrs = contains_sorted(xattrs, c);
    n->dir->loaded = false;
  }
  uint64_t hidden = 0;
  for (File& f : files) {
    if (!nameable(f.component)) continue;
    std::string key = child_key(d->key, f.component);
    const Meta* r = find_record(records, f.component);
    Meta m = r != nullptr ? *r : default_file_;
    // With no inode key in the store, a name with the link flag holds a
    // gone inode's id: it shows that value, as an index read at mount
    // shows it. A manifest that does not decode shows as its raw value.
    m.link = false;
    if (!valid_file_type(m.mode)) m.mode = S_IFREG | (m.mode & 07777);
    if (m.chunked && !f.manifest) {
      fuse_log(FUSE_LOG_ERR, "pmfs: %s: damaged chunk manifest (%llu bytes): shown as content\n",
               key.c_str(), static_cast<unsigned long long>(f.size));
      m.chunked = false;
    }
    Node* n = table_.add(d, encode_name(f.component), std::move(key), /*dir=*/false, m);
    if (n == nullptr) {  // a directory of the same path
      hidden++;
      continue;
    }
    n->has_record = r != nullptr;
    n->has_xattrs = contains_sorted(xattrs, f.component);
    n->size = n->committed_size = m.chunked ? f.manifest->size : f.size;
    if (m.chunked) {
      n->hole_bytes = hole_bytes(f.manifest->chunk_bytes, f.manifest->size, f.manifest->ids);
    }
  }
  d->dir->loaded = true;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  if (hidden != 0 || ms >= 100) {  // what a user waiting for a listing may ask about
    fuse_log(FUSE_LOG_INFO,
             "pmfs: %s: indexed %zu entries in %lld ms (%llu files hidden by directories of "
             "the same path)\n",
             root ? "/" : d->key.c_str(), d->dir->by_name.size(), static_cast<long long>(ms),
             static_cast<unsigned long long>(hidden));
  }
  return pm::Status();
}

}  // namespace pmfs
