// Fs: the state of one mount (the store, the index, the options) and the
// work behind every FUSE request. Each do_* returns 0 or an errno and never
// replies; handlers.cc turns the result into exactly one reply.
//
// Thread safety: every method may be called from any worker thread.
// Lock order: FileData::mu, then mu_. mu_ guards the index (and every Node
// field except nlookup, which is atomic so that lookups share the lock).
// Changes hold mu_ exclusively across their store transaction, so the
// index and the store change in the same order; reads of values (get) run
// without mu_.
#ifndef PMFS_FS_H_
#define PMFS_FS_H_

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fuse/inode_table.h"
#include "kv/store.h"
#include "pmfs/mount.h"

namespace pmfs {

// Entries and attributes may be cached by the kernel this long (a day, as
// passthrough_ll's cache=always). Nothing but this daemon changes the store
// while it is mounted (the store is locked by its process), every change it
// makes answers a kernel request, and the kernel applies those itself (new
// and removed names, sizes after writes and O_TRUNC). The one change the
// kernel does not see, a failed flush that puts the old size back, is
// invalidated explicitly (Fs::invalidate).
inline constexpr double kCacheSeconds = 86400.0;
// Names a file may have, as on ext4.
inline constexpr uint32_t kLinkMax = 65000;

// One open file description: its flags and the file's shared open content
// (FileData, inode_table.h).
struct Handle {
  Ino ino = 0;
  int flags = 0;
  std::shared_ptr<FileData> data;
  uint64_t put_errors_seen = 0;  // FileData::put_errors when last told
  // FileData::generation when it last changed the content (a write, a
  // fallocate, an ftruncate, its O_TRUNC open); UINT64_MAX: never. Guarded
  // by the FileData's mu.
  uint64_t changed_in = UINT64_MAX;
  // A descriptor of it was closed (FUSE_FLUSH came): its release may still
  // be on its way when the session ends (~Fs).
  std::atomic<bool> closed{false};
};

struct Caller {
  uid_t uid;
  gid_t gid;
};

class Fs {
 public:
  Fs(std::unique_ptr<kv::Store> store, const MountOptions& o);
  // Removes the chunks still waiting for a durable commit (after a sync);
  // then, if none is left, says the mount ended cleanly: puts kCleanKey,
  // unless the mark there still holds (this mount changed nothing).
  ~Fs();
  Fs(const Fs&) = delete;
  Fs& operator=(const Fs&) = delete;

  // Prepares the index: the root alone, whose entries, like every
  // directory's, are read at its first use (load_dir); or every key, from
  // one scan of the store (index_all), when MountOptions::index_at_mount
  // asks for it or the store needs it (docs/fuse.md, "The index, one
  // directory at a time"). Logs a summary.
  pm::Status build_index();

