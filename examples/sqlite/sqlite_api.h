// SQLite's API for this library's sources: direct calls when linked with
// libsqlite3 (the library pmsqlite), or through the routines table that
// SQLite hands a loadable extension (the module libpmsqlite, built with
// PMSQLITE_EXTENSION), so that the extension uses the SQLite of the program
// that loads it.
#ifndef PMSQLITE_SQLITE_API_H_
#define PMSQLITE_SQLITE_API_H_

#ifdef PMSQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#else
#include <sqlite3.h>
#endif

#endif  // PMSQLITE_SQLITE_API_H_
