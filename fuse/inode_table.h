// InodeTable: the DRAM directory index of a mount. Filled from the store
// (each directory at its first use, or every key at mount) and kept up to
// date by every operation; never stored (docs/fuse.md, "The index").
//
// Inode numbers: a node whose record holds a stable number (Meta::ino,
// given at creation) has it, unless another node of the index has it
// already (a copied record); the others are numbered at mount from
// kStableInoEnd up. None is reused while mounted (so one generation per
// mount is enough: Fs's). An entry's readdir cookie is derived
// from its inode number (cookie_of), not from where or when it was linked:
// readdir resumes after the cookie of the last entry it returned, so
// removals never shift the entries that follow, and an entry renamed during
// a listing (within the directory, or out and back) keeps its cookie and is
// returned at most once per pass. A file's second and later names (hard
// links) take the cookie of an inode number drawn for them and never used
// as an inode, so every entry of a directory has a cookie of its own.
//
// Thread safety: none; the owner (Fs) guards the table with its mutex.
// Node pointers stay valid until erase_if_unused() erases the node.
#ifndef PMFS_INODE_TABLE_H_
#define PMFS_INODE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fuse/file_content.h"
#include "fuse/key_names.h"

namespace pmfs {

using Ino = uint64_t;
inline constexpr Ino kRootIno = 1;
// Cookies 1 and 2 are "." and ".."; entries start at 3.
inline constexpr uint64_t kFirstCookie = 3;
inline constexpr uint64_t cookie_of(Ino ino) { return ino + 1; }
static_assert(cookie_of(kRootIno + 1) == kFirstCookie);

struct DirEntries {
  using ByName = std::unordered_map<std::string, std::pair<uint64_t, Ino>>;  // name -> cookie, ino
  ByName by_name;
  // The same entries in cookie order, pointing into by_name (whose elements
  // stay where they are while they exist).
  std::map<uint64_t, const ByName::value_type*> by_cookie;
  uint32_t subdirs = 0;
  // False until the entries were read from the store (Fs::load_dir): a
  // directory found while its parent was loaded is empty here until then.
  // Directories made by mkdir, and those of an index built whole at mount,
  // are loaded from the start.
  bool loaded = true;
};

// The content of a file while it is open, shared by all its descriptors:
// writes through one are seen by reads and stat through every other, as on
// a local file system. Loaded from the store at the first read or write and
// put back at a flush (close, fsync) through any of them; dropped when the
// last descriptor is released.
struct FileData {
  FileData(kv::Store* store, const Layout* layout, ChunkIds* chunk_ids)
      : content(store, layout, chunk_ids) {}
  std::mutex mu;  // lock order: FileData::mu, then the table's owner's lock
  FileContent content;
  // Guarded by mu. Failed puts of the staged content, which drop what every
  // descriptor wrote, and the last one's errno: each writer is told once,
  // at its next flush or fsync (as Linux's errseq_t does for write-back).
  uint64_t put_errors = 0;
  int last_put_error = 0;
  // Guarded by mu. Bumped by every put of the staged content (stored or
  // dropped): what was staged before belongs to no descriptor any more.
  // Handle::changed_in and mapped_in name the generation of their last
  // change; a close stores only a descriptor's own changes (Fs::store_staged).
  uint64_t generation = 0;
  uint64_t mapped_in = UINT64_MAX;  // the kernel's write-back of mapped pages
};

struct Node {
  Ino ino = 0;
  // 0: detached (unlinked or replaced). A file with several names: the
  // directory of one of them (parent and name mean nothing else then).
  Ino parent = 0;
  std::string name;  // file name in the parent (escaped)
  // Files: the data key (a linked file's inode key, key_names.h);
  // directories: the key prefix without '/'.
  std::string key;
  uint32_t nlink = 1;     // files: names in directories (0 once detached)
  bool linked = false;    // files: key is an inode key, and each name holds its id
  bool has_record = false;  // files: "\0m"+key exists; dirs: the marker exists
  Meta meta;
  uint64_t size = 0;                 // files: as last written or truncated (may be staged)
  uint64_t committed_size = 0;       // files: size of the stored value
  uint64_t hole_bytes = 0;           // files: bytes in holes, staged or stored
  std::atomic<uint64_t> nlookup{0};  // kernel references (lookup, create, readdirplus)
  uint32_t open_count = 0;
  std::shared_ptr<FileData> data;   // files: set while open_count > 0
  // A file unlinked or replaced while open: its data key's value then, and
  // a chunked file's chunks, which its descriptors read on; the chunks are
  // removed at the last release.
  std::string unlinked_value;
  std::string unlinked_xattrs;  // and its extended attribute record (encoded)
  std::vector<uint64_t> retired_chunks;
  bool has_xattrs = false;          // "\0x"+key exists
  std::unique_ptr<DirEntries> dir;  // set for directories

  bool is_dir() const { return dir != nullptr; }
};

class InodeTable {
 public:
  // Starts with the root directory (key "") with metadata `root`.
  explicit InodeTable(const Meta& root);

  Node* get(Ino ino) const;
  // nullptr when `parent` has no entry `name`.
  Node* child(const Node& parent, std::string_view name) const;
  // Adds a file (dir == false) or directory, numbered m.ino when it can
  // be (else its meta.ino is cleared); nullptr (and nothing added) when
  // `parent` already has an entry `name`.
  Node* add(Node* parent, std::string name, std::string key, bool dir, const Meta& m);
  // Gives the file n one more name. REQUIRES: n a linked file with a
  // name; no entry `name` in parent.
  void link(Node* n, Node* parent, std::string name);
  // Removes parent's entry `name`; the node is detached once no name is
  // left (it keeps its inode while referenced). Returns the node.
  // REQUIRES: the entry exists.
  Node* unlink(Node* parent, std::string_view name);
  // Moves parent's entry `name` to `new_parent` as `new_name`, keeping its
  // cookie. Unless the node is a linked file (whose key names no path), its
  // key becomes `new_key` and the keys of everything below it follow.
  // REQUIRES: the entry exists; no entry `new_name` in new_parent.
  void move(Node* parent, std::string_view name, Node* new_parent, std::string new_name,
            std::string new_key);
  // Erases a detached node nobody references (nlookup 0, not open).
  void erase_if_unused(Node* n);

  // Directory at `key` ("" root), creating missing ones with `m` (implied
  // directories), or with `last` the directory at `key` itself when given.
  // nullptr when a file is in the way.
  Node* ensure_dir(std::string_view key, const Meta& m, const Meta* last = nullptr);

  uint64_t nodes() const { return nodes_.size(); }
  // Whether stable number `ino` can be a node's: no node of this mount has
  // had it (an id is never reused within a mount: file handles name it).
  bool stable_ino_free(Ino ino) const { return !nodes_.contains(ino) && !retired_.contains(ino); }
  // Room for `n` nodes in all (an index about to be filled).
  void reserve(uint64_t n) { nodes_.reserve(n); }

 private:
  // False (nothing inserted) when d has an entry `name`.
  bool insert_entry(DirEntries* d, std::string name, uint64_t cookie, Ino ino);

  std::unordered_map<Ino, std::unique_ptr<Node>> nodes_;
  std::unordered_set<Ino> retired_;  // stable numbers of erased nodes
  Ino next_ino_ = kStableInoEnd;
};

}  // namespace pmfs

#endif  // PMFS_INODE_TABLE_H_