  int do_lookup(Ino parent, const char* name, fuse_entry_param* e);
  void do_forget(Ino ino, uint64_t nlookup);
  int do_getattr(Ino ino, struct stat* st);
  int do_setattr(Ino ino, const struct stat& attr, int to_set, Handle* h, const Caller& c,
                 struct stat* out);
  // A node of mode's type: `value` is a symlink's target (else empty), rdev
  // a device node's number (else 0).
  int do_make(Ino parent, const char* name, mode_t mode, dev_t rdev, std::string_view value,
              const Caller& c, fuse_entry_param* e);
  int do_readlink(Ino ino, std::string* target);
  int do_remove(Ino parent, const char* name, bool dir);
  // A new name for file ino (a hard link). EPERM for directories.
  int do_link(Ino ino, Ino newparent, const char* newname, fuse_entry_param* e);
  int do_rename(Ino parent, const char* name, Ino newparent, const char* newname, unsigned flags);
  // do_open and do_write set *mode_changed when they cleared SUID/SGID (a
  // truncation or write by another user): the kernel's cached attributes
  // are stale then, and the caller invalidates them once it has replied.
  int do_open(Ino ino, int flags, const Caller& c, Handle** out, bool* mode_changed);
  int do_read(Handle* h, size_t size, off_t off, std::string* out);
  // lseek(2)'s SEEK_DATA and SEEK_HOLE (the kernel serves the others).
  int do_lseek(Handle* h, off_t off, int whence, off_t* out);
  // `page_cache`: the kernel writes mapped pages back (FUSE_WRITE_CACHE),
  // through a writable descriptor of its choice.
  int do_write(Handle* h, const char* data, size_t size, off_t off, const Caller& c,
               bool* mode_changed, bool page_cache = false);
  // fallocate(2): mode 0 and FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
  // FALLOC_FL_ZERO_RANGE; other modes are EOPNOTSUPP. Staged like a write.
  int do_fallocate(Handle* h, int mode, off_t off, off_t len, const Caller& c,
                   bool* mode_changed);
  // close(2) of a descriptor of h (FUSE_FLUSH): stores what was staged,
  // when h changed it since its last store (Fs::store_staged).
  int do_flush(Handle* h);
  int do_fsync(Handle* h);
  int do_sync();
  // The last descriptor is gone: stores what it changed after its flush
  // (store), or drops it (a session that ended with the file still open).
  void do_release(Handle* h, bool store = true);
  int do_readdir(fuse_req_t req, Ino ino, size_t size, off_t off, bool plus, std::string* out);
  int do_statfs(struct statvfs* out);
  // Extended attributes (user.*, security.*, trusted.*; system.* is
  // ENOTSUP: no ACLs). flags: XATTR_CREATE, XATTR_REPLACE.
  int do_setxattr(Ino ino, const char* name, std::string_view value, int flags);
  int do_getxattr(Ino ino, const char* name, std::string* value);
  int do_listxattr(Ino ino, std::string* names);  // NUL-terminated names
  int do_removexattr(Ino ino, const char* name);

  // Inodes the index holds: what the mount has read of the store so far.
  uint64_t indexed_inodes() const {
    std::shared_lock lock(mu_);
    return table_.nodes();
  }

  bool debug() const { return o_.debug; }
  // A request ran out of memory part way (fuse/handlers.cc): the index may
  // no longer match the store, so every later request fails with EIO and
  // the unmount writes nothing (no release flushes, no clean-end mark);
  // remount to go on (the store holds every change that replied success).
  void fail(const char* why);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The session that kernel cache invalidations go to (none before mount).
  void set_session(fuse_session* se) { se_ = se; }

 private:
  class Batch;

  // Stores h's file as staged (flush, fsync, release); the errno of a put
  // that dropped h's writes since it was last told, else 0. Unless `any`
  // (fsync: every descriptor's writes), only when h changed the content
  // since the last put, or mapped pages came back: another descriptor's
  // close must not store a rewrite that an O_TRUNC open started and has
  // not finished (a late release of a descriptor closed before that open
  // made a crash leave the file empty: a user trial).
  int store_staged(Handle* h, bool any = false);

