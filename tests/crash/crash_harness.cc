#include "crash/crash_harness.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "crash/scheduler.h"
#include "libpm/container_impl.h"
#include "libpm/journal.h"
#include "libpm/sync_point.h"
#include "testutil/temp_dir.h"

namespace pm::crash {

Options Workload::options() const {
  Options o;
  o.initial_size = 1 << 20;
  o.max_size = 1ull << 30;
  return o;
}

Status Workload::resume(Container&, CommitLog&) {
  return Status::not_supported(name() + ": no session chains");
}

Status Workload::close(CommitLog&) { return Status(); }

Status Workload::write_probe(Container& c) {
  Result<void*> p = c.alloc(64);
  if (!p.ok()) return p.status();
  c.will_write(*p, 64);
  std::memset(*p, 0x5a, 64);
  PM_TRY(c.commit());
  PM_TRY(c.free(*p));
  return c.commit();
}

Counts& Counts::operator+=(const Counts& o) {
  points += o.points;
  states += o.states;
  recovery_crashes += o.recovery_crashes;
  kills += o.kills;
  sessions += o.sessions;
  faults += o.faults;
  schedules += o.schedules;
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

std::vector<std::byte> read_file(const std::string& path) {
  std::vector<std::byte> bytes;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  std::byte buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes.insert(bytes.end(), buf, buf + n);
  ::close(fd);
  return bytes;
}

ssize_t read_full(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
    if (r <= 0) return static_cast<ssize_t>(got);
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

bool write_full(int fd, const void* buf, size_t n) {
  return ::write(fd, buf, n) == static_cast<ssize_t>(n);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull);
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ull;
}

// The file the checker recovers, kept mapped by the writer: each new image
// copies only the pages that differ from what the file holds (the previous
// image, as the checker's recovery left it). Rewriting and truncating the
// whole file cost ~350 us of system time per image; building each image in
// a new buffer first, a fifth of the harness's time.
class ImageFile {
 public:
  explicit ImageFile(std::string path) : path_(std::move(path)) {}
  ~ImageFile() { unmap(); }

  // Writes the image `sp` makes of `choice`. The checker may have changed
  // the file's length (a second crash's image, a recovery that grew it):
  // then it is cut to the image's size and mapped again.
  bool put(const SimPersist& sp, const std::vector<size_t>& choice, std::mt19937_64* rng) {
    const size_t size = sp.durable_image().size();
    struct stat st;
    const bool same = ::stat(path_.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) == size;
    if ((size != size_ || !same) && !remap(size)) return false;
    sp.write_image(choice, rng, map_);
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

// Opens the real file through a SimPersist. `durable` (may be null) is what
// had reached the disk; `opened` (may be null) receives the SimPersist.
PersistOpener sim_opener(UnitMode mode, SimPersist::Hook hook,
                         const std::vector<std::byte>* durable = nullptr,
                         std::function<void(SimPersist*)> opened = {}) {
  return [=](const std::string& path) -> Result<std::unique_ptr<Persist>> {
    Result<std::unique_ptr<Persist>> real = open_pmem_file(path);
    if (!real.ok()) return real.status();
    auto sp = std::make_unique<SimPersist>(std::move(*real), mode, hook, path, durable);
    if (opened) opened(sp.get());
    return std::unique_ptr<Persist>(std::move(sp));
  };
}

Options checker_options(const Workload& w) {
  Options o = w.options();
  o.tracker = TrackerKind::kHints;  // the checker only reads
  return o;
}

std::string describe(uint64_t d, const std::vector<uint64_t>& ok) {
  std::ostringstream m;
  m << "recovered state " << std::hex << d << " is not one of the " << std::dec << ok.size()
    << " allowed (acknowledged";
  if (!ok.empty()) m << " " << std::hex << ok[0];
  m << (ok.size() > 1 ? ", or with operations in flight)" : ")");
  return m.str();
}

// Opens a recovered image and applies the oracle; "" when it passes. With
// `probe`, the container must also accept writes.
std::string verify(Workload& w, const std::string& path, const std::vector<uint64_t>& ok,
                   const PersistOpener& opener, bool probe = false) {
  // A read-only open first: it leaves the file as it is and must see the
  // state the recovery below makes (a pending commit applied in memory).
  std::optional<uint64_t> seen_read_only;
  if (w.digest_only_reads()) {
    Options o = checker_options(w);
    o.read_only = true;
    Result<std::unique_ptr<Container>> ro = Container::open(path, o);
    if (!ro.ok()) return "read-only open failed: " + ro.status().to_string();
    seen_read_only = w.digest(**ro);
  }
  Result<std::unique_ptr<Container>> c = open_container(path, checker_options(w), false, opener);
  if (!c.ok()) return "recovery failed: " + c.status().to_string();
  CheckReport r = (*c)->check();
  if (!r.problems.empty()) return "pm check: " + r.problems.front();
  const uint64_t d = w.digest(**c);
  if (std::find(ok.begin(), ok.end(), d) == ok.end()) return describe(d, ok);
  if (seen_read_only && *seen_read_only != d) {
    std::ostringstream m;
    m << "a read-only open saw state " << std::hex << *seen_read_only << ", recovery made " << d;
    return m.str();
  }
  if (probe) {
    Status s = w.write_probe(**c);
    if (!s.ok()) return "the recovered file refuses writes: " + s.to_string();
  }
  return "";
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
  Checker(Workload& w, std::string image, UnitMode mode)
      : w_(w), image_(std::move(image)), mode_(mode) {
    start();
  }
  ~Checker() { stop(); }

  // "" when the image at image_path() passes.
  std::string check(const std::vector<uint64_t>& ok, bool recovery_crash, uint64_t seed,
                    bool* crashed_twice) {
    Request q{static_cast<uint32_t>(std::min(ok.size(), kMaxAllowed)), recovery_crash ? 1u : 0u,
              seed};
    Reply a{};
    if (!write_full(to_, &q, sizeof q) || !write_full(to_, ok.data(), q.n_ok * 8) ||
        read_full(from_, &a, sizeof a) != sizeof a) {
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
  struct Request {
    uint32_t n_ok;
    uint32_t recovery_crash;
    uint64_t seed;
  };
  struct Reply {
    uint32_t passed;
    uint32_t crashed_twice;
    char message[400];
  };

  void start() {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Forked from a scheduled actor: this process runs alone.
      sync_point::g_hook.store(nullptr);
      // Each check allocates and frees buffers of the file's size: keep
      // them in the heap rather than mapping, faulting in and unmapping
      // them again every time. 32 MiB is the largest threshold glibc takes
      // (a fixed trim threshold also ends its own adapting of it); only
      // speed depends on these.
      (void)::mallopt(M_MMAP_THRESHOLD, 32 << 20);
      (void)::mallopt(M_TRIM_THRESHOLD, 256 << 20);
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
      std::vector<uint64_t> ok(q.n_ok);
      if (read_full(in, ok.data(), q.n_ok * 8) != static_cast<ssize_t>(q.n_ok * 8)) return;
      bool crashed = false;
      std::string why = q.recovery_crash
                            ? verify_with_recovery_crash(w_, image_, ok, mode_, q.seed, &crashed)
                            : verify(w_, image_, ok, open_pmem_file);
      Reply a{};
      a.passed = why.empty();
      a.crashed_twice = crashed;
      std::snprintf(a.message, sizeof a.message, "%s", why.c_str());
      if (!write_full(out, &a, sizeof a)) return;
    }
  }

  Workload& w_;
  std::string image_;
  UnitMode mode_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

// The states a crash may recover, as the workload reports them.
class Expectations final : public CommitLog {
 public:
  using Listener = std::function<void(const std::vector<uint64_t>&)>;
  explicit Expectations(Workload& w, Listener listener = {})
      : w_(w), listener_(std::move(listener)) {}

  const std::vector<uint64_t>& allowed() const { return ok_; }

  Status commit(Container& c) override {
    return durable(w_.digest(c), [&] { return c.commit(); });
  }

  Status durable(uint64_t after, const std::function<Status()>& op) override {
    if (ok_.empty()) {  // nothing promised yet (the first commit of a new file)
      Status s = op();
      if (s.ok()) expect({after});
      return s;
    }
    std::vector<uint64_t> during = ok_;
    add(&during, after);
    expect(during);
    Status s = op();
    if (s.ok()) during = {after};
    expect(during);
    return s;
  }

  void expect(const std::vector<uint64_t>& digests) override {
    ok_ = digests;
    if (ok_.size() > kMaxAllowed) ok_.resize(kMaxAllowed);
    if (listener_) listener_(ok_);
  }

 private:
  static void add(std::vector<uint64_t>* v, uint64_t d) {
    if (std::find(v->begin(), v->end(), d) == v->end()) v->push_back(d);
  }

  Workload& w_;
  Listener listener_;
  std::vector<uint64_t> ok_;
};

// A token names one crash image: workload, unit mode, seed, steps, point, image.
std::string token(const Workload& w, const HarnessOptions& o, uint64_t point, uint64_t image) {
  std::ostringstream t;
  t << w.name() << ":" << (o.mode == UnitMode::kPmemLines ? "pmem" : "msync") << ":" << o.seed
    << ":" << o.steps << ":" << point << ":" << image;
  return t.str();
}

// Parses PM_CRASH_REPLAY: true when it names this workload, mode, seed and
// steps (a session of a chain has a seed of its own).
bool replay_target(const Workload& w, const HarnessOptions& o, uint64_t* point, uint64_t* image) {
  const char* env = std::getenv("PM_CRASH_REPLAY");
  if (env == nullptr) return false;
  std::string name, mode;
  std::istringstream in(env);
  std::getline(in, name, ':');
  std::getline(in, mode, ':');
  uint64_t seed;
  int steps;
  char c;
  if (!(in >> seed >> c >> steps >> c >> *point >> c >> *image)) return false;
  const bool msync = o.mode == UnitMode::kMsyncPages;
  return name == w.name() && mode == (msync ? "msync" : "pmem") && seed == o.seed &&
         steps == o.steps;
}

// PM_CRASH_CHAIN=<workload>:<mode>:<seed>:<steps>:<chain> runs only that
// chain (with PM_CRASH_REPLAY, to replay one image of one of its sessions).
std::string chain_token(const Workload& w, const HarnessOptions& o, int chain) {
  return w.name() + ":" + (o.mode == UnitMode::kPmemLines ? "pmem" : "msync") + ":" +
         std::to_string(o.seed) + ":" + std::to_string(o.steps) + ":" + std::to_string(chain);
}

bool chain_selected(const Workload& w, const HarnessOptions& o, int chain) {
  const char* env = std::getenv("PM_CRASH_CHAIN");
  return env == nullptr || chain_token(w, o, chain) == env;
}

enum class End { kClose, kPowerFailure, kKill };

// One session: a container opened (created, or recovered from what the
// previous session left), worked on, and ended.
struct SessionPlan {
  std::string path;
  bool create = true;
  std::vector<std::byte> durable;  // what had reached the disk; empty: the file
  std::vector<uint64_t> allowed;   // what recovery may show (a resumed session)
  End end = End::kClose;
  int end_step = 0;         // a crash ends the session at the end_point-th
  uint64_t end_point = 1;   // persistence point from the start of this step
  bool explore = true;      // crash images at every persistence point
  uint64_t fail_sync = 0;   // fault injection: this sync fails
  std::string durable_out;  // where the durable image goes at a kill or close
  int report_fd = -1;       // a child session reports here, then exits
  std::string label;        // for reports: "chain 3 session 2"
};

class Session {
 public:
  Session(Workload& w, const HarnessOptions& o, SessionPlan plan, const std::string& dir)
      : w_(w),
        o_(o),
        plan_(std::move(plan)),
        checker_(w, dir + "/image.pm", o.mode),
        image_path_(dir + "/image.pm"),
        image_(image_path_),
        log_(w) {
    replaying_ = replay_target(w, o_, &replay_point_, &replay_image_);
    end_rng_.seed(mix(o_.seed, 0xe4d));
  }

  // Runs the session (a crash ending it in a child process exits there).
  Counts run() {
    {
      std::unique_ptr<Container> c;
      work(&c);
      // Closing lets go of the SimPersist (let_go) before the counts go out.
    }
    counts_.schedules = w_.schedules();
    return counts_;
  }

  const std::vector<uint64_t>& allowed() const { return log_.allowed(); }
  bool done() const { return o_.stop_at_first_failure && counts_.failures > 0; }
  bool faulted() const { return fault_fired_ || (sim_ != nullptr && sim_->fault_fired()); }

  // A child session's end: counts and what the next session may recover.
  void report_and_exit() {
    counts_.schedules = w_.schedules();
    if (plan_.report_fd >= 0) {
      const uint64_t head[] = {counts_.points,
                               counts_.states,
                               counts_.recovery_crashes,
                               counts_.failures,
                               counts_.schedules,
                               faulted() ? 1u : 0u,
                               static_cast<uint64_t>(ended_),
                               allowed().size(),
                               counts_.reports.size()};
      bool ok = write_full(plan_.report_fd, head, sizeof head) &&
                write_full(plan_.report_fd, allowed().data(), allowed().size() * 8);
      for (const std::string& r : counts_.reports) {
        const uint64_t n = r.size();
        ok = ok && write_full(plan_.report_fd, &n, 8) && write_full(plan_.report_fd, r.data(), n);
      }
      (void)ok;
    }
    std::fflush(stdout);
    ::_exit(0);
  }

 private:
  // Opens (creates, or recovers) the container into *c, runs the steps,
  // closes what runs on it; the caller closes the container.
  void work(std::unique_ptr<Container>* c) {
    std::mt19937_64 rng(o_.seed);
    auto opener = sim_opener(
        o_.mode, [this](SimPersist& sp, const std::string& p) { at_point(sp, p); },
        plan_.durable.empty() ? nullptr : &plan_.durable, [this](SimPersist* sp) {
          sim_ = sp;
          if (plan_.fail_sync != 0) sp->fail_at(plan_.fail_sync);
          sp->on_close([this](const SimPersist& closing) { let_go(closing); });
        });
    if (!plan_.create) {
      log_.expect(plan_.allowed);
      armed_ = plan_.explore;  // recovery's own persistence points
    }
    Result<std::unique_ptr<Container>> r = open_container(plan_.path, w_.options(), plan_.create,
                                                          opener);
    if (!r.ok()) return fail_or_fault(plan_.create ? "create" : "reopen", r.status());
    *c = std::move(*r);
    Status s = plan_.create ? setup(**c, rng) : resume(**c);
    if (!s.ok()) return fail_or_fault(plan_.create ? "setup" : "resume", s);
    armed_ = plan_.explore;
    for (step_ = 0; step_ < o_.steps && !done(); step_++) {
      s = w_.step(**c, rng, log_);
      if (s.ok()) continue;
      if (!faulted()) {
        // Still closes what runs on the container before the container goes
        // (a store left open wrote to it unmapped: a segfault that hid the
        // failure). Not after a failed setup: a workload's close may need
        // what its setup makes.
        fail_or_fault("step " + std::to_string(step_), s);
        (void)w_.close(log_);
        return;
      }
      if (!w_.continues_after_failure()) break;
    }
    s = w_.close(log_);
    if (!s.ok() && !faulted()) failure(plan_.label + ": close: " + s.to_string());
  }

  Status setup(Container& c, std::mt19937_64& rng) {
    PM_TRY(w_.setup(c, rng));
    PM_TRY(c.commit());
    log_.expect({w_.digest(c)});
    return Status();
  }

  // A recovered container must show a state the previous session allowed.
  Status resume(Container& c) {
    PM_TRY(w_.resume(c, log_));
    const uint64_t d = w_.digest(c);
    if (std::find(plan_.allowed.begin(), plan_.allowed.end(), d) == plan_.allowed.end()) {
      failure(plan_.label + ": " + describe(d, plan_.allowed));
    }
    log_.expect({d});
    return Status();
  }

  void fail_or_fault(const std::string& what, const Status& s) {
    if (!faulted()) failure(plan_.label + ": " + w_.name() + ": " + what + ": " + s.to_string());
  }

  void failure(const std::string& why) {
    counts_.failures++;
    if (counts_.reports.size() < static_cast<size_t>(o_.max_reported_failures)) {
      counts_.reports.push_back(why);
    }
  }

  // The container lets go of its SimPersist (a close, or a failed open):
  // what it saw, and the durable image the session leaves behind.
  void let_go(const SimPersist& sp) {
    fault_fired_ |= sp.fault_fired();
    for (const std::string& v : sp.violations()) failure(plan_.label + ": " + v);
    if (!plan_.durable_out.empty()) (void)write_file(plan_.durable_out, sp.durable_image());
    sim_ = nullptr;
  }

  void at_point(SimPersist& sp, const std::string& name) {
    uint64_t point = ++point_;
    counts_.points++;
    if (armed_ && !done() && !(replaying_ && point != replay_point_)) explore(sp, name, point);
    if (plan_.end != End::kClose && step_ >= plan_.end_step && ++end_count_ == plan_.end_point) {
      crash(sp);
    }
  }

  // A power failure or a kill here ends the session (in a child process).
  void crash(SimPersist& sp) {
    if (plan_.end == End::kPowerFailure) {
      std::vector<size_t> counts = sp.candidate_counts();
      std::vector<size_t> choice(counts.size());
      for (size_t i = 0; i < counts.size(); i++) choice[i] = end_rng_() % counts[i];
      if (!write_file(plan_.path, sp.image(choice, &end_rng_))) failure("cannot write image");
    } else if (!write_file(plan_.durable_out, sp.durable_image())) {
      failure("cannot write the durable image");
    }
    for (const std::string& v : sp.violations()) failure(plan_.label + ": " + v);
    ended_ = plan_.end;
    report_and_exit();
  }

  void explore(SimPersist& sp, const std::string& name, uint64_t point) {
    std::vector<size_t> counts = sp.candidate_counts();
    uint64_t product = 1;
    for (size_t n : counts) product = product > o_.exhaustive_limit ? product : product * n;
    if (product <= o_.exhaustive_limit) {
      for (uint64_t k = 0; k < product && !done(); k++)
        check_image(sp, name, point, k, mixed_radix(counts, k));
      return;
    }
    const uint64_t images = 3 + static_cast<uint64_t>(o_.random_images);
    for (uint64_t k = 0; k < images && !done(); k++)
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

  // Images 0-2: nothing landed, everything landed, the versions before the
  // newest landed; then random mixes (torn pages too on the msync path).
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
    Scheduler::HarnessWork working;  // not time the workload is blocked
    std::mt19937_64 rng(mix(point, k));
    if (!image_.put(sp, choice, &rng)) {
      failure("cannot write " + image_path_);
      return;
    }
    bool recovery_crash = o_.recovery_crash_every > 0 &&
                          (counts_.states % static_cast<uint64_t>(o_.recovery_crash_every)) == 0;
    bool crashed_twice = false;
    std::string why =
        checker_.check(allowed(), recovery_crash, mix(o_.seed, counts_.states), &crashed_twice);
    counts_.states++;
    counts_.recovery_crashes += crashed_twice;
    if (replaying_) {
      for (uint64_t u : sp.volatile_units()) {
        std::fprintf(stderr, "  volatile unit at file offset %llu\n",
                     static_cast<unsigned long long>(u * sp.unit_size()));
      }
      std::fprintf(stderr, "replay %s at '%s' (%zu volatile units): %s\n",
                   token(w_, o_, point, k).c_str(), name.c_str(), choice.size(),
                   why.empty() ? "passes" : why.c_str());
    }
    if (why.empty()) return;
    failure((plan_.label.empty() ? "" : plan_.label + ": ") + "PM_CRASH_REPLAY=" +
            token(w_, o_, point, k) + " (crash at '" + name + "'): " + why);
  }

  Workload& w_;
  HarnessOptions o_;
  SessionPlan plan_;
  Checker checker_;
  std::string image_path_;
  ImageFile image_;
  Expectations log_;
  Counts counts_;
  SimPersist* sim_ = nullptr;
  bool fault_fired_ = false;
  End ended_ = End::kClose;
  bool armed_ = false;
  int step_ = -1;
  uint64_t point_ = 0, end_count_ = 0;
  std::mt19937_64 end_rng_;
  bool replaying_ = false;
  uint64_t replay_point_ = 0, replay_image_ = 0;
};

// What a child session reported.
struct SessionReport {
  bool complete = false;
  bool faulted = false;
  End ended = End::kClose;
  Counts counts;
  std::vector<uint64_t> allowed;
};

SessionReport read_report(int fd) {
  SessionReport r;
  uint64_t head[9];
  if (read_full(fd, head, sizeof head) != sizeof head) return r;
  r.counts.points = head[0];
  r.counts.states = head[1];
  r.counts.recovery_crashes = head[2];
  r.counts.failures = head[3];
  r.counts.schedules = head[4];
  r.faulted = head[5] != 0;
  r.ended = static_cast<End>(head[6]);
  r.allowed.resize(head[7]);
  if (read_full(fd, r.allowed.data(), head[7] * 8) != static_cast<ssize_t>(head[7] * 8)) return r;
  for (uint64_t i = 0; i < head[8]; i++) {
    uint64_t n;
    if (read_full(fd, &n, 8) != 8) return r;
    std::string s(n, '\0');
    if (read_full(fd, s.data(), n) != static_cast<ssize_t>(n)) return r;
    r.counts.reports.push_back(std::move(s));
  }
  r.complete = true;
  return r;
}

// Runs a session in a child process; false when the child died instead of
// reporting (the reason is added to `counts`).
bool run_child_session(Workload& w, const HarnessOptions& o, SessionPlan plan,
                       const std::string& dir, SessionReport* out) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const std::string label = plan.label;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    plan.report_fd = fds[1];
    Session s(w, o, std::move(plan), dir);
    (void)s.run();
    s.report_and_exit();
  }
  ::close(fds[1]);
  *out = read_report(fds[0]);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (out->complete && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  out->counts.failures++;
  out->counts.reports.push_back(
      label + ": the session died (" +
      (WIFSIGNALED(status) ? std::string(strsignal(WTERMSIG(status)))
                           : "exit " + std::to_string(WEXITSTATUS(status))) +
      ")");
  return false;
}

// Media damage after a clean close: one bit of the newest journal header's
// checksum flips, in the file and in what reached the disk, so the header
// reads as torn. Its sequence number and flags stay intact, so rule 3 of
// journal.h has recovery look at the older slot. A clean close marks both
// slots applied, so recovery must replay neither: the home holds both
// commits. False when the file holds no header.
bool damage_newest_header(const std::string& path, std::vector<std::byte>* disk) {
  std::vector<std::byte> file = read_file(path);
  uint64_t newest = 0, newest_seq = 0;
  for (uint64_t at : {kJournalHeaderOffset, kJournalSlot1Offset}) {
    JournalHeader h;
    if (file.size() < at + sizeof h) return false;
    std::memcpy(&h, file.data() + at, sizeof h);
    if (h.magic == kJournalMagic && h.seq > newest_seq) newest = at, newest_seq = h.seq;
  }
  if (newest_seq == 0) return false;
  const uint64_t at = newest + offsetof(JournalHeader, checksum);
  const std::byte flipped = file[at] ^ std::byte{0x10};
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::pwrite(fd, &flipped, 1, static_cast<off_t>(at)) == 1;
  ::close(fd);
  if (disk->size() > at) (*disk)[at] ^= std::byte{0x10};
  return ok;
}

Counts run_chain(Workload& w, const HarnessOptions& o, int chain, int sessions,
                 const std::string& dir) {
  Counts counts;
  std::mt19937_64 rng(mix(o.seed, static_cast<uint64_t>(chain)));
  const std::string path = dir + "/chain.pm", durable = dir + "/durable.img";
  ::unlink(path.c_str());
  std::vector<uint64_t> allowed;
  std::vector<std::byte> disk;  // what reached the disk, when it differs from the file
  std::string history;          // how the sessions so far ended
  for (int s = 0; s < sessions; s++) {
    SessionPlan plan;
    plan.path = path;
    plan.create = s == 0;
    plan.durable = disk;
    plan.allowed = allowed;
    plan.durable_out = durable;
    plan.label = "PM_CRASH_CHAIN=" + chain_token(w, o, chain) + " session " +
                 std::to_string(s + 1) + (history.empty() ? "" : " (after " + history + ")");
    const uint64_t e = rng() % 3;
    plan.end = s + 1 == sessions ? End::kClose
               : e == 0          ? End::kPowerFailure
               : e == 1          ? End::kKill
                                 : End::kClose;
    plan.end_step = o.steps / 2 + static_cast<int>(rng() % static_cast<uint64_t>(o.steps - o.steps / 2));
    plan.end_point = 1 + rng() % 12;
    HarnessOptions so = o;
    so.seed = mix(mix(o.seed, static_cast<uint64_t>(chain)), static_cast<uint64_t>(s));
    SessionReport r;
    const bool ok = run_child_session(w, so, plan, dir, &r);
    counts += r.counts;
    counts.sessions++;
    if (!ok || (o.stop_at_first_failure && counts.failures > 0)) break;
    allowed = r.allowed;
    static const char* const kEnds[] = {"a clean close", "a power failure", "a kill"};
    history += (history.empty() ? "" : ", ") + std::string(kEnds[static_cast<int>(r.ended)]);
    // A power failure wrote its image over the file; a kill or a close
    // left the file as the page cache had it and the disk image beside it.
    disk = r.ended == End::kPowerFailure ? std::vector<std::byte>() : read_file(durable);
    // About half of the clean closes (a coin of their own: the sessions'
    // ends stay where they were) are followed by a damaged newest header.
    const uint64_t coin = mix(mix(o.seed, static_cast<uint64_t>(chain)), 0xda3a6e + s);
    if (r.ended == End::kClose && s + 1 < sessions && coin % 2 == 0 &&
        damage_newest_header(path, &disk)) {
      history += " (then a damaged journal header)";
    }
  }
  return counts;
}

// CommitLog for a child that may be killed: reports each change of the
// allowed states to the parent.
void send_allowed(int fd, const std::vector<uint64_t>& ok) {
  const uint64_t n = ok.size();
  (void)(write_full(fd, &n, 8) && write_full(fd, ok.data(), n * 8));
}

[[noreturn]] void kill_child(Workload& w, const HarnessOptions& o, const std::string& path,
                             uint64_t target, int fd) {
  uint64_t seen = 0;
  auto opener = sim_opener(o.mode, [&](SimPersist&, const std::string&) {
    if (++seen == target) ::raise(SIGKILL);
  });
  std::mt19937_64 rng(o.seed);
  Expectations log(w, [fd](const std::vector<uint64_t>& ok) { send_allowed(fd, ok); });
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
  (void)w.close(log);
  c->reset();
  ::_exit(0);
}

// Persistence points and syncs of one whole run (create, setup, steps,
// close), and the first thing that failed in it ("" when nothing did).
std::string count_points(Workload& w, const HarnessOptions& o, const std::string& dir,
                         uint64_t* points, uint64_t* syncs) {
  *points = *syncs = 0;
  SimPersist* sim = nullptr;
  auto opener = sim_opener(
      o.mode, [&](SimPersist&, const std::string&) { ++*points; }, nullptr,
      [&](SimPersist* sp) { sim = sp; });
  std::mt19937_64 rng(o.seed);
  Expectations log(w);
  const std::string path = dir + "/count.pm";
  ::unlink(path.c_str());
  Result<std::unique_ptr<Container>> c = open_container(path, w.options(), true, opener);
  if (!c.ok()) return "create: " + c.status().to_string();
  std::string first;
  auto keep = [&](const std::string& what, const Status& s) {
    if (!s.ok() && first.empty()) first = what + ": " + s.to_string();
  };
  keep("setup", w.setup(**c, rng));
  keep("setup commit", (*c)->commit());
  for (int i = 0; i < o.steps; i++) keep("step " + std::to_string(i), w.step(**c, rng, log));
  keep("close", w.close(log));
  *syncs = sim->syncs();
  c->reset();
  return first;
}

}  // namespace

Counts run_power_failures(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options) {
  test::TempDir dir;
  std::unique_ptr<Workload> w = make();
  SessionPlan plan;
  plan.path = dir.path() + "/c.pm";
  return Session(*w, options, std::move(plan), dir.path()).run();
}

Counts run_once(const std::function<std::unique_ptr<Workload>()>& make,
                const HarnessOptions& options) {
  test::TempDir dir;
  std::unique_ptr<Workload> w = make();
  Counts counts;
  uint64_t syncs = 0;
  const std::string failed = count_points(*w, options, dir.path(), &counts.points, &syncs);
  if (!failed.empty()) {
    counts.failures++;
    counts.reports.push_back(w->name() + ": " + failed);
  }
  return counts;
}

Counts run_session_chains(const std::function<std::unique_ptr<Workload>()>& make,
                          const HarnessOptions& options, int chains, int sessions) {
  test::TempDir dir;
  std::unique_ptr<Workload> w = make();
  Counts counts;
  for (int i = 0; i < chains; i++) {
    if (!chain_selected(*w, options, i)) continue;
    counts += run_chain(*w, options, i, sessions, dir.path());
    if (options.stop_at_first_failure && counts.failures > 0) break;
  }
  return counts;
}

Counts run_kills(const std::function<std::unique_ptr<Workload>()>& make, const HarnessOptions& o,
                 int rounds) {
  test::TempDir dir;
  Counts counts;
  std::unique_ptr<Workload> w = make();
  uint64_t points = 0, syncs = 0;
  count_points(*w, o, dir.path(), &points, &syncs);
  if (points == 0) {
    counts.failures++;
    counts.reports.push_back(w->name() + ": dry run failed");
    return counts;
  }
  // A child's run may reach fewer points than the dry run: a store picks
  // each new thread's log from a process-wide counter, which the dry run
  // advanced, so gleaning and syncs differ (the fuse workload's children
  // reached 242 of the dry run's 307). Targets stay in the first 97% of the
  // points; a child that ends before its target lowers that bound below the
  // target, and its round is run again, so that every round kills.
  uint64_t span = std::max<uint64_t>(1, points * 97 / 100);
  for (int r = 0; r < rounds; r++) {
    const uint64_t target = 1 + (static_cast<uint64_t>(r) * 7919) % span;
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
    std::vector<uint64_t> ok;  // the last allowed states the child reported
    for (uint64_t n; read_full(fds[0], &n, 8) == 8;) {
      std::vector<uint64_t> v(n);
      if (read_full(fds[0], v.data(), n * 8) != static_cast<ssize_t>(n * 8)) break;
      ok = std::move(v);
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    counts.kills += WIFSIGNALED(status) ? 1 : 0;
    const bool short_run = WIFEXITED(status) && WEXITSTATUS(status) == 0 && target > 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      counts.failures++;
      counts.reports.push_back(w->name() + ": kill child failed with exit " +
                               std::to_string(WEXITSTATUS(status)));
      continue;
    }
    if (ok.empty()) continue;  // killed before the first commit returned: nothing promised
    std::string why = verify(*w, path, ok, open_pmem_file);
    if (!why.empty()) {
      counts.failures++;
      if (counts.reports.size() < static_cast<size_t>(o.max_reported_failures)) {
        counts.reports.push_back(w->name() + ": killed at persistence point " +
                                 std::to_string(target) + ": " + why);
      }
    }
    if (short_run) {  // checked whole above; now a target it reaches
      span = std::min(span, target - 1);
      r--;
    }
  }
  return counts;
}

Counts run_faults(const std::function<std::unique_ptr<Workload>()>& make, const HarnessOptions& o,
                  int rounds) {
  test::TempDir dir;
  Counts counts;
  std::unique_ptr<Workload> w = make();
  uint64_t points = 0, syncs = 0;
  count_points(*w, o, dir.path(), &points, &syncs);
  if (syncs == 0) {
    counts.failures++;
    counts.reports.push_back(w->name() + ": dry run failed");
    return counts;
  }
  const uint64_t n = std::min<uint64_t>(syncs, static_cast<uint64_t>(rounds));
  for (uint64_t r = 0; r < n; r++) {
    const uint64_t target = n == syncs ? r + 1 : 1 + (r * syncs) / n;
    SessionPlan plan;
    plan.path = dir.file("fault.pm");
    ::unlink(plan.path.c_str());
    plan.explore = false;
    plan.fail_sync = target;
    plan.durable_out = dir.file("fault.durable");
    plan.label = w->name() + ": sync " + std::to_string(target) + " of " + std::to_string(syncs) +
                 " failing";
    SessionReport rep;
    const bool ok = run_child_session(*w, o, plan, dir.path(), &rep);
    counts += rep.counts;
    counts.faults += rep.faulted;
    if (o.stop_at_first_failure && counts.failures > 0) break;
    if (!ok || rep.allowed.empty()) continue;  // nothing was promised
    auto check = [&](const std::string& what) {
      std::string why = verify(*w, plan.path, rep.allowed, open_pmem_file, /*probe=*/true);
      if (why.empty()) return;
      counts.failures++;
      if (counts.reports.size() < static_cast<size_t>(o.max_reported_failures)) {
        counts.reports.push_back(plan.label + ", " + what + ": " + why);
      }
    };
    const std::vector<std::byte> disk = read_file(plan.durable_out);
    check("reopened");
    // The same run, then a power failure: only what reached the disk.
    if (!disk.empty() && write_file(plan.path, disk)) check("after a power failure");
  }
  return counts;
}

}  // namespace pm::crash
