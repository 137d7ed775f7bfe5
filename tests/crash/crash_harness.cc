#include "crash/crash_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "libpm/container_impl.h"
#include "testutil/temp_dir.h"

namespace pm::crash {

Options Workload::options() const {
  Options o;
  o.initial_size = 1 << 20;
  o.max_size = 1ull << 30;
  return o;
}

Counts& Counts::operator+=(const Counts& o) {
  points += o.points;
  states += o.states;
  recovery_crashes += o.recovery_crashes;
  kills += o.kills;
  failures += o.failures;
  reports.insert(reports.end(), o.reports.begin(), o.reports.end());
  return *this;
}

namespace {

bool write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  return ok;
}

// The file the checker recovers, kept mapped by the writer: each new image
// copies only the pages that differ from what the file holds (the previous
// image, as the checker's recovery left it). Rewriting and truncating the
// whole file cost ~350 us of system time per image.
class ImageFile {
 public:
  explicit ImageFile(std::string path) : path_(std::move(path)) {}
  ~ImageFile() { unmap(); }

  bool put(const std::vector<std::byte>& img) {
    if (img.size() != size_ && !remap(img.size())) return false;
    for (size_t off = 0; off < size_; off += 4096) {
      size_t n = std::min<size_t>(4096, size_ - off);
      if (std::memcmp(map_ + off, img.data() + off, n) != 0)
        std::memcpy(map_ + off, img.data() + off, n);
    }
    return true;
  }

 private:
  bool remap(size_t size) {
    unmap();
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (fd >= 0) ::close(fd);
      return false;
    }
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return false;
    map_ = static_cast<std::byte*>(p);
    size_ = size;
    return true;
  }
  void unmap() {
    if (map_ != nullptr) ::munmap(map_, size_);
    map_ = nullptr;
    size_ = 0;
  }

  std::string path_;
  std::byte* map_ = nullptr;
  size_t size_ = 0;
};

PersistOpener sim_opener(UnitMode mode, SimPersist::Hook hook) {
  return [mode, hook](const std::string& path) -> Result<std::unique_ptr<Persist>> {
    Result<std::unique_ptr<Persist>> real = open_pmem_file(path);
    if (!real.ok()) return real.status();
    return std::unique_ptr<Persist>(new SimPersist(std::move(*real), mode, hook));
  };
}

Options checker_options(const Workload& w) {
  Options o = w.options();
  o.tracker = TrackerKind::kHints;  // the checker only reads
  return o;
}

// Opens a recovered image and applies the oracle; "" when it passes.
std::string verify(Workload& w, const std::string& path, const std::vector<uint64_t>& ok,
                   const PersistOpener& opener) {
  Result<std::unique_ptr<Container>> c = open_container(path, checker_options(w), false, opener);
  if (!c.ok()) return "recovery failed: " + c.status().to_string();
  CheckReport r = (*c)->check();
  if (!r.problems.empty()) return "pm check: " + r.problems.front();
  uint64_t d = w.digest(**c);
  for (uint64_t x : ok) {
    if (x == d) return "";
  }
  std::ostringstream m;
  m << "recovered state " << std::hex << d << " is neither the acknowledged commit (" << ok[0]
    << ")";
  if (ok.size() > 1) m << " nor the one in flight (" << ok[1] << ")";
  return m.str();
}

// Recovers `path` while a second power failure strikes at the target-th
// persistence point of the recovery, then recovers that image. Returns ""
// when both pass (or recovery had no persistence point to crash at).
std::string verify_with_recovery_crash(Workload& w, const std::string& path,
                                       const std::vector<uint64_t>& ok, UnitMode mode,
                                       uint64_t seed, bool* crashed) {
  std::vector<std::byte> second;
  int seen = 0;
  const int target = 1 + static_cast<int>(seed % 4);
  std::mt19937_64 rng(seed);
  auto hook = [&](SimPersist& sp, const std::string&) {
    if (++seen != target) return;
    std::vector<size_t> counts = sp.candidate_counts();
    std::vector<size_t> choice(counts.size());
    for (size_t i = 0; i < counts.size(); i++) choice[i] = rng() % counts[i];
    second = sp.image(choice, &rng);
  };
  std::string first = verify(w, path, ok, sim_opener(mode, hook));
  if (!first.empty()) return first;
  if (second.empty()) return "";
  *crashed = true;
  if (!write_file(path, second)) return "cannot write image";
  std::string again = verify(w, path, ok, open_pmem_file);
  if (!again.empty()) return "after a crash during recovery: " + again;
  return "";
}

