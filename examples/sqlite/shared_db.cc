#include "shared_db.h"

#include <fcntl.h>
#include <pthread.h>
#include "sqlite_api.h"
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace pmsqlite {

using pm::Result;
using pm::Status;

namespace {

// DRAM a database's working view may keep in private copies of committed
// pages before a commit releases them (commit_if_dirty). A release drops
// them all, and the pages written or read next fault in again: at 64 MiB,
// one-row updates of a 228 MiB database ran at 12 k/s instead of 156 k/s.
// So the bound is for databases larger than memory should hold privately,
// not a cache size.
constexpr uint64_t kPrivateBudget = 1ull << 30;

// Databases open or bound in this process, by the path SQLite opens.
struct Entry {
  std::weak_ptr<SharedDb> open;
  pid_t pid = 0;  // of the process that opened it: a child after fork() has not
  pm::Container* bound = nullptr;
  Committer committer;
};
std::mutex g_registry_mu;
// (Looked up by string_view: SQLite asks about "<db>-journal" names several
// times a transaction, and a std::string key cost an allocation each time.)
std::map<std::string, Entry, std::less<>>& registry() {
  // Never destroyed: it outlives static teardown.
  static auto* r = new std::map<std::string, Entry, std::less<>>;
  return *r;
}

// getpid() is a system call (0.15 us here), and SQLite's hot-journal checks
// asked for it three times per transaction. The pid changes only at fork(),
// whose child handler forgets it (0: ask again).
std::atomic<pid_t> g_pid{0};
pid_t this_pid() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid != 0) return pid;
  static const int once = pthread_atfork(nullptr, nullptr, [] { g_pid.store(0); });
  (void)once;
  pid = ::getpid();
  g_pid.store(pid, std::memory_order_relaxed);
  return pid;
}

int64_t ctime_ns(const struct stat& st) {
  return int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
}


// A file that is not a container at all (an ordinary SQLite database, say)
// gets its own answer, not the container's "bad magic".
Status check_is_container(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::from_errno("open " + path, errno);
  // The superblock's magic, or that of its copy at byte 3584 (a damaged
  // superblock, which the container's open reads from the copy):
  // docs/container_format.md.
  auto magic_at = [fd](off_t off) {
    char magic[8] = {};
    return ::pread(fd, magic, sizeof magic, off) == static_cast<ssize_t>(sizeof magic) &&
           std::memcmp(magic, "PMCONTNR", 8) == 0;
  };
  const bool container = magic_at(0) || magic_at(4096 - 512);
  ::close(fd);
  if (container) return Status();
  return Status::not_supported(path +
                               " is not a libpm container (an ordinary SQLite file? open it "
                               "without vfs=pm, or copy it in with VACUUM INTO 'file:new.db?vfs=pm')");
}

Result<std::unique_ptr<pm::Container>> create_container(const std::string& path, const OpenParams& p) {
  pm::Options o;
  o.layout = kLayout;
  o.tracker = pm::TrackerKind::kHints;
  o.max_size = p.container_max_size();
  o.initial_size = p.initial_size;  // at most max_size (open_db checks)
  o.initialize = [](pm::Container& c) { return DbImage::attach(c).status(); };
  o.file_mode = 0644;  // as SQLite's own VFS (SQLITE_DEFAULT_FILE_PERMISSIONS), less the umask
  return pm::Container::create(path, o);
}

Result<std::unique_ptr<pm::Container>> open_container(const std::string& path, const OpenParams& p,
                                                      bool* read_only) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::from_errno("stat " + path, errno);
    if (!p.create || p.read_only) return Status::not_found(path + ": no such database");
    return create_container(path, p);
  }
  // A device or a FIFO reads as empty: taken for an empty database, it
  // was replaced by a container (file:/dev/null?vfs=pm, as root, would
  // have removed /dev/null). A directory is no database either.
  if (!S_ISREG(st.st_mode)) {
    return Status::io_error(path + (S_ISDIR(st.st_mode) ? " is a directory"
                                                        : " is not a regular file (a device, FIFO "
                                                          "or socket)") +
                            ": a database is a file");
  }
  // SQLite treats an empty file as an empty database, SQLITE_OPEN_CREATE
  // or not; so do we. The container is a new file in its place, which
  // keeps the permissions and, where this process may give it, the owner
  // (a hard link to the empty file stays empty).
  if (st.st_size == 0 && !p.read_only) {
    if (::unlink(path.c_str()) != 0) return Status::from_errno("unlink empty " + path, errno);
    Result<std::unique_ptr<pm::Container>> c = create_container(path, p);
    if (c.ok() && ::chmod(path.c_str(), st.st_mode & 07777) != 0) {
      return Status::from_errno("chmod " + path, errno);
    }
    if (c.ok()) (void)::chown(path.c_str(), st.st_uid, st.st_gid);  // (EPERM: not ours to give)
    return c;
  }
  PM_TRY(check_is_container(path));
  pm::Options o;
  o.layout = kLayout;
  o.tracker = pm::TrackerKind::kHints;
  o.read_only = p.read_only;
  // What an open repaired (a superblock rewritten from its copy) reaches
  // SQLite's error log, where a program listening to it hears it once.
  o.logger = [path](pm::LogLevel level, std::string_view msg) {
    if (level < pm::LogLevel::kWarn) return;
    sqlite3_log(SQLITE_WARNING, "pm vfs: %s: %.*s", path.c_str(), static_cast<int>(msg.size()),
                msg.data());
  };
  Result<std::unique_ptr<pm::Container>> c = pm::Container::open(path, o);
  if (!c.ok() && c.status().is_read_only() && !p.read_only) {
    o.read_only = true;  // as SQLite's own VFS: no write access opens read-only
    c = pm::Container::open(path, o);
  }
  *read_only = o.read_only;
  return c;
}

}  // namespace