  // What a request that reads the index returns when it meets a directory
  // not loaded yet while it holds mu_ shared (no errno is negative).
  static constexpr int kNeedsLoad = -1;
  // Runs f(exclusive) with mu_ shared; if it returns kNeedsLoad, again
  // with mu_ exclusive, where f loads what it needs. A directory is loaded
  // once per mount, so nearly every request takes only the shared lock.
  template <class F>
  int with_index(F&& f) {
    {
      std::shared_lock lock(mu_);
      const int r = f(false);
      if (r != kNeedsLoad) return r;
    }
    std::unique_lock lock(mu_);
    return f(true);
  }
  // 0 when n is not a directory or is loaded; else loads it (exclusive,
  // returning 0 or an errno) or returns kNeedsLoad. nullptr: 0.
  int ready(Node* n, bool exclusive);
  // Loads every directory below d too. REQUIRES: mu_ exclusive.
  int ready_tree(Node* d);
  // Reads directory d's entries from the store into the index, in one
  // ordered pass per reserved prefix that skips each subdirectory's keys
  // (fs_load.cc). REQUIRES: mu_ exclusive; d not loaded.
  pm::Status load_dir(Node* d);
  // Makes new inode and chunk ids go above every id a chunk, a manifest or
  // a name with the link flag holds, in directories read or not (one scan
  // of the records and chunk keys, the first time; nothing after an index
  // read at mount).
  pm::Status learn_ids();
  // Reads kInoKey: where the stable inode numbers of new files start.
  pm::Status read_ino_counter();
  // A stable inode number for a new file or directory, in *ino (0: none).
  // REQUIRES: mu_ exclusive.
  int take_ino(uint64_t* ino);
  // Whether the store holds the clean-end mark (kCleanKey) and no update
  // followed it: no chunk is then left that no manifest names.
  pm::Result<bool> ended_cleanly();
  // Whether directories can be loaded at their first use (build_index).
  pm::Result<bool> can_load_lazily();
  pm::Status index_root();
  pm::Status index_all();
  void fill_stat(const Node& n, struct stat* st) const;
  void fill_entry(Node* n, fuse_entry_param* e) const;
  int check_new_name(Node* parent, const char* name, std::string* component);
  Meta touched(const Node& dir) const;
  struct ChunkedSize {
    uint64_t size, holes;
  };
  pm::Status index_manifests(const std::unordered_map<std::string, Meta>& records,
                             std::unordered_set<uint64_t>* named,
                             std::unordered_map<std::string, ChunkedSize>* sizes);
  pm::Status sweep_inodes(const std::unordered_map<uint64_t, uint64_t>& inodes,
                          const std::unordered_set<uint64_t>& linked,
                          std::unordered_map<std::string, Meta>* records);
  pm::Status sweep_chunks(const std::vector<uint64_t>& chunks,
                          const std::unordered_set<uint64_t>& named);
  int load(FileData* d, const Node& n);
  // load() of h's file under a shared index lock. REQUIRES: h->data->mu.
  int load_shared(Handle* h);
  std::shared_ptr<FileData> new_file_data() {
    return std::make_shared<FileData>(store_.get(), &layout_, &chunk_ids_);
  }
  // Puts d's content at n's key with metadata m (and what b holds already)
  // in one transaction. On failure d is dropped: it reads the store again.
  // REQUIRES: d->mu and mu_ held exclusively.
  int put_content(FileData* d, Node* n, Meta m, Batch* b);
  // What a file's removal (unlink, or a rename over it) takes from the
  // store that someone still needs: the value, while it is open (its
  // descriptors read on, as POSIX says), and a chunked file's chunks.
  struct Removed {
    std::string value;
    std::vector<uint64_t> chunks;
    std::string xattrs;  // an open file's extended attribute record
  };
  int removed_content(const Node& n, Removed* r);
  // After the removal committed: an open n keeps r until its last release;
  // otherwise returns r's chunks, for discard_chunks once the caller has
  // let go of mu_.
  std::vector<uint64_t> retire(Node* n, Removed r);
  // Chunks no manifest names any more, after a commit: removed once that
  // commit is durable (at once under kSync, else after the next sync).
  void discard_chunks(std::vector<uint64_t> ids);
  // Chunks that no committed manifest ever named: removed now.
  void remove_chunks(const std::vector<uint64_t>& ids);
  // Syncs the store, then removes the chunks discarded before the sync.
  pm::Status sync_and_collect();
  // A put refused for room: removed files' chunks may hold it, waiting for
  // a sync. Removes them and has the store apply that; true when there
  // were any (one more try is worth it). Without this the first write
  // after an rm on a full store failed (a user trial: 9 of 9 times).
  bool make_room();
  // b.commit(), tried once more after make_room() when refused for room.
  pm::Status commit_with_room(Batch& b);
  int commit(Batch& b, int size_errno);
  int move_below(const std::string& from, const std::string& to, Batch* first);
  int check_moves(const std::string& from, const std::string& to);
  pm::Result<bool> add_moves(const std::string& from, const std::string& to, Batch* b);
  pm::Status finish_moves(const std::string& from, const std::string& to);
  pm::Status finish_rename();
  uint64_t rename_step_bytes();
  void remove_name(const Node& n, const std::string& name_key, bool last, const Meta& m, Batch* b);
  // Adds to b the move of file n's name old_key to new_key, with record m:
  // a hard-linked name moves alone (its content stays at the inode key); any
  // other file takes its value (read into *value) and extended attributes.
  int move_file(const Node& n, const std::string& old_key, const std::string& new_key,
                const Meta& m, Batch* b, std::string* value);
  // Adds to b the move of n's extended attributes to new_key (if any).
  int move_xattrs(const Node& n, const std::string& new_key, Batch* b);
  // n's extended attributes. REQUIRES: mu_.
  int read_xattrs(const Node& n, Xattrs* out);
  int change_xattrs(Ino ino, const std::function<int(Xattrs*)>& change);

