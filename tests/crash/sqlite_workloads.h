// A workload that runs SQLite on the pm VFS (examples/sqlite) through the
// crash harness.
#ifndef TESTS_CRASH_SQLITE_WORKLOADS_H_
#define TESTS_CRASH_SQLITE_WORKLOADS_H_

#include <memory>

#include "crash/crash_harness.h"

namespace pm::crash {

// A bank ledger in SQLite: transfers (two balance updates and a ledger row
// with a memo of up to two overflow pages, one transaction), transactions
// rolled back after spilling pages into the file, statements that fail
// inside a transaction, prunes of old rows (auto_vacuum shrinks the file),
// and VACUUM; journal mode, synchronous and cache size vary by session.
// Every transaction is one commit of the container. A recovered database
// must pass PRAGMA integrity_check and hold exactly the transactions
// acknowledged, or with the one in flight.
std::unique_ptr<Workload> make_sqlite_workload();

}  // namespace pm::crash

#endif  // TESTS_CRASH_SQLITE_WORKLOADS_H_
