#include "bench/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

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

Status decode_error(Code code, const std::string& msg) {
  switch (code) {
    case Code::kNoSpace:
      return Status::no_space(msg);
    case Code::kInvalidArgument:
      return Status::invalid_argument(msg);
    case Code::kNotFound:
      return Status::not_found(msg);
    case Code::kNotSupported:
      return Status::not_supported(msg);
    case Code::kCorruption:
      return Status::corruption(msg);
    case Code::kBusy:
      return Status::busy(msg);
    default:
      return Status::io_error(msg);
  }
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
    ::close(fds[0]);
    child_main(fds[1], fn);
  }
  ::close(fds[1]);
  std::string answer = read_all(fds[0]);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (answer.empty()) {
    return Status::io_error(WIFSIGNALED(wstatus) ? "benchmark child killed by signal " +
                                                       std::to_string(WTERMSIG(wstatus)) +
                                                       " (out of memory? try smaller sizes)"
                                                 : "benchmark child exited without an answer");
  }
  auto code = static_cast<Code>(static_cast<uint8_t>(answer[0]));
  if (code != Code::kOk) return decode_error(code, answer.substr(1));
  return answer.substr(1);
}

}  // namespace pm::bench
