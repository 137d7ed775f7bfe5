// FsTarget: one file system that `pm bench fuse` measures: pmfs (`pm mount`
// over a store on the bench directory), libfuse's passthrough examples
// (high-level passthrough and low-level passthrough_ll, as shipped in
// Debian's libfuse3-dev and built by CMake) over a tmpfs directory, or that
// tmpfs directory itself.
//
// A FUSE target runs its daemon as a child process in the foreground, with
// its output in a log file that errors quote; mount() returns once the
// mount point is a mount, unmount() stops it with fusermount3 -u.
//
// Thread safety: none; one thread drives a target.
#ifndef TOOLS_BENCH_FUSE_FUSE_TARGET_H_
#define TOOLS_BENCH_FUSE_FUSE_TARGET_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench/fuse/fuse_config.h"
#include "pm/status.h"

namespace pm::bench {

enum class FsKind { kPmfs, kPassthrough, kPassthroughLl, kTmpfs };

class FsTarget {
 public:
  // `work` is this target's own directory (mount point, store, daemon
  // log); `tmpfs` is the directory that the tmpfs and passthrough targets
  // share, so that a listing is written once for the three of them.
  // Errors: kNotFound when a passthrough example was not built (the
  // message says why); file system errors creating `work`.
  static Result<std::unique_ptr<FsTarget>> create(FsKind kind, const std::string& work,
                                                  const std::string& tmpfs, const FuseConfig& cfg);
  ~FsTarget();
  FsTarget(const FsTarget&) = delete;
  FsTarget& operator=(const FsTarget&) = delete;

  const std::string& name() const { return name_; }
  // Where the files are seen: through the mount, or the tmpfs directory.
  // Valid while mounted (always, for tmpfs).
  std::string root() const;

  Status mount();
  Status unmount();
  // Seconds the last mount() took from starting the daemon to a served
  // mount point (pmfs: opening the store and indexing it included).
  double mount_seconds() const { return mount_seconds_; }

  // Writes `n` files of `bytes` bytes into directory `rel` under root(),
  // behind the mount: into the store, or straight into the shared tmpfs
  // directory (which the passthrough targets then see too). REQUIRES:
  // unmounted. Names and contents are fuse_ops.h's.
  Status populate_behind(const std::string& rel, uint64_t n, uint32_t bytes);

 private:
  FsTarget(FsKind kind, std::string work, std::string tmpfs, std::string exe);
  Status wait_mounted();
  std::string log_tail() const;

  FsKind kind_;
  std::string name_, work_, mnt_, backing_, store_, log_;
  std::string exe_;  // daemon executable (FUSE kinds)
  pid_t pid_ = -1;
  double mount_seconds_ = 0;
};

const char* fs_kind_name(FsKind k);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_FUSE_FUSE_TARGET_H_
