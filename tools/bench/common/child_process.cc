#include "bench/common/child_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/common/interrupt.h"

extern char** environ;

namespace pm::bench {

namespace {

// The answer on the pipe: one byte of Code, then the payload (the result's
// bytes, or the error message).
void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return s;
    s.append(buf, static_cast<size_t>(n));
  }
}

[[noreturn]] void child_main(int fd, const std::function<Result<std::string>()>& fn) {
  Result<std::string> r = fn();
  std::string answer(1, static_cast<char>(r.ok() ? Code::kOk : r.status().code()));
  answer += r.ok() ? *r : r.status().message();
  write_all(fd, answer);
  ::_exit(0);  // not exit(): the parent's atexit handlers and stdio buffers are not ours
}

}  // namespace

Result<std::string> run_in_child_bytes(const std::function<Result<std::string>()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return Status::from_errno("pipe", errno);
  std::fflush(nullptr);  // or the child would inherit (not print) unflushed output
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::from_errno("fork", err);
  }
  if (pid == 0) {
    restore_signal_defaults();
    ::close(fds[0]);
    child_main(fds[1], fn);
  }
  kill_on_interrupt(pid);
  ::close(fds[1]);
  std::string answer = read_all(fds[0]);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  forget_child(pid);
  if (answer.empty()) {
    return Status::io_error(WIFSIGNALED(wstatus) ? "benchmark child killed by signal " +
                                                       std::to_string(WTERMSIG(wstatus)) +
                                                       " (out of memory? try smaller sizes)"
                                                 : "benchmark child exited without an answer");
  }
  auto code = static_cast<Code>(static_cast<uint8_t>(answer[0]));
  if (code != Code::kOk) return Status::of(code, answer.substr(1));
  return answer.substr(1);
}

Status spawn_command(std::vector<std::string> args, const std::string& out, bool stderr_too,
                     pid_t* pid) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  if (stderr_too) posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int err = posix_spawnp(pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return Status::from_errno("start " + args[0], err);
  kill_on_interrupt(*pid);
  return Status();
}

std::string output_tail(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > n) s = "..." + s.substr(s.size() - n);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.empty() ? "(no output)" : s;
}

Result<int> run_command(std::vector<std::string> args, const std::string& out, bool stderr_too) {
  const std::string what = args[0];
  pid_t pid;
  PM_TRY(spawn_command(std::move(args), out, stderr_too, &pid));
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR) return Status::from_errno("wait for " + what, errno);
  }
  forget_child(pid);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

}  // namespace pm::bench