// The checker process: recovers images written by the parent.
class Checker {
 public:
  struct Request {
    uint64_t ok[2];
    uint32_t n_ok;
    uint32_t recovery_crash;
    uint64_t seed;
  };
  struct Reply {
    uint32_t passed;
    uint32_t crashed_twice;
    char message[400];
  };

  Checker(Workload& w, std::string image, UnitMode mode)
      : w_(w), image_(std::move(image)), mode_(mode) {
    start();
  }
  ~Checker() { stop(); }

  // "" when the image at image_path() passes.
  std::string check(const std::vector<uint64_t>& ok, bool recovery_crash, uint64_t seed,
                    bool* crashed_twice) {
    Request q{{ok[0], ok.size() > 1 ? ok[1] : ok[0]},
              static_cast<uint32_t>(ok.size()),
              recovery_crash ? 1u : 0u,
              seed};
    Reply a{};
    if (::write(to_, &q, sizeof q) != sizeof q || read_full(from_, &a, sizeof a) != sizeof a) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      stop();
      start();  // a planted bug may crash recovery itself
      return "recovery crashed the process (" +
             std::string(WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited") + ")";
    }
    *crashed_twice = a.crashed_twice != 0;
    return a.passed ? "" : std::string(a.message);
  }

 private:
  static ssize_t read_full(int fd, void* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
      if (r <= 0) return static_cast<ssize_t>(got);
      got += static_cast<size_t>(r);
    }
    return static_cast<ssize_t>(got);
  }

  void start() {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(down[1]);
      ::close(up[0]);
      serve(down[0], up[1]);
      ::_exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    to_ = down[1];
    from_ = up[0];
  }

  void stop() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void serve(int in, int out) {
    Request q;
    while (read_full(in, &q, sizeof q) == sizeof q) {
      std::vector<uint64_t> ok(q.ok, q.ok + q.n_ok);
      bool crashed = false;
      std::string why = q.recovery_crash
                            ? verify_with_recovery_crash(w_, image_, ok, mode_, q.seed, &crashed)
                            : verify(w_, image_, ok, open_pmem_file);
      Reply a{};
      a.passed = why.empty();
      a.crashed_twice = crashed;
      std::snprintf(a.message, sizeof a.message, "%s", why.c_str());
      if (::write(out, &a, sizeof a) != sizeof a) return;
    }
  }

  Workload& w_;
  std::string image_;
  UnitMode mode_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull);
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ull;
}

// A token names one crash image: workload, unit mode, seed, steps, point, image.
std::string token(const Workload& w, const HarnessOptions& o, uint64_t point, uint64_t image) {
  std::ostringstream t;
  t << w.name() << ":" << (o.mode == UnitMode::kPmemLines ? "pmem" : "msync") << ":" << o.seed
    << ":" << o.steps << ":" << point << ":" << image;
  return t.str();
}

// Parses PM_CRASH_REPLAY for this workload; false when it names another.
bool replay_target(const Workload& w, HarnessOptions* o, uint64_t* point, uint64_t* image) {
  const char* env = std::getenv("PM_CRASH_REPLAY");
  if (env == nullptr) return false;
  std::string name, mode;
  std::istringstream in(env);
  std::getline(in, name, ':');
  std::getline(in, mode, ':');
  char c;
  if (name != w.name() || !(in >> o->seed >> c >> o->steps >> c >> *point >> c >> *image)) {
    return false;
  }
  o->mode = mode == "msync" ? UnitMode::kMsyncPages : UnitMode::kPmemLines;
  return true;
}

class PowerFailureRun final : public CommitLog {
 public:
  PowerFailureRun(Workload& w, const HarnessOptions& o, const std::string& dir)
      : w_(w),
        o_(o),
        path_(dir + "/c.pm"),
        checker_(w, dir + "/image.pm", o.mode),
        image_path_(dir + "/image.pm"),
        image_(image_path_) {
    replaying_ = replay_target(w, &o_, &replay_point_, &replay_image_);
  }

  Counts run() {
    std::mt19937_64 rng(o_.seed);
    auto opener =
        sim_opener(o_.mode, [this](SimPersist& sp, const std::string& p) { at_point(sp, p); });
    Result<std::unique_ptr<Container>> c = open_container(path_, w_.options(), true, opener);
    if (!c.ok()) return fail_setup(c.status());
    Status s = w_.setup(**c, rng);
    if (s.ok()) s = (*c)->commit();
    if (!s.ok()) return fail_setup(s);
    acked_ = w_.digest(**c);
    ok_ = {acked_};
    armed_ = true;
    for (int i = 0; i < o_.steps && s.ok(); i++) s = w_.step(**c, rng, *this);
    if (!s.ok()) return fail_setup(s);
    c->reset();  // close: its persistence points are checked too
    return counts_;
  }

