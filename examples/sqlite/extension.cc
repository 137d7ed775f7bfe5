// libpmsqlite, the loadable extension: `.load libpmsqlite` in the sqlite3
// shell, load_extension() in Python. SQLite derives the entry point's name
// from the file name (libpmsqlite.so -> sqlite3_pmsqlite_init).
#include "pmsqlite/vfs.h"
#include "sqlite_api.h"

SQLITE_EXTENSION_INIT1

extern "C" int sqlite3_pmsqlite_init(sqlite3*, char** err, const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  const int rc = pmsqlite_register(0);
  if (rc != SQLITE_OK) {
    if (err != nullptr) *err = sqlite3_mprintf("cannot register the pm VFS (SQLite code %d)", rc);
    return rc;
  }
  // The VFS must outlive the connection that loaded it.
  return SQLITE_OK_LOAD_PERMANENTLY;
}
