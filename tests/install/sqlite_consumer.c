/* A C program linked with libsqlite3 that uses the installed extension as
 * pmsqlite/vfs.h says (tests/install/test_install.sh): loaded once, then
 * databases opened with vfs "pm". Linked with the module too, whose
 * pmsqlite_register() must refuse (SQLITE_MISUSE), not crash.
 * Usage: sqlite_consumer LIBPMSQLITE DB */
#include <pmsqlite/vfs.h>
#include <sqlite3.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  if (pmsqlite_register(0) != SQLITE_MISUSE) return 10;
  sqlite3* db = NULL;
  char* err = NULL;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 11;
  sqlite3_enable_load_extension(db, 1);
  if (sqlite3_load_extension(db, argv[1], 0, &err) != SQLITE_OK) {
    fprintf(stderr, "sqlite_consumer.c: %s\n", err);
    return 12;
  }
  sqlite3_close(db);
  if (sqlite3_open_v2(argv[2], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "pm") != SQLITE_OK) {
    return 13;
  }
  if (sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(7);", NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "sqlite_consumer.c: %s\n", err);
    return 14;
  }
  sqlite3_close(db);
  puts("sqlite_consumer.c: the extension loaded from C; a pm database written");
  return 0;
}
