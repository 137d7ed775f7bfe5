// The VFS "pm": SQLite's file operations on SharedDb (the database file),
// MemFile (its journal) and SQLite's default VFS (temporary files).
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "mem_file.h"
#include "planted_bugs.h"
#include "shared_db.h"
#include "sqlite_api.h"

namespace pmsqlite {
namespace {

using pm::Status;

sqlite3_vfs* g_base = nullptr;  // the default VFS when "pm" was registered
thread_local std::string t_last_error;

// What SQLite hears for a failure; the whole message goes to SQLite's log
// (sqlite3_config(SQLITE_CONFIG_LOG)) and xGetLastError. `io_code` says
// what failed: SQLITE_CANTOPEN an open, else an I/O method.
int fail(const Status& s, int io_code) {
  const bool open = io_code == SQLITE_CANTOPEN;
  int rc = io_code;
  switch (s.code()) {
    case pm::Code::kNoSpace: rc = SQLITE_FULL; break;
    case pm::Code::kBusy: rc = SQLITE_BUSY; break;
    // An open that fails so is a create in a directory we may not write
    // (a file we may not write opens read-only): as SQLite's own VFS.
    case pm::Code::kReadOnly: rc = open ? SQLITE_CANTOPEN : SQLITE_READONLY; break;
    case pm::Code::kCorruption: rc = SQLITE_CORRUPT; break;
    // At an open: a file that is not ours. Later: misuse (a fork()ed child
    // writing through its parent's connection), an I/O error.
    case pm::Code::kNotSupported:
    case pm::Code::kInvalidArgument: rc = open ? SQLITE_NOTADB : io_code; break;
    case pm::Code::kNotFound: rc = SQLITE_CANTOPEN; break;
    default: break;
  }
  t_last_error = s.message();
  sqlite3_log(rc, "pm vfs: %s", s.message().c_str());
  return rc;
}

// SQLITE_CANTOPEN, saying why.
int cant_open(std::string why) {
  t_last_error = std::move(why);
  sqlite3_log(SQLITE_CANTOPEN, "pm vfs: %s", t_last_error.c_str());
  return SQLITE_CANTOPEN;
}

// SQLite calls the methods below from C: nothing may throw out of them.
// Out of DRAM (the table of a growing database, a journal's bytes, a
// name) is SQLite's own out-of-memory code; the operation did nothing.
template <auto F, typename Sig = decltype(F)>
struct NoThrow;
template <auto F, typename... A>
struct NoThrow<F, int (*)(A...)> {
  static int call(A... a) {
    try {
      return F(a...);
    } catch (const std::bad_alloc&) {
      t_last_error = "out of memory";
      return SQLITE_IOERR_NOMEM;
    } catch (const std::exception& e) {
      t_last_error = e.what();
      return SQLITE_IOERR;
    }
  }
};

// --- the database file ---------------------------------------------------

struct DbFile {
  sqlite3_file base;
  std::shared_ptr<SharedDb> db;
  int lock = kNone;
  bool unsynced_writes = false;  // xWrite since SQLite last synced
  bool synced = false;           // SQLite's last change was its sync (a commit)
  sqlite3_int64 mmap_size = 0;  // SQLite's mmap limit, for PRAGMA mmap_size
};
DbFile* db_of(sqlite3_file* f) { return reinterpret_cast<DbFile*>(f); }

int db_commit(DbFile* d, bool transaction = true) {
  Status s = d->db->commit_if_dirty(transaction);
  return s.ok() ? SQLITE_OK : fail(s, SQLITE_IOERR_FSYNC);
}

// A journal that refers to committed pages (mem_file.h) meets the commit
// that replaces them here.
int db_sync_commit(DbFile* d) {
  d->unsynced_writes = false;
  std::shared_ptr<MemFile> j = mem_files::open(d->db->journal_name(), false);
  const bool refers = j && j->has_references();
  // In a transaction over several databases SQLite may roll this one back
  // after its commit, when a later database's fails. Such a transaction
  // leaves a super-journal's name at the journal's end, or (a main
  // database in memory, or one other database that syncs) it does not:
  // then another database of this process holds a write lock.
  if (refers && (j->names_super_journal() || d->db->another_writer())) {
    if (Status s = j->keep_old_pages(); !s.ok()) return fail(s, SQLITE_IOERR_FSYNC);
  }
  const uint64_t before = d->db->committed_state();
  const int rc = db_commit(d);
  d->synced = rc == SQLITE_OK;
  // The pages the journal still refers to are gone: it can serve no
  // rollback now. Emptied, it is one SQLite finds nothing to play back in
  // (a failing database after this one in a transaction with a database of
  // another VFS, which the VFS cannot see, leaves this one committed); kept,
  // a journal mode that keeps journals (PERSIST, TRUNCATE, locking_mode=
  // EXCLUSIVE) would read the stale references later and fail.
  if (rc == SQLITE_OK && refers && d->db->committed_state() != before && j->has_references()) {
    j->truncate(0);
  }
  return rc;
}

int db_unlock(sqlite3_file* f, int level) {
  DbFile* d = db_of(f);
  int rc = SQLITE_OK;
  if (d->lock > kShared && level <= kShared) {
    // SQLite syncs every transaction it commits (SQLITE_FCNTL_SYNC comes
    // with synchronous=OFF too; SQLITE_FCNTL_SYNC_OMITTED before 3.8):
    // pages written since the last sync are a failed transaction's (a
    // cache spill before SQLITE_FULL, say; its journal, in DRAM, is
    // replayed only by the next statement), so they are dropped, never
    // committed. This also covers locking_mode=EXCLUSIVE, whose only
    // unlock is the close. After a sync SQLite changes the file only to
    // trim it (it truncates after committing); that rides with the next
    // commit, or the close: a crash before then leaves a longer file,
    // which SQLite reads as the same database.
    if (g_sqlite_planted_bugs.commit_trim_at_unlock) {
      rc = db_commit(d);
    } else if (d->unsynced_writes) {
      d->db->drop_uncommitted();
    }
    d->unsynced_writes = false;
    d->synced = false;
  }
  d->db->unlock(&d->lock, level);
  return rc;
}

int db_close(sqlite3_file* f) {
  DbFile* d = db_of(f);
  int rc = d->lock > kNone ? db_unlock(f, kNone) : SQLITE_OK;
  // What the last writer left (a trim after its commit) goes out now, and
  // its journal goes from DRAM (journal_mode=PERSIST or TRUNCATE never
  // deletes it; the file holds the last commit, so no journal is hot).
  if (d->db.use_count() == 1) {
    if (rc == SQLITE_OK) rc = db_commit(d);
    mem_files::remove(d->db->journal_name());
  }
  SharedDb::release(&d->db);
  d->~DbFile();
  return rc;
}

int db_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  const size_t inside = db_of(f)->db->image().read(buf, static_cast<size_t>(n), static_cast<uint64_t>(off));
  return inside == static_cast<size_t>(n) ? SQLITE_OK : SQLITE_IOERR_SHORT_READ;
}

// Bytes 18 and 19 of the database header: the file format versions, 2 for
// a database in WAL mode. The backup API copies page 1 of a WAL database
// as it is, and SQLite would then want a write-ahead log this VFS does not
// have: the database could not be opened again. Written as 1 (rollback
// journal), as SQLite itself writes them when it leaves WAL mode. The
// connection that wrote it still caches the copied page: the file change
// counter (bytes 24-27, and its copy at 92-95 that keeps the header's page
// count valid) is advanced too, so that its next read transaction finds the
// file changed and reads page 1 again.
int db_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  SharedDb& db = *db_of(f)->db;
  if (db.read_only()) return SQLITE_READONLY;
  db.mark_dirty();
  db_of(f)->unsynced_writes = true;
  db_of(f)->synced = false;
  const void* src = buf;
  std::string rollback_page1;
  if (off == 0 && n >= 20) {
    const auto* b = static_cast<const unsigned char*>(buf);
    if (b[18] == 2 || b[19] == 2) {
      rollback_page1.assign(static_cast<const char*>(buf), static_cast<size_t>(n));
      rollback_page1[18] = rollback_page1[19] = 1;
      if (n >= 96) {
        const uint32_t counter = (uint32_t{b[24]} << 24 | uint32_t{b[25]} << 16 |
                                  uint32_t{b[26]} << 8 | b[27]) + 1;
        for (int at : {24, 92}) {
          for (int i = 0; i < 4; i++) rollback_page1[at + i] = char(counter >> (24 - 8 * i));
        }
      }
      src = rollback_page1.data();
    }
  }
  Status s = db.image().write(src, static_cast<size_t>(n), static_cast<uint64_t>(off));
  if (s.ok() && g_sqlite_planted_bugs.commit_each_write) s = db.commit_if_dirty();
  return s.ok() ? SQLITE_OK : fail(s, SQLITE_IOERR_WRITE);
}

