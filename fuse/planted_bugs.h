// Planted bugs in the mount's protocols: test-only switches, so that the
// crash harness proves it catches each (tests/crash, FusePlantedBugTest).
// Production code never sets them.
#ifndef PMFS_PLANTED_BUGS_H_
#define PMFS_PLANTED_BUGS_H_

namespace pmfs {

struct FusePlantedBugs {
  // rename writes the new name in a transaction of its own before the one
  // that removes the old: a crash between leaves the file under both names.
  bool rename_copies_first = false;
  // A changed chunk is put over the id the committed manifest names instead
  // of a fresh one (file_content.h's invariant): a crash before the new
  // manifest commits shows part of the write.
  bool chunk_written_in_place = false;
  // A file's first hard link puts the new name in a transaction of its own
  // before the one that moves the file to its inode key: a crash between
  // shows the new name as a file holding the 8-byte id.
  bool link_name_first = false;
  // A mount trusts the clean-end mark (kCleanKey) whatever updates
  // followed it: the chunks a crash orphaned after a clean end are never
  // swept, since the next mount reads directories lazily.
  bool clean_mark_trusted = false;
  // A directory rename in several transactions puts no kRenameKey in its
  // first: a crash between them leaves the tree split between both names.
  bool rename_steps_without_intent = false;
  // A block of stable inode numbers is handed out without moving kInoKey
  // past it: a later mount gives the numbers records hold to new files.
  bool ino_block_unsaved = false;
  // A close or release stores the staged content whoever changed it: the
  // late release of a descriptor closed before an O_TRUNC open stores the
  // rewrite that open began, and a crash leaves the file empty.
  bool release_stores_others = false;
};

// Read by pm_fuse, written only by tests.
extern FusePlantedBugs g_fuse_planted_bugs;

}  // namespace pmfs

#endif  // PMFS_PLANTED_BUGS_H_
