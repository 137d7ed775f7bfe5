// A workload that drives the mount's file system operations (pmfs::Fs, the
// code behind every FUSE request, called directly: no kernel) through the
// crash harness.
#ifndef TESTS_CRASH_FUSE_WORKLOADS_H_
#define TESTS_CRASH_FUSE_WORKLOADS_H_

#include <memory>

#include "crash/crash_harness.h"

namespace pm::crash {

// Creates and rewrites of files (create, then write and close, as two
// store transactions; one in four larger than a value, so chunked),
// writes into existing files across chunks, mkdir, rmdir, unlink, renames of files and of whole
// directory trees (replacing targets), symlinks, chmod and truncate, with
// gleaning, epochs and checkpoints in between; checked against a model of
// the tree: a recovered store, indexed and walked as a fresh mount would,
// shows exactly the tree after the last acknowledged operation or after the
// one in flight (a rename moves a whole tree or nothing).
std::unique_ptr<Workload> make_fuse_workload();
// The same under kv::Durability::kAsync, the mount's default off pmem: a
// change is durable at the next sync (fsync, sync(2), or a chunked file's
// commit), so a crash may show the tree after any change since the last
// sync. Chunks dropped by a commit wait for a sync before they go.
std::unique_ptr<Workload> make_fuse_async_workload();
// The same under kv::Durability::kAsync, the mount's default off pmem: a
// change is durable at the next sync (fsync, sync(2), or a chunked file's
// commit), so a crash may show the tree after any change since the last
// sync. Chunks dropped by a commit wait for a sync before they go.

}  // namespace pm::crash

#endif  // TESTS_CRASH_FUSE_WORKLOADS_H_
