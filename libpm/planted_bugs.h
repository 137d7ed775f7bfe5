// Planted bugs: test-only switches that break the commit protocol in known
// ways, so that the crash harness can prove it catches each one
// (tests/crash/self_test). Production code never sets them; each costs one
// predictable branch on a path that is about to flush or drain anyway.
#ifndef LIBPM_PLANTED_BUGS_H_
#define LIBPM_PLANTED_BUGS_H_

namespace pm {

struct PlantedBugs {
  bool skip_body_flush = false;       // journal body stored but never flushed
  bool skip_journal_drain = false;    // write-back starts before the journal is durable
  bool home_before_journal = false;   // write-back happens before the journal is written
  bool skip_body_checksum = false;    // recovery trusts the body without its checksum
  bool replay_torn_journal = false;   // recovery applies a journal it found torn
  bool skip_writeback_drain = false;  // commit returns before write-back is durable
  // The rules that keep a deferred write-back replayable (journal.h): every
  // header goes to slot 0 (rule 1); the next body goes over the deferred
  // commit's body (rule 2); recovery replays the newest header only (rule 3).
  bool one_slot_for_all = false;
  bool body_over_deferred_body = false;
  bool replay_newest_slot_only = false;
  // A writable open leaves the header slots as the page cache shows them
  // (a kill between marking a header applied and draining it).
  bool open_skips_slot_sync = false;
  // After a failed write-back, alloc, growth and commit go on (growth then
  // marks the unapplied journal applied).
  bool mutate_after_failed_writeback = false;
  // File space is extended sparse (ftruncate only), never allocated.
  bool sparse_file = false;
  // An open fills the holes a growth cut short by a crash left past the
  // bytes in use, instead of cutting them off (on a full disk the file
  // could not be opened).
  bool open_fills_growth_holes = false;
  // Recovery replays a journal found in the page cache without making it
  // durable first (after a kill; a power failure then tears the state).
  bool replay_unsynced_journal = false;
  // A commit whose journal drain failed leaves its header in place: the
  // next open replays a commit that reported failure.
  bool keep_header_after_failed_drain = false;
  // Heap growth on a full disk takes the journal's room past the heap
  // (later commits find no journal room, even those that free space).
  bool growth_takes_journal_room = false;
  // Growth that found no room is tried again only after a commit, never
  // when the disk has room again (a blocked store never commits).
  bool growth_waits_for_commit = false;
  // A body that finds no file room above the deferred body fails its
  // commit with kNoSpace instead of finishing the deferred commit and
  // taking the journal's room at the heap's end (a full disk then refuses
  // the commits that free space).
  bool no_room_fails_commit = false;
  // Fresh bytes (journal.h) share the header's drain: a crash inside it
  // may keep the header and lose them.
  bool fresh_in_one_drain = false;
  // Fresh bytes may overlap the previous commit's entries, which a
  // recovery replays over them when that commit's write-back was deferred.
  bool fresh_over_previous_commit = false;
  // A commit that fails after writing its fresh bytes home forgets them:
  // the next commit's diff cannot see them (home holds them), so no commit
  // point ever makes them durable.
  bool fresh_retry_forgotten = false;
  // The same, forgotten by an abort() after such a commit: the working view
  // then reads home, where those bytes are not durable, and a later commit
  // that writes the same bytes there again sees no change.
  bool abort_forgets_fresh_retry = false;
  // ... or by closing the container: the next session's commits diff
  // against home, which holds them
  bool close_forgets_fresh_retry = false;
  // A read-only open of a pending commit applies it to the home copy only,
  // not to the working view mapped from the file.
  bool read_only_view_skips_replay = false;
  // Marking the journal applied marks the newest header slot, not the
  // older one (a damaged newest header then has recovery replay the older
  // commit): at a clean close, and mid-session (a commit on a full disk
  // that finishes the deferred one and then fails for want of room).
  bool close_marks_newest_only = false;
  bool finish_marks_newest_only = false;
};

// Read by libpm, written only by tests.
extern PlantedBugs g_planted_bugs;

}  // namespace pm

#endif  // LIBPM_PLANTED_BUGS_H_