int db_truncate(sqlite3_file* f, sqlite3_int64 size) {
  SharedDb& db = *db_of(f)->db;
  if (db.read_only()) return SQLITE_READONLY;
  db.mark_dirty();
  if (db_of(f)->synced) db.mark_trim_after_commit();
  Status s = db.image().truncate(static_cast<uint64_t>(size), db.fetched.load() == 0);
  return s.ok() ? SQLITE_OK : fail(s, SQLITE_IOERR_TRUNCATE);
}

int db_sync(sqlite3_file* f, int) { return db_sync_commit(db_of(f)); }

int db_file_size(sqlite3_file* f, sqlite3_int64* size) {
  *size = static_cast<sqlite3_int64>(db_of(f)->db->image().size());
  return SQLITE_OK;
}

int db_lock(sqlite3_file* f, int level) {
  DbFile* d = db_of(f);
  // A write transaction begins: a trim after the last commit goes out
  // first, so that the blocks it freed can take this transaction's pages
  // (a large insert after a VACUUM on a full container failed once).
  // Before SQLite writes this transaction's journal, which refers to pages
  // as committed; readers of other connections see the same bytes before
  // and after. A failure drops the trim (the file stays longer, which
  // SQLite reads as the same database) and fails only this transaction.
  const int before = d->lock;
  int rc = d->db->lock(&d->lock, level);
  if (rc == SQLITE_OK && level == kReserved && before <= kShared && d->db->trim_after_commit()) {
    rc = db_commit(d, /*transaction=*/false);
    if (rc != SQLITE_OK) d->db->unlock(&d->lock, before);
  }
  return rc;
}

