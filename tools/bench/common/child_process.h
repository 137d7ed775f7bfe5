// run_in_child: runs a function in a forked child process and hands its
// result back, so that the child's memory use can be measured alone (the
// glibc engine's RSS) and is returned to the system when it exits.
#ifndef TOOLS_BENCH_COMMON_CHILD_PROCESS_H_
#define TOOLS_BENCH_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "pm/status.h"

namespace pm::bench {

// Runs fn in a child; the result is fn's bytes or its error (code and
// message). Errors of its own: kIOError when fork/pipe fail or the child
// dies without answering (killed, say, by the OOM killer).
// REQUIRES: no other thread runs (fork copies only the calling one).
Result<std::string> run_in_child_bytes(const std::function<Result<std::string>()>& fn);

// run_in_child_bytes for a trivially copyable result type.
template <typename T>
Result<T> run_in_child(const std::function<Result<T>()>& fn) {
  static_assert(std::is_trivially_copyable_v<T>);
  Result<std::string> bytes = run_in_child_bytes([&fn]() -> Result<std::string> {
    Result<T> r = fn();
    if (!r.ok()) return r.status();
    return std::string(reinterpret_cast<const char*>(&*r), sizeof(T));
  });
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() != sizeof(T)) return Status::io_error("child sent a short answer");
  T out;
  std::memcpy(&out, bytes->data(), sizeof(T));
  return out;
}

// Starts args[0] (looked up in PATH) with stdout appended to the file
// `out`, and stderr too when stderr_too (else stderr stays this process's).
// The child is killed if pm bench is interrupted: whoever reaps it calls
// forget_child (interrupt.h), as run_command does.
Status spawn_command(std::vector<std::string> args, const std::string& out, bool stderr_too,
                     pid_t* pid);
// The last `n` bytes of a child's output file, for an error message (the
// file may be gone by the time the user reads it): "(no output)" if none.
std::string output_tail(const std::string& path, size_t n = 600);

// spawn_command, then waits: the exit status, 128 + signal when killed.
Result<int> run_command(std::vector<std::string> args, const std::string& out, bool stderr_too);

}  // namespace pm::bench

#endif  // TOOLS_BENCH_COMMON_CHILD_PROCESS_H_
