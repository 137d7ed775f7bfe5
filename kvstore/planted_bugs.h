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
};

// Read by kvstore, written only by tests.
extern KvPlantedBugs g_kv_planted_bugs;

}  // namespace kv

#endif  // KVSTORE_PLANTED_BUGS_H_
