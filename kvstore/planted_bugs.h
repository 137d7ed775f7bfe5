// Planted bugs in the store's protocols: test-only switches, so that the
// crash harness proves it catches each (tests/crash, KvPlantedBugTest).
// Production code never sets them.
#ifndef KVSTORE_PLANTED_BUGS_H_
#define KVSTORE_PLANTED_BUGS_H_

namespace kv {

struct KvPlantedBugs {
  bool skip_put_persist = false;       // a put returns before its record is durable
  bool reclaim_unapplied = false;      // an epoch frees log space the backend never applied
  bool remove_without_ghost = false;   // the backend forgets a removal at once
  bool replay_ignores_backend = false; // recovery replays records older than the backend
  bool no_session_check = false;       // recovery accepts stale records of an older session
  // Defects found by review (issue 11), kept as switches so that the harness
  // proves it sees them:
  // an epoch moves heads past collapsed records without syncing the logs,
  // so the records that superseded them may not be durable;
  bool epoch_skips_log_sync = false;
  // recovery keeps no session boundaries: the first record at a head is
  // accepted whatever its session (stale records after a clean reopen);
  bool session_rule_without_boundary = false;
  // recovery accepts records without persisting them (after a kill they may
  // be only in the page cache).
  bool recovery_trusts_page_cache = false;
  // the gleaner marks an item applied with a plain store, so that a version
  // overwritten in place meanwhile is marked too (and may be evicted while
  // only its predecessor is in the backend): Item::mark_applied's invariant.
  bool mark_applied_unchecked = false;
  // a full backend: the gleaner moves its cursor past the record it had no
  // room for (an acknowledged put lost at the next epoch); caught by the
  // harness's full-disk workload (kvstore_full) and by
  // StorePlantedBugTest.AFullDiskTestCatchesASkippedRecord.
  bool skip_blocked_record = false;
  // the logs' reserve for removes takes any small put too, so that small
  // puts on a full disk use it up and no remove goes through (the mount's
  // `rm` on a full disk): StorePlantedBugTest.SmallPutsLeaveRoomForRemoves.
  bool reserve_for_small_puts = false;
  // recovery ends a log at its first unreadable record even when the
  // session's close mark lies beyond it: damage dropped durable records
  // silently (DamagedStoreTest.ADamagedLogRecordBeforeACleanCloseIsReported).
  bool ignore_close_marks = false;
  // a put of a removed key (its ghost in the table) leaves it out of the
  // ordered index: scans miss a live key (Backend::apply_put).
  bool index_misses_revived_key = false;
  // a split of the ordered index never links its new right node (its keys
  // vanish from scans): caught only by a workload with enough keys to
  // split (kvstore_wide).
  bool index_split_drops_separator = false;
  // an update made while a scan's snapshot is open keeps nothing of what
  // it replaces (the scan reads the newer version: store.cc, update).
  bool snapshot_keeps_nothing = false;
  // a scan opens its snapshot without waiting for the updates numbered in
  // it that have not logged their record yet (store_scan.cc).
  bool snapshot_skips_in_flight = false;
  // a put over any live item is logged as one whose key the index holds,
  // applied or not (store.cc, key_indexed): a scan misses a new key whose
  // first record a collapse skipped.
  bool index_flag_ignores_applied = false;
  // ordered reads trust the index flag of records an earlier session wrote
  // (pending_keys.h): after a crash, a key applied but not committed is
  // missed.
  bool index_flag_of_any_session = false;
  // a get, put or scan takes a zeroed chain link for its chain's end (as
  // before format 4): the keys behind it read as not found
  // (CorruptionFuzzTest.AZeroedChainLinkNeverHidesAKey).
  bool zeroed_link_ends_chain = false;
  // every glean blocked on a full backend reads every record behind the
  // blocked one again, though the heap is as it was (gleaner.h,
  // apply_beyond): failing puts on a full disk take 50-125 ms each.
  bool reread_behind_blocked = false;
  // recovery.cc, look_beyond: a valid record written in order past a
  // log's end is taken for a torn tail's leftovers, as before kOpInOrder
  bool ignore_in_order_records = false;
  // and an end short of where the last session began, too
  bool torn_tail_before_session = false;
  // The version tree (version_tree_*.cc):
  bool tree_split_in_place = false;         // a split rewrites the full node in place
  bool tree_commit_before_persist = false;  // the version store precedes the node writes' drain
  bool tree_reuse_uncommitted_end = false;  // a slot whose end is not committed counts as dead
  bool tree_unaligned_slots = false;        // start and end may straddle a line (a torn revival)
  // a commit leaves root[W & 1] alone when the root did not change since
  // the last commit, though that slot holds the root of W - 2
  bool tree_root_kept_if_unchanged = false;
  // An epoch applies whatever waits, whether or not its commit has room
  // for the journal (a full disk; Container::commit_fits)
  bool epoch_ignores_journal_room = false;
  // While a log waits for room, every ghost goes, even one whose key has an
  // older record left in the logs (it comes back when that record is replayed).
  bool purge_ignores_records_left = false;
  // An index merge of two leaves for a full heap leaves the right one linked
  // to its parent as well as reused.
  bool index_merge_keeps_cell = false;
  // An epoch ends only between records: one record larger than the
  // journal's room on a nearly full disk fails every commit after it.
  bool epoch_ends_between_records = false;
};

// Read by kvstore, written only by tests.
extern KvPlantedBugs g_kv_planted_bugs;

}  // namespace kv

#endif  // KVSTORE_PLANTED_BUGS_H_
