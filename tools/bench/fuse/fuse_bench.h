// `pm bench fuse`: pmfs (`pm mount`) against libfuse's passthrough examples
// over tmpfs and against tmpfs itself: small files (create+write+close,
// stat, open+read+close, unlink) and listings (`ls -l`, readdir + lstat)
// just after mounting and again warm. Prints the environment, the tables
// with pmfs's speed relative to passthrough, and the targets; or,
// with json, one JSON document.
#ifndef TOOLS_BENCH_FUSE_FUSE_BENCH_H_
#define TOOLS_BENCH_FUSE_FUSE_BENCH_H_

#include "bench/fuse/fuse_config.h"
#include "pm/status.h"

namespace pm::bench {

// Results go to stdout, progress to stderr (only on a terminal). Every file
// and mount is removed again, and the directory too if this run created it.
// Errors: the first mount, file system or daemon error (the run stops
// there; the daemon's log is quoted); kCorruption when a read, stat or
// listing does not return what was written.
Status run_fuse_bench(const FuseConfig& cfg, bool json);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_FUSE_FUSE_BENCH_H_