int db_check_reserved(sqlite3_file* f, int* out) {
  *out = db_of(f)->db->reserved() ? 1 : 0;
  return SQLITE_OK;
}

// PRAGMA journal_mode=WAL would move commits out of the container into a
// log this VFS cannot make durable; refuse it with the reason.
int db_pragma(char** arg) {
  if (arg[1] == nullptr || arg[2] == nullptr) return SQLITE_NOTFOUND;
  if (strcasecmp(arg[1], "journal_mode") == 0 && strcasecmp(arg[2], "wal") == 0) {
    arg[0] = sqlite3_mprintf(
        "journal_mode=WAL is not available with the pm VFS: every transaction is already one "
        "atomic commit of the container (keep DELETE, or MEMORY)");
    return SQLITE_ERROR;
  }
  return SQLITE_NOTFOUND;
}

int db_file_control(sqlite3_file* f, int op, void* arg) {
  switch (op) {
    case SQLITE_FCNTL_SYNC:  // sent just before xSync
    case SQLITE_FCNTL_SYNC_OMITTED:  // instead of it, with synchronous=OFF before 3.8
      return db_sync_commit(db_of(f));
    case SQLITE_FCNTL_PRAGMA:
      return db_pragma(static_cast<char**>(arg));
    case SQLITE_FCNTL_MMAP_SIZE: {  // set by the pager (0: no xFetch), read by the pragma
      auto* size = static_cast<sqlite3_int64*>(arg);
      const sqlite3_int64 want = *size;
      *size = db_of(f)->mmap_size;
      if (want >= 0) db_of(f)->mmap_size = want;
      return SQLITE_OK;
    }
    case SQLITE_FCNTL_HAS_MOVED:  // asked before a write transaction opens its journal
      *static_cast<int*>(arg) = db_of(f)->db->moved() ? 1 : 0;
      return SQLITE_OK;
    case SQLITE_FCNTL_VFSNAME:
      *static_cast<char**>(arg) = sqlite3_mprintf("%s", PMSQLITE_VFS_NAME);
      return SQLITE_OK;
    default:
      return SQLITE_NOTFOUND;
  }
}

int sector_size(sqlite3_file*) { return 4096; }

// Every write up to the next sync is atomic (it reaches the file only at
// commit()), and nothing written is ever torn.
int device_characteristics(sqlite3_file*) {
  return SQLITE_IOCAP_ATOMIC | SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_SEQUENTIAL |
         SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_UNDELETABLE_WHEN_OPEN;
}

// Zero-copy reads (PRAGMA mmap_size > 0): a pointer into the container.
int db_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  SharedDb& db = *db_of(f)->db;
  *out = db.image().fetch(static_cast<uint64_t>(off), static_cast<size_t>(n));
  if (*out != nullptr) db.fetched.fetch_add(1);
  return SQLITE_OK;
}

