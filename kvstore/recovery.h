// Recovery: at open, rebuilds a store's DRAM state from its committed
// backend and its logs, and starts a new session.
//
// Which records it accepts. Each log holds, from its committed head, the
// records of one or more sessions, then whatever an interrupted session
// left: torn records, and valid ones beyond them (out-of-order write-back
// on the msync path; kAsync). The backend remembers, for the session that
// opened the store last (S), where S began writing each log: the end of the
// valid records S's recovery found there. A record before that boundary must
// come from a session older than S; one at or past it must come from S
// itself. So a record an older session left beyond its valid end is never
// accepted, even after S wrote exactly up to it and an epoch put the head
// there. The first record that breaks the rule, or does not validate, ends
// the log.
//
// Damage, not a crash. A session that ends cleanly makes its logs durable,
// then writes a close mark at each log's tail (crl.h). Recovery finds it
// where the accepted records end. Found further on, it shows that records
// before it were durable when the session ended and no longer read: the
// open fails with kCorruption (nothing is changed; `pm kv salvage` copies
// what reads, the records past the damage included), where a crash would
// have dropped the unreadable record and every later one of that log.
//
// Steps: scan each log; persist every accepted record (after a process
// kill they may exist only in the page cache, and later updates persist
// only their own ranges); install in the frontend each key's newest record
// that the backend does not already reflect; then commit the new session
// and its boundaries in one container commit, before any record of it is
// written.
#ifndef KVSTORE_RECOVERY_H_
#define KVSTORE_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "kvstore/backend.h"
#include "kvstore/frontend.h"
#include "kvstore/gleaner.h"
#include "kvstore/log_writer.h"

namespace kv {

// Reads log `i` from its committed head under the session rule (above),
// calling fn for each record accepted; returns where they end. `legacy`: a
// version 1 backend (no boundaries). Reads only.
uint64_t accepted_records(const BackendRoot& r, bool legacy, uint32_t i, const Log& log,
                          const Limits& limits,
                          const std::function<void(const Record&, uint64_t pos)>& fn);

// What lies in log `i` past `end`, where accepted_records stopped: valid
// records a session could have written where they lie (fn is called for
// each), and the last session's close mark. Reads only.
// Damage, rather than a crash's torn tail, is proven by any of: the last
// session's close mark past the end; a valid record past it written in
// order (kOpInOrder); an end short of where the last session began, since
// the open that began it made the records before that durable.
struct Beyond {
  uint64_t records = 0;   // valid records
  uint64_t first = 0;     // where the first of them is
  uint64_t mark = 0;      // where the close mark is; 0: none
  uint64_t in_order = 0;  // where the first valid record written in order is; 0: none
  uint64_t began = 0;     // where the last session began, when past the end; 0: not
  bool damaged() const { return mark != 0 || in_order != 0 || began != 0; }
};
Beyond look_beyond(const BackendRoot& r, uint32_t i, const Log& log, uint64_t end,
                   const Limits& limits,
                   const std::function<void(const Record&, uint64_t pos)>& fn = nullptr);
// The message of a log whose damage `b` proves (check and open).
std::string damaged_log_message(uint32_t i, uint64_t end, const Beyond& b);

struct Recovered {
  uint32_t session = 0;   // the new session
  uint64_t next_seq = 1;  // the next sequence number to hand out
  uint64_t records = 0;   // log records accepted
  uint64_t keys = 0;      // distinct keys in them
};

// With read_only, nothing is written: the accepted records are neither
// persisted nor followed by a new session (the store takes no updates).
// REQUIRES: logs and gleaner are new (no update ran).
Result<Recovered> recover(pm::Container* c, Backend* be, Frontend* fe, LogWriter* logs,
                          Gleaner* gleaner, const Limits& limits, bool read_only);

}  // namespace kv

#endif  // KVSTORE_RECOVERY_H_