Result<std::shared_ptr<SharedDb>> SharedDb::open(const std::string& path, const OpenParams& p) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  Entry& e = registry()[path];
  if (e.pid != this_pid()) e.open.reset();  // inherited through fork(): the lock is not ours
  if (std::shared_ptr<SharedDb> db = e.open.lock()) return db;
  std::unique_ptr<pm::Container> owned;
  pm::Container* c = e.bound;
  bool read_only = false;
  if (c == nullptr) {
    Result<std::unique_ptr<pm::Container>> r = open_container(path, p, &read_only);
    if (!r.ok()) {
      registry().erase(path);
      return r.status();
    }
    owned = std::move(*r);
    c = owned.get();
  }
  const bool fresh = c->root(kRootName) == nullptr;  // only a bound container lacks one
  Result<DbImage> image = DbImage::attach(*c);
  Status s = image.status();
  if (s.ok() && fresh) s = e.committer ? e.committer(*c) : c->commit();
  if (!s.ok()) {
    if (owned) registry().erase(path);
    return s;
  }
  std::shared_ptr<SharedDb> db(new SharedDb(path, std::move(owned), c, *image, e.committer, read_only));
  db->fd_ = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (struct stat st {}; db->fd_ >= 0 && ::fstat(db->fd_, &st) == 0) {
    db->dev_ = st.st_dev;
    db->ino_ = st.st_ino;
  }
  e.open = db;
  e.pid = this_pid();
  return db;
}

bool SharedDb::is_open(std::string_view path) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  auto it = registry().find(path);
  return it != registry().end() &&
         (it->second.bound != nullptr ||
          (it->second.pid == this_pid() && !it->second.open.expired()));
}

SharedDb::~SharedDb() {
  if (fd_ >= 0) ::close(fd_);
}

// SQLite asks before every write transaction. A stat of the path walks it
// (1.2 us here, an eighth of a one-row transaction); an fstat of the file
// opened costs 0.4. Whatever makes the path name another file, or none,
// changes the file's ctime (a rename of it, an unlink, another file renamed
// over it) or its link count. So the path is looked up only when the ctime
// differs from one seen settled at the last lookup: older than the file
// system's timestamp step (a later change then gets a later ctime; one
// within the same step could get the same). A ctime of whole seconds says
// the step may be seconds (ext4 with small inodes, FAT's two); else ten
// ticks of the coarsest kernel clock. A rename of a directory above the
// file is not seen; SQLite's own VFS would see it.
bool SharedDb::moved() const {
  if (ino_ == 0) return false;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_nlink == 0) return true;
  const int64_t ctime = ctime_ns(st);
  if (ctime == settled_ctime_.load(std::memory_order_relaxed)) return false;
  if (::stat(path_.c_str(), &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) return true;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t step = ctime % 1'000'000'000 == 0 ? 2'500'000'000 : 100'000'000;
  if (int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec - ctime > step) {
    settled_ctime_.store(ctime, std::memory_order_relaxed);
  }
  return false;
}

std::shared_ptr<SharedDb> SharedDb::find_owned(std::string_view path) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  auto it = registry().find(path);
  if (it == registry().end() || it->second.pid != this_pid()) return nullptr;
  std::shared_ptr<SharedDb> db = it->second.open.lock();
  return db && db->owned_ ? db : nullptr;
}