  Status commit(Container& c) override {
    return durable(w_.digest(c), [&] { return c.commit(); });
  }

  Status durable(uint64_t after, const std::function<Status()>& op) override {
    ok_ = {acked_, after};
    Status s = op();
    if (s.ok()) acked_ = after;
    ok_ = {acked_};
    return s;
  }

 private:
  Counts fail_setup(const Status& s) {
    counts_.failures++;
    counts_.reports.push_back(w_.name() + ": workload failed: " + s.to_string());
    return counts_;
  }

  void at_point(SimPersist& sp, const std::string& name) {
    uint64_t point = ++point_;
    counts_.points++;
    if (!armed_ || (replaying_ && point != replay_point_)) return;
    std::vector<size_t> counts = sp.candidate_counts();
    uint64_t product = 1;
    for (size_t n : counts) product = product > o_.exhaustive_limit ? product : product * n;
    if (product <= o_.exhaustive_limit) {
      for (uint64_t k = 0; k < product; k++)
        check_image(sp, name, point, k, mixed_radix(counts, k));
      return;
    }
    const uint64_t images = 3 + static_cast<uint64_t>(o_.random_images);
    for (uint64_t k = 0; k < images; k++)
      check_image(sp, name, point, k, sampled(counts, point, k));
  }

  static std::vector<size_t> mixed_radix(const std::vector<size_t>& counts, uint64_t k) {
    std::vector<size_t> choice(counts.size());
    for (size_t i = 0; i < counts.size(); i++) {
      choice[i] = k % counts[i];
      k /= counts[i];
    }
    return choice;
  }

  // Images 0-2: nothing landed, everything landed, the flushed versions
  // landed; then random mixes (torn pages too on the msync path).
  std::vector<size_t> sampled(const std::vector<size_t>& counts, uint64_t point, uint64_t k) {
    std::vector<size_t> choice(counts.size());
    std::mt19937_64 rng(mix(mix(o_.seed, point), k));
    for (size_t i = 0; i < counts.size(); i++) {
      const size_t live = counts[i] - 1;
      switch (k) {
        case 0:
          choice[i] = 0;
          break;
        case 1:
          choice[i] = live;
          break;
        case 2:
          choice[i] = live > 1 ? live - 1 : 0;
          break;
        default:
          choice[i] =
              (o_.mode == UnitMode::kMsyncPages && rng() % 4 == 0) ? counts[i] : rng() % counts[i];
      }
    }
    return choice;
  }

  void check_image(SimPersist& sp, const std::string& name, uint64_t point, uint64_t k,
                   const std::vector<size_t>& choice) {
    if (replaying_ && k != replay_image_) return;
    std::mt19937_64 rng(mix(point, k));
    if (!image_.put(sp.image(choice, &rng))) {
      counts_.failures++;
      counts_.reports.push_back("cannot write " + image_path_);
      return;
    }
    bool recovery_crash = o_.recovery_crash_every > 0 &&
                          (counts_.states % static_cast<uint64_t>(o_.recovery_crash_every)) == 0;
    bool crashed_twice = false;
    std::string why =
        checker_.check(ok_, recovery_crash, mix(o_.seed, counts_.states), &crashed_twice);
    counts_.states++;
    counts_.recovery_crashes += crashed_twice;
    if (replaying_) {
      std::fprintf(stderr, "replay %s at '%s' (%zu volatile units): %s\n",
                   token(w_, o_, point, k).c_str(), name.c_str(), choice.size(),
                   why.empty() ? "passes" : why.c_str());
    }
    if (why.empty()) return;
    counts_.failures++;
    if (counts_.reports.size() < static_cast<size_t>(o_.max_reported_failures)) {
      counts_.reports.push_back("PM_CRASH_REPLAY=" + token(w_, o_, point, k) + " (crash at '" +
                                name + "'): " + why);
    }
  }

  Workload& w_;
  HarnessOptions o_;
  std::string path_;
  Checker checker_;
  std::string image_path_;
  ImageFile image_;
  Counts counts_;
  uint64_t acked_ = 0;
  std::vector<uint64_t> ok_;
  bool armed_ = false;
  uint64_t point_ = 0;
  bool replaying_ = false;
  uint64_t replay_point_ = 0, replay_image_ = 0;
};

