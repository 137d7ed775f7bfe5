// Runs a test step in a forked child: for steps that need a process of
// their own (resource limits, a mount namespace, another user, signal
// handlers) or that must not take the test runner down with them.
#ifndef TESTUTIL_CHILD_H_
#define TESTUTIL_CHILD_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

namespace pm::test {

// The child's exit code (`body`'s return value), 128 + the signal's number
// when it died of one (as a shell reports it), or -1 when fork or waitpid
// failed.
inline int exit_code_in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) ::_exit(body());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace pm::test

#endif  // TESTUTIL_CHILD_H_