Status SharedDb::bind(const std::string& path, pm::Container* c, Committer committer) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  Entry& e = registry()[path];
  if (e.bound != nullptr || !e.open.expired()) return Status::busy(path + " is bound already");
  e.bound = c;
  e.committer = std::move(committer);
  return Status();
}

Status SharedDb::unbind(const std::string& path) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  auto it = registry().find(path);
  if (it == registry().end()) return Status::not_found(path + " is not bound");
  if (!it->second.open.expired()) return Status::busy(path + " is still open in SQLite");
  registry().erase(it);
  return Status();
}

void SharedDb::release(std::shared_ptr<SharedDb>* db) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  // References are taken only under this lock (open), so the count is exact.
  if (db->use_count() == 1 && (*db)->owned_) registry().erase((*db)->path_);
  db->reset();  // the last one closes the container here, still under the lock
}

// A commit that fails drops the transaction from the container at once:
// SQLite rolls back every transaction whose sync fails (with any code but
// BUSY, which a commit never returns), by writing the old pages back and
// syncing again; that must not need the file space that just ran out,
// which the failed transaction's growth of the heap would still hold.
void SharedDb::drop_uncommitted() {
  if (!dirty_.load(std::memory_order_relaxed)) return;
  (void)c_->abort();  // fails only on a broken container, which refuses everything
  dirty_.store(false, std::memory_order_relaxed);
  trim_after_commit_.store(false, std::memory_order_relaxed);
}

Status SharedDb::commit_if_dirty(bool transaction) {
  if (!dirty_.load(std::memory_order_relaxed)) return Status();
  Status s;
  {
    std::lock_guard<std::mutex> g(commit_mu_);
    s = committer_ && transaction ? committer_(*c_) : c_->commit();
    if (s.ok()) commits_++;
  }
  if (!s.ok()) (void)c_->abort();  // fails too when the commit got past its commit point
  dirty_.store(false, std::memory_order_relaxed);
  trim_after_commit_.store(false, std::memory_order_relaxed);
  // The working view keeps a private copy of every page a commit wrote:
  // past kPrivateBudget they are dropped (reads then come from the file's
  // shared pages), or a database would hold its whole size in anonymous
  // memory. A failed release only leaves the DRAM held.
  if (s.ok() && c_->private_bytes() > kPrivateBudget) (void)c_->release_clean();
  return s;
}

uint64_t SharedDb::committed_state() const {
  std::lock_guard<std::mutex> g(commit_mu_);
  return commits_;
}

// A commit that failed before its commit point left the committed pages
// as they were (SQLite's rollback then reads them); one that failed after
// it makes the container refuse this read.
Status SharedDb::read_committed(void* buf, size_t n, uint64_t off, uint64_t state) const {
  std::lock_guard<std::mutex> g(commit_mu_);
  if (state != commits_) {
    return Status::io_error(path_ + ": the journal refers to a page as it was before the "
                                    "database's last commit, which has replaced it");
  }
  return image_.read_committed(buf, n, off);
}

// The rules of SQLite's unix VFS between connections of one process: a
// connection may go above SHARED only while no other holds more than
// SHARED; PENDING keeps new readers out while a writer waits for the
// last ones to leave.
int SharedDb::lock(int* mine, int level) {
  std::lock_guard<std::mutex> g(lock_mu_);
  if (*mine >= level) return SQLITE_OK;
  if (*mine != level_ && (level_ >= kPending || level > kShared)) return SQLITE_BUSY;
  if (level == kShared) {
    shared_++;
    if (level_ < kShared) level_ = kShared;
  } else if (level == kReserved) {
    level_ = kReserved;
  } else if (shared_ > 1) {
    level_ = kPending;
    *mine = kPending;
    return SQLITE_BUSY;
  } else {
    level_ = kExclusive;
  }
  *mine = level;
  return SQLITE_OK;
}

int SharedDb::unlock(int* mine, int level) {
  std::lock_guard<std::mutex> g(lock_mu_);
  if (*mine <= level) return SQLITE_OK;
  if (*mine > kShared) level_ = kShared;
  if (level == kNone) {
    if (--shared_ == 0) level_ = kNone;
  }
  *mine = level;
  return SQLITE_OK;
}

bool SharedDb::reserved() const {
  std::lock_guard<std::mutex> g(lock_mu_);
  return level_ >= kReserved;
}

bool SharedDb::another_writer() const {
  std::lock_guard<std::mutex> g(g_registry_mu);  // then lock_mu_: lock() takes no registry lock
  for (const auto& [path, e] : registry()) {
    std::shared_ptr<SharedDb> db = e.open.lock();  // dropped under the lock, as release() does
    if (db && db.get() != this && db->reserved()) return true;
  }
  return false;
}

}  // namespace pmsqlite