// CommitLog for a child that may be killed: reports each digest to the parent.
class PipeLog final : public CommitLog {
 public:
  PipeLog(Workload& w, int fd) : w_(w), fd_(fd) {}
  Status commit(Container& c) override {
    return durable(w_.digest(c), [&] { return c.commit(); });
  }
  Status durable(uint64_t after, const std::function<Status()>& op) override {
    report('B', after);
    Status s = op();
    if (s.ok()) report('A', after);
    return s;
  }
  void report(char kind, uint64_t d) {
    last_ = d;
    char msg[9];
    msg[0] = kind;
    std::memcpy(msg + 1, &d, 8);
    (void)!::write(fd_, msg, sizeof msg);
  }

 private:
  Workload& w_;
  int fd_;
  uint64_t last_ = 0;
};

[[noreturn]] void kill_child(Workload& w, const HarnessOptions& o, const std::string& path,
                             uint64_t target, int fd) {
  uint64_t seen = 0;
  auto opener = sim_opener(o.mode, [&](SimPersist&, const std::string&) {
    if (++seen == target) ::raise(SIGKILL);
  });
  std::mt19937_64 rng(o.seed);
  PipeLog log(w, fd);
  Result<std::unique_ptr<Container>> c = open_container(path, w.options(), true, opener);
  if (!c.ok()) ::_exit(3);
  if (!w.setup(**c, rng).ok()) ::_exit(4);
  if (!log.commit(**c).ok()) ::_exit(5);
  for (int i = 0; i < o.steps; i++) {
    Status s = w.step(**c, rng, log);
    if (!s.ok()) {
      std::fprintf(stderr, "kill child: step %d: %s\n", i, s.to_string().c_str());
      ::_exit(6);
    }
  }
  c->reset();
  ::_exit(0);
}

// Persistence points of one whole run (create, setup, steps, close).
uint64_t count_points(Workload& w, const HarnessOptions& o, const std::string& dir) {
  uint64_t n = 0;
  auto opener = sim_opener(o.mode, [&](SimPersist&, const std::string&) { n++; });
  std::mt19937_64 rng(o.seed);
  struct NoLog : CommitLog {
    Status commit(Container& c) override { return c.commit(); }
    Status durable(uint64_t, const std::function<Status()>& op) override { return op(); }
  } log;
  Result<std::unique_ptr<Container>> c =
      open_container(dir + "/count.pm", w.options(), true, opener);
  if (!c.ok()) return 0;
  (void)w.setup(**c, rng);
  (void)(*c)->commit();
  for (int i = 0; i < o.steps; i++) (void)w.step(**c, rng, log);
  c->reset();
  return n;
}

}  // namespace

Counts run_power_failures(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options) {
  test::TempDir dir;
  std::unique_ptr<Workload> w = make();
  return PowerFailureRun(*w, options, dir.path()).run();
}

Counts run_kills(const std::function<std::unique_ptr<Workload>()>& make, const HarnessOptions& o,
                 int rounds) {
  test::TempDir dir;
  Counts counts;
  std::unique_ptr<Workload> w = make();
  const uint64_t points = count_points(*w, o, dir.path());
  if (points == 0) {
    counts.failures++;
    counts.reports.push_back(w->name() + ": dry run failed");
    return counts;
  }
  for (int r = 0; r < rounds; r++) {
    const uint64_t target = 1 + (static_cast<uint64_t>(r) * 7919) % points;
    const std::string path = dir.file("kill.pm");
    ::unlink(path.c_str());
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      kill_child(*w, o, path, target, fds[1]);
    }
    ::close(fds[1]);
    std::vector<uint64_t> ok;  // last acknowledged, then the one in flight
    uint64_t acked = 0, begun = 0;
    bool any_ack = false, in_flight = false;
    char msg[9];
    while (::read(fds[0], msg, 9) == 9) {
      uint64_t d;
      std::memcpy(&d, msg + 1, 8);
      if (msg[0] == 'B') {
        begun = d;
        in_flight = true;
      } else {
        acked = d;
        any_ack = true;
        in_flight = false;
      }
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    counts.kills += WIFSIGNALED(status) ? 1 : 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      counts.failures++;
      counts.reports.push_back(w->name() + ": kill child failed with exit " +
                               std::to_string(WEXITSTATUS(status)));
      continue;
    }
    if (!any_ack) continue;  // killed before the first commit returned: nothing promised
    ok = {acked};
    if (in_flight) ok.push_back(begun);
    std::string why = verify(*w, path, ok, open_pmem_file);
    if (!why.empty()) {
      counts.failures++;
      if (counts.reports.size() < static_cast<size_t>(o.max_reported_failures)) {
        counts.reports.push_back(w->name() + ": killed at persistence point " +
                                 std::to_string(target) + ": " + why);
      }
    }
  }
  return counts;
}

}  // namespace pm::crash
