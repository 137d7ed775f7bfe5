// pmsqlite::SharedDb: one database file open in this process, shared by
// every connection that opens it (the container admits one opener per
// process, SQLite may open a file many times). Owns (or borrows) the
// container, the page image, SQLite's lock levels between those
// connections, and the rule that makes transactions atomic:
//
//   The container is committed when SQLite syncs the database file; then
//   the file holds a whole transaction (SQLite writes a transaction's
//   pages and then syncs): so a crash recovers the last commit, never part
//   of one. What a writer that never synced leaves when it gives up its
//   lock (a failed transaction's pages) is dropped. What a writer writes
//   after its sync (SQLite's trim of the file) rides with the next commit
//   or the last close (vfs.cc: db_unlock, db_close); a failed commit is
//   aborted (commit_if_dirty).
//
// Thread safety: lock levels and the registry under mutexes; the image is
// written only by the connection that holds EXCLUSIVE.
#ifndef PMSQLITE_SHARED_DB_H_
#define PMSQLITE_SHARED_DB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "db_image.h"
#include "mem_file.h"
#include "pm/container.h"
#include "pmsqlite/vfs.h"

namespace pmsqlite {

// The container layout of databases this VFS creates.
inline constexpr char kLayout[] = "pmsqlite/1";

// SQLite's lock levels (SQLITE_LOCK_*).
enum Lock : int { kNone = 0, kShared = 1, kReserved = 2, kPending = 3, kExclusive = 4 };

struct OpenParams {
  bool create = false;     // SQLITE_OPEN_CREATE
  bool read_only = false;  // SQLITE_OPEN_READONLY
  uint64_t max_size = 64ull << 30;
  uint64_t initial_size = 8ull << 20;
  // max_size as a container takes it: rounded up to whole GiB, at least 1.
  uint64_t container_max_size() const {
    constexpr uint64_t kGib = 1ull << 30;
    return max_size <= kGib ? kGib : (max_size + kGib - 1) / kGib * kGib;
  }
};

class SharedDb final : public OldPages {
 public:
  // The database at `path`: the one already open in this process (or bound),
  // else its container opened (created when allowed and missing or empty).
  static pm::Result<std::shared_ptr<SharedDb>> open(const std::string& path, const OpenParams& p);
  // True when `path` is open (or bound) in this process.
  static bool is_open(std::string_view path);
  // The database open at `path` in this process, when it owns its
  // container (a bound one may be committed by its owner at any time, so
  // its journal cannot refer to committed pages); else nullptr.
  static std::shared_ptr<SharedDb> find_owned(std::string_view path);

  static pm::Status bind(const std::string& path, pm::Container* c, Committer committer);
  static pm::Status unbind(const std::string& path);

  // Drops a connection's reference; the last one closes the container,
  // under the registry's lock, so that an open of the same file meanwhile
  // waits for the close instead of finding the file still locked.
  static void release(std::shared_ptr<SharedDb>* db);
  ~SharedDb() override;

  DbImage& image() { return image_; }
  const std::string& path() const { return path_; }
  const std::string& journal_name() const { return journal_name_; }  // path() + "-journal"
  bool read_only() const { return read_only_; }
  // True when the path no longer names the file opened (renamed, removed,
  // or replaced since): SQLite then refuses writes, SQLITE_READONLY_DBMOVED
  // (SQLITE_FCNTL_HAS_MOVED), as with its own VFS.
  bool moved() const;

  // Records that the image changed since the last commit.
  void mark_dirty() { dirty_.store(true, std::memory_order_relaxed); }
  // Commits when something changed: SQLite's sync, through the committer
  // (vfs.h: how a transaction is made durable); a trim after a commit,
  // which changes nothing SQLite reads, with `transaction` false: straight
  // to the container (a committer that models transactions, the crash
  // harness's, would take it for the next one).
  pm::Status commit_if_dirty(bool transaction = true);
  // Drops what changed since the last commit (the image is then the
  // committed one).
  void drop_uncommitted();
  // Records that the change since the last commit is a trim SQLite made
  // after syncing (VACUUM shrinks the file so). It rides with the next
  // commit; the VFS commits it before the next write transaction begins,
  // since the heap reuses the blocks it frees only once committed.
  void mark_trim_after_commit() { trim_after_commit_.store(true, std::memory_order_relaxed); }
  bool trim_after_commit() const { return trim_after_commit_.load(std::memory_order_relaxed); }

  // SQLite's xLock / xUnlock / xCheckReservedLock; `mine` is the
  // connection's level. Return SQLite codes.
  int lock(int* mine, int level);
  int unlock(int* mine, int level);
  bool reserved() const;
  // True when another database open in this process holds RESERVED or
  // more: it may be in this one's transaction (ATTACH).
  bool another_writer() const;

  // OldPages, for the database's journal (mem_file.h): the state is the
  // number of commits this SharedDb made.
  uint64_t committed_state() const override;
  pm::Status read_committed(void* buf, size_t n, uint64_t off, uint64_t state) const override;

  // Pointers handed out by xFetch and not yet returned.
  std::atomic<int64_t> fetched{0};

 private:
  SharedDb(std::string path, std::unique_ptr<pm::Container> owned, pm::Container* c,
           DbImage image, Committer committer, bool read_only)
      : path_(std::move(path)), journal_name_(path_ + "-journal"), owned_(std::move(owned)),
        c_(c), image_(image),
        committer_(std::move(committer)), read_only_(read_only) {}

  const std::string path_;
  const std::string journal_name_;
  std::unique_ptr<pm::Container> owned_;  // null when bound
  pm::Container* c_;
  DbImage image_;
  Committer committer_;
  bool read_only_;
  std::atomic<bool> dirty_{false};
  std::atomic<bool> trim_after_commit_{false};  // cleared with dirty_
  uint64_t dev_ = 0, ino_ = 0;  // the file's, at open (0: unknown)
  int fd_ = -1;                  // the file's (O_PATH), for moved()
  mutable std::atomic<int64_t> settled_ctime_{-1};  // moved(): a ctime the path was checked at
  mutable std::mutex commit_mu_;  // a commit, or a read of what it left
  uint64_t commits_ = 0;          // under commit_mu_

  mutable std::mutex lock_mu_;
  int level_ = kNone;  // highest level held by any connection
  int shared_ = 0;     // connections holding SHARED or more
};

}  // namespace pmsqlite

#endif  // PMSQLITE_SHARED_DB_H_
