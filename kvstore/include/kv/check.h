// Checking and salvaging a store: what `pm check` and `pm kv salvage` run.
//
// check_store() walks a store without changing it: the root's fields and
// bucket segments, every bucket chain (each entry inside its heap block,
// lengths within the limits, checksum, in the right bucket, no sequence
// number above the root's, no key twice, no cycle), the ghost list, the
// counts, and each log from its committed head. A problem is damage: a read
// may fail or, for an entry without a checksum, return bytes that were
// never written. A note is not damage: valid records beyond the end of a
// log are updates that were not synced before a crash, or damage in an
// unsynced part.
//
// salvage() copies every key it can read into a new store, the way
// `sqlite3 .recover` does: backend entries whose checksum holds (a damaged
// link cuts its chain there) and the log records recovery would replay,
// newest first. The damaged store is left as it is.
#ifndef KV_CHECK_H_
#define KV_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kv/store.h"
#include "pm/container.h"

namespace kv {

struct StoreCheck {
  std::vector<std::string> problems;
  std::vector<std::string> notes;
  uint64_t keys = 0;         // live entries in the backend
  uint64_t ghosts = 0;       // remembered removals
  uint64_t buckets = 0;
  uint64_t log_records = 0;  // records recovery would replay
};

// Checks the store in an open container. kInvalidArgument when the
// container holds no store; problems are in the result.
Result<StoreCheck> check_store(pm::Container* c);

struct SalvageReport {
  uint64_t keys = 0;             // written to the new store
  uint64_t from_logs = 0;        // updates taken from the logs (newer than the backend's)
  uint64_t damaged_entries = 0;  // backend entries that could not be read
  std::vector<std::string> problems;  // what could not be read, in words
};

// Copies what can be read of the store at `from` into a new store at `to`
// (created with the geometry of `from`; kInvalidArgument if it exists),
// built as `to` + ".salvaging" and renamed to `to` once complete and
// durable: a salvage that stops half way leaves no `to`. `from` is opened
// read-only and never written. kCorruption when `from` does not open as a
// container at all.
Result<SalvageReport> salvage(const std::string& from, const std::string& to);

}  // namespace kv

#endif  // KV_CHECK_H_