int db_unfetch(sqlite3_file* f, sqlite3_int64, void* p) {
  if (p != nullptr) db_of(f)->db->fetched.fetch_sub(1);
  return SQLITE_OK;
}

const sqlite3_io_methods kDbMethods = {
    3,
    NoThrow<db_close>::call,
    NoThrow<db_read>::call,
    NoThrow<db_write>::call,
    NoThrow<db_truncate>::call,
    NoThrow<db_sync>::call,
    NoThrow<db_file_size>::call,
    NoThrow<db_lock>::call,
    NoThrow<db_unlock>::call,
    NoThrow<db_check_reserved>::call,
    NoThrow<db_file_control>::call,
    sector_size,
    device_characteristics,
    nullptr, nullptr, nullptr, nullptr,  // no shared memory: no WAL
    NoThrow<db_fetch>::call,
    NoThrow<db_unfetch>::call,
};

// --- the journal, in DRAM --------------------------------------------------

struct JournalFile {
  sqlite3_file base;
  std::shared_ptr<MemFile> file;
  std::string name;
  bool delete_on_close = false;
};
JournalFile* j_of(sqlite3_file* f) { return reinterpret_cast<JournalFile*>(f); }

int j_close(sqlite3_file* f) {
  JournalFile* j = j_of(f);
  if (j->delete_on_close) mem_files::remove(j->name);
  j->~JournalFile();
  return SQLITE_OK;
}

int j_read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  pm::Result<size_t> inside =
      j_of(f)->file->read(buf, static_cast<size_t>(n), static_cast<uint64_t>(off));
  if (!inside.ok()) {  // an old page that cannot be read again (mem_file.h)
    (void)fail(inside.status(), SQLITE_IOERR_READ);
    return SQLITE_IOERR_READ;
  }
  return *inside == static_cast<size_t>(n) ? SQLITE_OK : SQLITE_IOERR_SHORT_READ;
}

int j_write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  j_of(f)->file->write(buf, static_cast<size_t>(n), static_cast<uint64_t>(off));
  return SQLITE_OK;
}

int j_truncate(sqlite3_file* f, sqlite3_int64 size) {
  j_of(f)->file->truncate(static_cast<uint64_t>(size));
  return SQLITE_OK;
}

int j_sync(sqlite3_file*, int) { return SQLITE_OK; }  // needs no durability (mem_file.h)

int j_file_size(sqlite3_file* f, sqlite3_int64* size) {
  *size = static_cast<sqlite3_int64>(j_of(f)->file->size());
  return SQLITE_OK;
}

int j_lock(sqlite3_file*, int) { return SQLITE_OK; }
int j_check_reserved(sqlite3_file*, int* out) {
  *out = 0;
  return SQLITE_OK;
}
int j_file_control(sqlite3_file*, int, void*) { return SQLITE_NOTFOUND; }

const sqlite3_io_methods kJournalMethods = {
    1,
    NoThrow<j_close>::call,
    NoThrow<j_read>::call,
    NoThrow<j_write>::call,
    NoThrow<j_truncate>::call,
    j_sync,
    NoThrow<j_file_size>::call,
    j_lock,
    j_lock,
    NoThrow<j_check_reserved>::call,
    j_file_control,
    sector_size,
    device_characteristics,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
};

// --- the VFS -------------------------------------------------------------

// A size URI parameter: bytes with an optional K, M or G suffix, left at
// *out when absent. False for anything else ("1.5G", "-1", past 1 PiB).
bool size_parameter(const char* name, const char* key, uint64_t* out) {
  const char* v = sqlite3_uri_parameter(name, key);
  if (v == nullptr || *v == '\0') return true;
  if (*v < '0' || *v > '9') return false;
  char* end = nullptr;
  errno = 0;
  uint64_t n = std::strtoull(v, &end, 10);
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
  }
  constexpr uint64_t kMost = 1ull << 50;
  if (errno != 0 || *end != '\0' || n == 0 || n > (kMost >> shift)) return false;
  *out = n << shift;
  return true;
}