 public:
  // Tells the kernel to drop its cached attributes of ino (attributes only:
  // safe from a request's handler, which holds no page lock).
  void invalidate_attr(Ino ino);
  // ... and its cached pages too (after a failed flush: the file shows the
  // store again). REQUIRES: no lock held (writing back a dirty mapped page
  // is a FUSE_WRITE, served by another thread).
  void invalidate_content(Ino ino);

 private:
  void invalidate(Ino ino, off_t off);  // off -1: attributes only; 0: all
  // The store's room as statfs reports it (a few seconds old at most): its
  // file plus the free space of its file system. Takes no lock but its own.
  struct Space {
    uint64_t total = 0, free = 0;
  };
  Space space();

  std::unique_ptr<kv::Store> store_;
  const MountOptions o_;
  uint64_t rename_step_ = 0;      // rename_step_bytes(), once known (under mu_)
  uint64_t store_key_limit_ = 0;  // with it: the store's longest key
  fuse_session* se_ = nullptr;
  const Meta default_file_, default_dir_;
  // Node ids are a mount's own (the stable ones of the nodes it has read,
  // numbers of its own for the rest): the generation, from the mount's
  // clock, makes file handles of an earlier mount stale (ESTALE) instead of
  // naming whatever has their number now. (The kernel keeps 32 bits of it.)
  const uint32_t generation_;
  Layout layout_;                            // set once, in the constructor
  bool commits_durable_ = false;             // kv::Durability::kSync in force
  bool ordered_ = false;                     // the store keeps an ordered index
  ChunkIds chunk_ids_;                       // above every chunk id in the store
  uint64_t next_inode_id_ = 1;               // above every inode id; GUARDED_BY(mu_)
  // A mount that reads directories at first use learns the ids names and
  // manifests hold when it first hands one out (learn_ids). Lock order:
  // ids_mu_ last.
  std::atomic<bool> ids_known_{true};
  std::mutex ids_mu_;
  std::atomic<uint64_t> inode_floor_{1};     // set by learn_ids
  // Stable inode numbers: the next one to give, and the end of the block
  // kInoKey reserves; 0 and 0 when kInoKey is damaged (new files are then
  // numbered by each mount). GUARDED_BY(mu_)
  uint64_t next_stable_ino_ = 0, stable_ino_end_ = 0;
  bool indexed_ = false;                     // build_index succeeded
  std::atomic<bool> failed_{false};          // fail()
  std::mutex garbage_mu_;
  std::vector<uint64_t> garbage_;            // GUARDED_BY(garbage_mu_)

  mutable std::shared_mutex mu_;
  InodeTable table_;  // GUARDED_BY(mu_)

  std::mutex handles_mu_;
  std::unordered_set<Handle*> handles_;  // GUARDED_BY(handles_mu_): open, not yet released

  std::mutex statfs_mu_;
  std::chrono::steady_clock::time_point statfs_at_;  // GUARDED_BY(statfs_mu_)
  kv::StoreStats statfs_stats_;                      // GUARDED_BY(statfs_mu_)
};

}  // namespace pmfs

#endif  // PMFS_FS_H_
