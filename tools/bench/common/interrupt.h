// What `pm bench` undoes when it is interrupted (SIGINT, SIGTERM, SIGHUP):
// a run cut short stops the servers and daemons it started, unmounts its
// mounts (a FUSE passthrough left mounted mirrors the root file system
// inside the bench directory) and removes the directories it made, then
// dies of the signal. A user trial found every suite leaving hundreds of MB
// on /dev/shm after Ctrl-C, and servers and a mount still running.
//
// The handler only writes the signal to a pipe; a thread of its own does
// the work, outside the handler. Registrations are cheap (a mutex and a
// vector) and are dropped again when the thing is gone.
#ifndef TOOLS_BENCH_COMMON_INTERRUPT_H_
#define TOOLS_BENCH_COMMON_INTERRUPT_H_

#include <sys/types.h>

#include <string>

namespace pm::bench {

// Once, before any thread or child is started.
void install_interrupt_cleanup();

// A child to kill (SIGTERM, then SIGKILL after a second) on interrupt.
void kill_on_interrupt(pid_t pid);
void forget_child(pid_t pid);
// A mount point to unmount (fusermount3 -uz) on interrupt.
void unmount_on_interrupt(const std::string& mnt);
void forget_mount(const std::string& mnt);
// A directory of this run's own, removed whole on interrupt (after the
// mounts), then its parents up to `top` while empty ("" for none).
void remove_on_interrupt(const std::string& dir, const std::string& top);
void forget_dir(const std::string& dir);

// The signals this module handles back to their default dispositions: in
// a child forked without exec, so that a signal meant for the child does
// not start the parent's cleanup; and when the cleanup starts, so that a
// second Ctrl-C ends the process at once. (Ignored signals stay ignored.)
void restore_signal_defaults();

// Removes `dir` and everything below it on the same file system: it never
// descends into a mount point (what `rm -rf --one-file-system` does) and
// follows no symbolic link.
void remove_tree(const std::string& dir);
// Removes `dir` if empty, then its parents up to `top` while empty.
void remove_empty_up_to(const std::string& dir, const std::string& top);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_INTERRUPT_H_