int open_db(const char* name, sqlite3_file* f, int flags, int* out_flags) {
  OpenParams p;
  p.create = (flags & SQLITE_OPEN_CREATE) != 0;
  p.read_only = (flags & SQLITE_OPEN_READONLY) != 0;
  for (auto [key, value] : {std::pair{"max_size", &p.max_size}, {"initial_size", &p.initial_size}}) {
    if (!size_parameter(name, key, value)) {
      return cant_open(std::string("the URI parameter ") + key + "=" +
                       sqlite3_uri_parameter(name, key) +
                       " is not a size (bytes, or a number with K, M or G, up to 1 PiB)");
    }
  }
  if (p.initial_size < (1ull << 20)) {
    return cant_open("the URI parameter initial_size must be at least 1M");
  }
  if (p.initial_size > p.container_max_size()) {
    return cant_open("the URI parameter initial_size=" + std::to_string(p.initial_size) +
                     " is above max_size=" + std::to_string(p.container_max_size()) +
                     " (bytes, rounded up to whole GiB; max_size defaults to 64G)");
  }
  pm::Result<std::shared_ptr<SharedDb>> db = SharedDb::open(name, p);
  if (!db.ok()) return fail(db.status(), SQLITE_CANTOPEN);
  auto* d = new (f) DbFile{};
  d->db = std::move(*db);
  if (d->db->read_only() && !p.read_only) {
    sqlite3_log(SQLITE_READONLY,
                "pm vfs: %s opens read-only (no write permission, or a mode=ro connection of "
                "this process has it open: one container per process); writes get "
                "SQLITE_READONLY",
                name);
  }
  d->base.pMethods = &kDbMethods;
  if (out_flags != nullptr) {
    *out_flags = d->db->read_only() ? (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
                                          SQLITE_OPEN_READONLY
                                    : flags;
  }
  return SQLITE_OK;
}

int open_journal(const char* name, sqlite3_file* f, int flags, int* out_flags) {
  std::shared_ptr<MemFile> m = mem_files::open(name, (flags & SQLITE_OPEN_CREATE) != 0);
  if (!m) return SQLITE_CANTOPEN;
  auto* j = new (f) JournalFile{};
  // The journal of a database open here refers to its committed pages
  // instead of copying them (mem_file.h).
  constexpr std::string_view kSuffix = "-journal";
  const std::string_view n(name);
  if (n.size() > kSuffix.size() && n.ends_with(kSuffix)) {
    if (auto db = SharedDb::find_owned(n.substr(0, n.size() - kSuffix.size()))) {
      m->set_old_pages(db);
    }
  }
  j->file = std::move(m);
  j->name = name;
  j->delete_on_close = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
  j->base.pMethods = &kJournalMethods;
  if (out_flags != nullptr) *out_flags = flags;
  return SQLITE_OK;
}

int vfs_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  f->pMethods = nullptr;  // SQLite's rule for a failed open
  if (name != nullptr && (flags & SQLITE_OPEN_MAIN_DB)) return open_db(name, f, flags, out_flags);
  if (name != nullptr && (flags & SQLITE_OPEN_MAIN_JOURNAL)) {
    return open_journal(name, f, flags, out_flags);
  }
  // A super-journal (a transaction over attached databases) goes to the
  // disk, where an attached ordinary database's hot journal looks for it
  // after a crash: missing, that journal is taken as committed and deleted
  // without its rollback (a kill left an UPDATE half applied in the
  // ordinary file while it was kept in DRAM).
  if (name != nullptr && (flags & SQLITE_OPEN_SUPER_JOURNAL)) {
    return g_base->xOpen(g_base, name, f, flags, out_flags);
  }
  if (flags & SQLITE_OPEN_WAL) {
    // (PRAGMA journal_mode=WAL without a schema name is refused for main
    // only: SQLite asks no other database, so an attached one gets here.)
    return cant_open("a write-ahead log is not available with the pm VFS: set "
                     "PRAGMA <schema>.journal_mode=DELETE");
  }
  // Temporary databases, statement journals, sort files: SQLite's own
  // VFS, in the space SQLite allocated for us (szOsFile covers it).
  return g_base->xOpen(g_base, name, f, flags, out_flags);
}

// The names of a pm database's side files ("-journal", "-wal", "-shm").
bool side_file_of_open_db(std::string_view name) {
  for (std::string_view suffix : {"-journal", "-wal", "-shm"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix) &&
        SharedDb::is_open(name.substr(0, name.size() - suffix.size()))) {
      return true;
    }
  }
  return false;
}

int vfs_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  if (mem_files::remove(name)) return SQLITE_OK;
  if (side_file_of_open_db(name)) return SQLITE_IOERR_DELETE_NOENT;
  return g_base->xDelete(g_base, name, sync_dir);
}

