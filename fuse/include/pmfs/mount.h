// pmfs::mount: a kv::Store mounted as a file system (libfuse3, low-level
// API). The key "a/b/c" is the file c in the directory a/b; docs/fuse.md
// has the key mapping, the metadata encoding and what is not POSIX.
//
// Thread safety: mount() may be called from one thread at a time per mount
// point; it runs its own worker threads.
#ifndef PMFS_MOUNT_H_
#define PMFS_MOUNT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "pm/status.h"

namespace pmfs {

struct MountOptions {
  // The store file (a kv::Store container) and the directory to mount on.
  std::string store_path;
  std::string mountpoint;

  // Creation of a missing store (ignored when it exists). A file up to the
  // value limit is one value; a larger one is stored in chunks (of the
  // value limit, at most 1 MiB) under a manifest, which is one value too:
  // that bounds a file to (value limit / 8) chunks, 128 GiB by default. A
  // value must fit in a quarter of a log (kv::StoreOptions).
  bool create_if_missing = true;
  int logs = 8;
  uint64_t log_bytes = 8ull << 20;
  uint32_t max_key_bytes = 1024;
  uint32_t max_value_bytes = 1u << 20;
  // The heap made at create (it grows as needed): a small one fits a small
  // disk (kv::StoreOptions::initial_heap_bytes).
  uint64_t initial_heap_bytes = 64ull << 20;
  // The largest file, when smaller than what the store allows: a write or
  // truncate past it gets EFBIG. 0: what the store allows.
  uint64_t max_file_bytes = 0;
  // A directory rename moves every key below it; when they exceed this
  // many bytes it takes several transactions (atomic all the same: see
  // docs/fuse.md). 0: half the store's largest transaction. For tests.
  uint64_t rename_step_bytes = 0;

  // When a change (close() of a written file, create, rename, remove...)
  // is durable. false (kv::Durability::kSyncOnPmem): at once on pmem, where
  // it costs one cache-flush barrier; on other file systems at fsync or
  // within kv::StoreOptions::async_sync_ms (10 ms), as on a local file
  // system (a crash keeps a prefix of each log, every change whole).
  // true (kSync): before it returns there too, an msync per change (shared
  // by concurrent ones), taken while the mount's change lock is held.
  bool sync_every_change = false;

  // Let users other than the mounting one in (-o allow_other; needs
  // user_allow_other in /etc/fuse.conf unless root). The kernel checks
  // permissions from the stored mode, uid and gid (default_permissions).
  bool allow_other = false;
  // Generic mount options for the kernel, comma-separated (the FUSE mount
  // passes them on as mount(8) would): ro, rw, nosuid, suid, nodev, dev,
  // noexec, exec, nodiratime, dirsync, noatime (reads never change atime
  // here, so the mount is noatime whatever this says). ro: the kernel
  // refuses every change (EROFS); the store itself is still opened for
  // writing (its recovery, the mount's clean-end mark). Others:
  // kInvalidArgument.
  std::string kernel_options;
  // Per-request log lines through fuse_log (stderr in the foreground).
  bool debug = false;
  // How long to wait for a store another process holds (a daemon still
  // exiting after fusermount3 -u returned, a pm command), in seconds.
  double wait_seconds = 5;
  // Index every key at mount (one scan of the whole store) instead of
  // each directory at its first use. A store without an ordered index, one
  // holding hard links (a file's link count needs every name), and one whose
  // last mount did not end cleanly (its unused chunks are swept) are
  // indexed at mount whatever this says (docs/fuse.md, "The index").
  bool index_at_mount = false;
  // Worker threads of the session loop (at most).
  unsigned max_threads = 8;
  // DRAM the store may keep of what it has committed (kv::StoreOptions::
  // dram_budget_bytes: cached values, and the private copies of committed
  // backend pages, each up to this). Besides it: the content of open files
  // being written (up to 16 MiB each, then staged in the store). 0: no
  // limit, as a kv::Store's default, which holds every value ever written.
  uint64_t dram_budget_bytes = 256ull << 20;

  // Called once the file system is mounted and serving, before mount()
  // blocks in its loop: a daemonizing caller reports success here.
  std::function<void()> on_ready;
};

// Opens the store, prepares the directory index, mounts and
// serves requests until the file system is unmounted (`fusermount3 -u`,
// `umount`) or the process gets SIGINT, SIGTERM or SIGHUP; then unmounts
// and closes the store. OK after a clean unmount.
// Errors before serving: kInvalidArgument (mount point is not an empty-able
// directory, bad options), the store's open errors (kNotFound, kBusy,
// kCorruption), kIOError (the kernel refused the mount: no /dev/fuse, not
// permitted). The message names the path and what to do.
pm::Status mount(const MountOptions& options);

// kInvalidArgument naming the first option of `kernel_options`
// (MountOptions) that is not one of those listed there.
pm::Status check_kernel_options(const std::string& kernel_options);

// Sends the mount's log lines (fuse_log) to syslog instead of stderr, for a
// daemon whose stderr is gone.
void log_to_syslog();

}  // namespace pmfs

#endif  // PMFS_MOUNT_H_
