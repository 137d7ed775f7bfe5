#include "bench/kv/kv_engine_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <vector>

#include "bench/common/interrupt.h"

namespace pm::bench {

namespace {

// Both sides are one binary (fork without exec): plain structs cross the
// pipe as bytes.
static_assert(std::is_trivially_copyable_v<CellResult>);
static_assert(std::is_trivially_copyable_v<CellSpec>);

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The parent's ends of the pipes to every live engine process. A child
// closes them all: holding another child's write end, it would keep that
// child from seeing the end of its requests (and the parent would wait for
// it forever).
std::vector<int>& parent_ends() {
  static std::vector<int> fds;
  return fds;
}

void copy_text(const std::string& s, char* dst, size_t cap) {
  const size_t n = std::min(s.size(), cap - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

}  // namespace

struct EngineProcess::Request {
  enum Op : char { kPrefill, kCell, kSettle } op = kPrefill;
  uint64_t keys = 0;
  CellSpec spec{};
  double seconds = 0;
};

struct EngineProcess::Reply {
  int code = 0;  // pm::Code
  char message[512] = {};
  char prefill_method[128] = {};
  CellResult cell{};

  void set(const Status& s) {
    code = static_cast<int>(s.code());
    copy_text(s.message(), message, sizeof message);
  }
  Status status() const { return Status::of(static_cast<Code>(code), message); }
};

Result<std::unique_ptr<EngineProcess>> EngineProcess::start(const Make& make,
                                                            const KeyStreams& streams) {
  int down[2], up[2];
  if (::pipe(down) != 0) return Status::from_errno("pipe to an engine process", errno);
  if (::pipe(up) != 0) {
    const int e = errno;
    ::close(down[0]);
    ::close(down[1]);
    return Status::from_errno("pipe from an engine process", e);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {down[0], down[1], up[0], up[1]}) ::close(fd);
    return Status::from_errno("fork of an engine process", e);
  }
  if (pid == 0) {
    restore_signal_defaults();
    ::close(down[1]);
    ::close(up[0]);
    for (int fd : parent_ends()) ::close(fd);
    Reply a;
    Result<std::unique_ptr<KvEngine>> e = make();
    a.set(e.status());
    if (e.ok()) copy_text((*e)->prefill_method(), a.prefill_method, sizeof a.prefill_method);
    if (!write_all(up[1], &a, sizeof a) || !e.ok()) ::_exit(0);
    std::unique_ptr<KvEngine> engine = std::move(*e);
    for (Request q; read_all(down[0], &q, sizeof q);) {
      a = Reply();
      switch (q.op) {
        case Request::kPrefill:
          a.set(engine->prefill(q.keys));
          break;
        case Request::kCell: {
          Result<CellResult> c = pm::bench::run_cell(*engine, q.spec, streams, q.seconds);
          a.set(c.status());
          if (c.ok()) a.cell = *c;
          break;
        }
        case Request::kSettle:
          a.set(engine->settle());
          break;
      }
      if (!write_all(up[1], &a, sizeof a)) break;
    }
    // The engine's destructor runs (files closed as the parent would), but
    // nothing of the parent's: no exit handlers, no flush of its buffers.
    engine.reset();
    ::_exit(0);
  }
  kill_on_interrupt(pid);
  ::close(down[0]);
  ::close(up[1]);
  parent_ends().insert(parent_ends().end(), {down[1], up[0]});
  std::unique_ptr<EngineProcess> p(new EngineProcess(pid, down[1], up[0]));
  Reply a;
  if (!read_all(p->from_, &a, sizeof a)) return Status::io_error("an engine process died at start");
  if (a.code != static_cast<int>(Code::kOk)) return a.status();
  p->prefill_method_ = a.prefill_method;
  return p;
}

EngineProcess::~EngineProcess() {
  std::erase_if(parent_ends(), [&](int fd) { return fd == to_ || fd == from_; });
  ::close(to_);
  ::close(from_);
  int st;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  forget_child(pid_);
}

Result<EngineProcess::Reply> EngineProcess::call(const Request& q) {
  Reply a;
  if (!write_all(to_, &q, sizeof q) || !read_all(from_, &a, sizeof a)) {
    return Status::io_error("the engine's process died (pid " + std::to_string(pid_) + ")");
  }
  if (a.code != static_cast<int>(Code::kOk)) return a.status();
  return a;
}

Status EngineProcess::prefill(uint64_t keys) {
  Request q;
  q.op = Request::kPrefill;
  q.keys = keys;
  return call(q).status();
}

Result<CellResult> EngineProcess::run_cell(const CellSpec& spec, double seconds) {
  Request q;
  q.op = Request::kCell;
  q.spec = spec;
  q.seconds = seconds;
  Result<Reply> a = call(q);
  if (!a.ok()) return a.status();
  return a->cell;
}

Status EngineProcess::settle() {
  Request q;
  q.op = Request::kSettle;
  return call(q).status();
}

}  // namespace pm::bench