int vfs_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  if (const mem_files::Presence p = mem_files::presence(name); p != mem_files::Presence::kUnknown) {
    *out = flags != SQLITE_ACCESS_EXISTS || p == mem_files::Presence::kNotEmpty;
    return SQLITE_OK;
  }
  if (side_file_of_open_db(name)) {
    *out = 0;
    return SQLITE_OK;
  }
  return g_base->xAccess(g_base, name, flags, out);
}

int vfs_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  if (name[0] == '/' && SharedDb::is_open(name)) {  // bound names stay as they are
    sqlite3_snprintf(n, out, "%s", name);
    return SQLITE_OK;
  }
  return g_base->xFullPathname(g_base, name, n, out);
}

int vfs_get_last_error(sqlite3_vfs*, int n, char* out) {
  if (n > 0) sqlite3_snprintf(n, out, "%s", t_last_error.c_str());
  return t_last_error.empty() ? 0 : 1;
}

void* vfs_dl_open(sqlite3_vfs*, const char* path) { return g_base->xDlOpen(g_base, path); }
void vfs_dl_error(sqlite3_vfs*, int n, char* out) { g_base->xDlError(g_base, n, out); }
void (*vfs_dl_sym(sqlite3_vfs*, void* h, const char* sym))(void) {
  return g_base->xDlSym(g_base, h, sym);
}
void vfs_dl_close(sqlite3_vfs*, void* h) { g_base->xDlClose(g_base, h); }
int vfs_randomness(sqlite3_vfs*, int n, char* out) { return g_base->xRandomness(g_base, n, out); }
int vfs_sleep(sqlite3_vfs*, int us) { return g_base->xSleep(g_base, us); }
int vfs_current_time(sqlite3_vfs*, double* t) { return g_base->xCurrentTime(g_base, t); }
int vfs_current_time_i64(sqlite3_vfs*, sqlite3_int64* t) {
  return g_base->xCurrentTimeInt64(g_base, t);
}

sqlite3_vfs g_vfs = {
    2, 0, 1024, nullptr, PMSQLITE_VFS_NAME, nullptr,
    NoThrow<vfs_open>::call,
    NoThrow<vfs_delete>::call,
    NoThrow<vfs_access>::call,
    NoThrow<vfs_full_pathname>::call,
    vfs_dl_open, vfs_dl_error, vfs_dl_sym, vfs_dl_close,
    vfs_randomness, vfs_sleep, vfs_current_time, vfs_get_last_error,
    vfs_current_time_i64, nullptr, nullptr, nullptr,
};

// Each new connection whose main database is on "pm" reads pages straight
// from the container (SQLite uses xFetch only when mmap_size > 0).
int use_mapping(sqlite3* db, char**, const sqlite3_api_routines*) {
  sqlite3_vfs* vfs = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) == SQLITE_OK && vfs == &g_vfs) {
    sqlite3_exec(db, "PRAGMA mmap_size=2147418112", nullptr, nullptr, nullptr);
  }
  return SQLITE_OK;
}

}  // namespace

Status bind(const std::string& name, pm::Container* c, Committer committer) {
  return SharedDb::bind(name, c, std::move(committer));
}
Status unbind(const std::string& name) { return SharedDb::unbind(name); }

}  // namespace pmsqlite

extern "C" int pmsqlite_register(int make_default) {
  using namespace pmsqlite;
#ifdef PMSQLITE_EXTENSION
  // Called straight from a program that linked the module: SQLite never
  // handed it its routines (that is what loading it does).
  if (sqlite3_api == nullptr) return SQLITE_MISUSE;
#endif
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  if (g_base == nullptr) {
    g_base = sqlite3_vfs_find(nullptr);
    if (g_base == nullptr) return SQLITE_ERROR;
    g_vfs.szOsFile = std::max<int>({static_cast<int>(sizeof(DbFile)),
                                    static_cast<int>(sizeof(JournalFile)), g_base->szOsFile});
    g_vfs.mxPathname = g_base->mxPathname;
    int rc = sqlite3_auto_extension(reinterpret_cast<void (*)(void)>(use_mapping));
    if (rc != SQLITE_OK) return rc;
    return sqlite3_vfs_register(&g_vfs, make_default);
  }
  return make_default ? sqlite3_vfs_register(&g_vfs, 1) : SQLITE_OK;
}
