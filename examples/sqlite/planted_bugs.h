// Planted bugs in the pm VFS: test-only switches, so that the crash harness
// proves it catches each (tests/crash, SqlitePlantedBugTest). Production
// code never sets them.
#ifndef PMSQLITE_PLANTED_BUGS_H_
#define PMSQLITE_PLANTED_BUGS_H_

namespace pmsqlite {

struct SqlitePlantedBugs {
  // Every xWrite is committed at once: a transaction reaches the file in
  // pieces, and a crash between them leaves half of it.
  bool commit_each_write = false;
  // The file size changes without will_write(): the hints tracker leaves
  // it out of the commit, so the pages past the old size are lost.
  bool unannounced_size = false;
  // A writer that synced commits again when it unlocks (what SQLite wrote
  // after its commit point: the trim of the file), and reports that
  // commit's failure for a transaction that was already durable.
  bool commit_trim_at_unlock = false;
};

// Read by the VFS, written only by tests.
extern SqlitePlantedBugs g_sqlite_planted_bugs;

}  // namespace pmsqlite

#endif  // PMSQLITE_PLANTED_BUGS_H_
