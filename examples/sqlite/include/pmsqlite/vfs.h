// pmsqlite: SQLite's VFS "pm", which keeps each database file in a libpm
// container. A transaction's pages are written into container memory and
// SQLite's sync of the database file is the container's commit(): the whole
// transaction becomes durable at once, or (after a crash) not at all, so
// SQLite's rollback journal only has to serve ROLLBACK and is kept in DRAM.
// docs/sqlite.md has the design and what each setting does.
//
// Use from C or C++, in a program linked with the static library pmsqlite
// (built in this tree):
//   pmsqlite_register(0);
//   sqlite3_open_v2("x.db", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "pm");
// or with URI filenames: "file:x.db?vfs=pm&max_size=4G". What installs is
// the loadable extension libpmsqlite: a program loads it once
// (sqlite3_enable_load_extension, then sqlite3_load_extension(db,
// "libpmsqlite", 0, &err) on any connection) and then opens databases with
// vfs "pm"; calling pmsqlite_register() of a module that was linked, not
// loaded, returns SQLITE_MISUSE.
//
// URI parameters read at open: max_size (largest container heap, default
// 64G), initial_size (heap made at create, default 8M); sizes take K, M, G.
//
// Thread safety: as SQLite's (connections in several threads work; one
// process at a time has a database open, as the container's lock enforces).
#ifndef PMSQLITE_VFS_H_
#define PMSQLITE_VFS_H_

#ifdef __cplusplus
extern "C" {
#endif

#define PMSQLITE_VFS_NAME "pm"
#define PMSQLITE_API __attribute__((visibility("default")))

// Registers the VFS "pm" (once; later calls return SQLITE_OK), and makes it
// the default when `make_default` is set. Also arranges that every new
// connection whose main database uses "pm" reads through the mapping
// (PRAGMA mmap_size), which is zero-copy here. Returns an SQLite code.
PMSQLITE_API int pmsqlite_register(int make_default);

// The loadable extension's entry point (`.load libpmsqlite`): registers the
// VFS and keeps the library loaded after the loading connection closes.
struct sqlite3;
struct sqlite3_api_routines;
PMSQLITE_API int sqlite3_pmsqlite_init(struct sqlite3* db, char** err, const struct sqlite3_api_routines* api);

#ifdef __cplusplus
}  // extern "C"

#include <functional>
#include <string>

#include "pm/container.h"

namespace pmsqlite {

// How a transaction is made durable; the default is c.commit(). (A trim
// SQLite makes after a commit, VACUUM's, which changes nothing it reads, is
// committed with c.commit() when the next write transaction begins.)
using Committer = std::function<pm::Status(pm::Container&)>;

// Serves the database named `name` (an absolute path that SQLite is then
// given, with vfs "pm") from an open container owned by the caller, which
// keeps it open until unbind(). For programs that manage their container
// themselves, and for the crash harness, which commits through its model.
// kBusy when the name is bound already.
pm::Status bind(const std::string& name, pm::Container* c, Committer committer = {});
// kBusy while a connection still has the database open.
pm::Status unbind(const std::string& name);

}  // namespace pmsqlite
#endif

#endif  // PMSQLITE_VFS_H_
