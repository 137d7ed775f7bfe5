#include "bench/memcached/memcached_bench.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/common/child_process.h"
#include "bench/common/dir_cleanup.h"
#include "bench/common/interrupt.h"
#include "bench/common/environment.h"
#include "bench/kv/kv_workload.h"
#include "bench/common/report.h"

namespace pm::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kValueBytes = 100;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string key_of(uint64_t i) { return fmt::format("key:{:012d}", i); }  // 16 bytes

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads the replies to `ops` (true: a set) from fd; counts get hits.
bool read_replies(int fd, const std::vector<bool>& ops, std::string* buf, uint64_t* hits) {
  size_t pos = 0, next = 0;
  char chunk[65536];
  while (next < ops.size()) {
    // Parse what is complete.
    for (;;) {
      if (next == ops.size()) break;
      const size_t eol = buf->find("\r\n", pos);
      if (eol == std::string::npos) break;
      std::string_view line(buf->data() + pos, eol - pos);
      if (ops[next]) {
        if (line != "STORED") return false;
        pos = eol + 2;
        next++;
        continue;
      }
      if (line == "END") {
        pos = eol + 2;
        next++;
        continue;
      }
      if (!line.starts_with("VALUE ")) return false;
      const size_t bytes = std::strtoull(line.data() + line.rfind(' ') + 1, nullptr, 10);
      if (buf->size() < eol + 2 + bytes + 2 + 5) break;
      pos = eol + 2 + bytes + 2 + 5;  // data, CRLF, END CRLF
      (*hits)++;
      next++;
    }
    if (next == ops.size()) break;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf->append(chunk, static_cast<size_t>(n));
  }
  buf->erase(0, pos);
  return true;
}

struct Server {
  std::string name;
  std::vector<std::string> argv;
  bool pmem_env = false;  // PMEM_IS_PMEM_FORCE=1 for it
  bool ours = false;      // pmcached (has a store, survives restarts)
  std::string log;
  int port = 0;
  pid_t pid = -1;
};

Status start(Server* s) {
  const char* old = std::getenv("PMEM_IS_PMEM_FORCE");
  const std::string saved = old ? old : "";
  if (s->pmem_env) {
    ::setenv("PMEM_IS_PMEM_FORCE", "1", 1);
  } else {
    ::unsetenv("PMEM_IS_PMEM_FORCE");
  }
  Status st = spawn_command(s->argv, s->log, true, &s->pid);
  if (old) {
    ::setenv("PMEM_IS_PMEM_FORCE", saved.c_str(), 1);
  } else {
    ::unsetenv("PMEM_IS_PMEM_FORCE");
  }
  return st;
}

// Waits until a get of `probe` answers (a hit when `hit`); seconds taken.
Result<double> first_reply(Server* s, Clock::time_point t0, const std::string& probe, bool hit) {
  const std::string req = "get " + probe + "\r\n";
  while (since(t0) < 60) {
    int ws;
    if (::waitpid(s->pid, &ws, WNOHANG) == s->pid) {
      forget_child(s->pid);
      s->pid = -1;
      return Status::io_error(s->name + " exited at start: " + output_tail(s->log));
    }
    int fd = connect_to(s->port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    std::string buf;
    uint64_t hits = 0;
    const bool ok = send_all(fd, req) && read_replies(fd, {false}, &buf, &hits);
    ::close(fd);
    if (ok && (hits == 1 || !hit)) return since(t0);
    if (!ok) return Status::io_error(s->name + ": a get failed");
  }
  return Status::io_error(s->name + " did not answer within 60 s");
}

void stop(Server* s, int sig) {
  if (s->pid <= 0) return;
  ::kill(s->pid, sig);
  int ws;
  while (::waitpid(s->pid, &ws, 0) < 0 && errno == EINTR) {
  }
  forget_child(s->pid);
  s->pid = -1;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string all((std::istreambuf_iterator<char>(in)), {});
  const size_t rp = all.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream f(all.substr(rp + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && f >> field; i++) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct Measured {
  double ops_s = 0, p50 = 0, p99 = 0, p999 = 0, cpu_us = 0, hit_ratio = 0;
};

// One measured run: client threads, each with its connections, send
// batches of `depth` requests and read the replies; a sample is one batch's
// round trip.
Result<Measured> run_cell(Server* s, const MemcachedConfig& cfg, const Zipfian* zipf, int set_pct,
                      double seconds, uint64_t seed) {
  std::atomic<uint64_t> ops{0}, gets{0}, hits{0};
  std::atomic<bool> failed{false};
  std::vector<std::vector<double>> lat(static_cast<size_t>(cfg.client_threads));
  const std::string value(kValueBytes, 'v');
  const double cpu0 = cpu_seconds(s->pid);
  const auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < cfg.client_threads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(t));
      std::uniform_real_distribution<double> u(0, 1);
      const int nconn = std::max(1, cfg.connections / cfg.client_threads);
      std::vector<int> fds;
      for (int c = 0; c < nconn; c++) fds.push_back(connect_to(s->port));
      std::vector<std::string> bufs(fds.size());
      std::vector<std::vector<bool>> kinds(fds.size());
      std::vector<Clock::time_point> sent(fds.size());
      std::string req;
      uint64_t my_ops = 0, my_gets = 0, my_hits = 0;
      while (!failed && since(t0) < seconds) {
        for (size_t c = 0; c < fds.size(); c++) {
          req.clear();
          kinds[c].clear();
          for (int d = 0; d < cfg.depth; d++) {
            const uint64_t rank = zipf ? zipf->rank(u(rng)) : rng() % cfg.keys;
            const uint64_t k = zipf ? (rank * 0x9E3779B97F4A7C15ull) % cfg.keys : rank;
            const bool set = static_cast<int>(rng() % 100) < set_pct;
            kinds[c].push_back(set);
            if (set) {
              req += fmt::format("set {} 0 0 {}\r\n{}\r\n", key_of(k), kValueBytes, value);
            } else {
              req += "get " + key_of(k) + "\r\n";
            }
          }
          sent[c] = Clock::now();
          if (fds[c] < 0 || !send_all(fds[c], req)) failed = true;
        }
        for (size_t c = 0; c < fds.size() && !failed; c++) {
          if (!read_replies(fds[c], kinds[c], &bufs[c], &my_hits)) failed = true;
          lat[static_cast<size_t>(t)].push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - sent[c]).count());
          my_ops += kinds[c].size();
          for (bool k : kinds[c]) my_gets += !k;
        }
      }
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
      ops += my_ops;
      gets += my_gets;
      hits += my_hits;
    });
  }
  for (auto& t : ts) t.join();
  const double secs = since(t0);
  if (failed) return Status::io_error(s->name + ": a request failed; see " + s->log);
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  Measured c;
  c.ops_s = static_cast<double>(ops) / secs;
  c.p50 = percentile(all, 50);
  c.p99 = percentile(all, 99);
  c.p999 = percentile(all, 99.9);
  c.cpu_us = ops > 0 ? (cpu_seconds(s->pid) - cpu0) * 1e6 / static_cast<double>(ops) : 0;
  c.hit_ratio = gets > 0 ? static_cast<double>(hits) / static_cast<double>(gets) : 0;
  return c;
}

Status preload(Server* s, uint64_t keys) {
  const std::string value(kValueBytes, 'v');
  int fd = connect_to(s->port);
  if (fd < 0) return Status::io_error(s->name + ": cannot connect");
  std::string req, buf;
  std::vector<bool> kinds;
  uint64_t hits = 0;
  for (uint64_t i = 0; i < keys;) {
    req.clear();
    kinds.clear();
    for (; i < keys && kinds.size() < 256; i++) {
      req += fmt::format("set {} 0 0 {}\r\n{}\r\n", key_of(i), kValueBytes, value);
      kinds.push_back(true);
    }
    if (!send_all(fd, req) || !read_replies(fd, kinds, &buf, &hits)) {
      ::close(fd);
      return Status::io_error(s->name + ": preload failed; see " + s->log);
    }
  }
  ::close(fd);
  return Status();
}

std::string find_pmcached(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const auto& p : {self / "pmcached", self / ".." / "examples" / "pmcached",
                        self / ".." / ".." / "examples" / "pmcached"}) {
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "pmcached";  // PATH
}

bool in_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (::access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  }
  return false;
}

struct Restart {
  std::string what;
  double first_ms = 0, index_ms = 0;
  bool hit = false;
};

// Seconds until `stats` says the index covers every item.
double index_ready(Server* s, Clock::time_point t0) {
  while (since(t0) < 120) {
    int fd = connect_to(s->port);
    if (fd >= 0) {
      char buf[8192];
      std::string all;
      send_all(fd, "stats\r\n");
      while (all.find("END\r\n") == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        all.append(buf, static_cast<size_t>(n));
      }
      ::close(fd);
      if (all.find("STAT index_ready 1") != std::string::npos) return since(t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1;
}

Result<Restart> restart(Server* s, int sig, uint64_t keys, const std::string& what) {
  stop(s, sig);
  const auto t0 = Clock::now();
  PM_TRY(start(s));
  Result<double> first = first_reply(s, t0, key_of(keys / 2), s->ours);
  if (!first.ok()) return first.status();
  Restart r{what, *first * 1e3, 0, s->ours};
  if (s->ours) r.index_ms = index_ready(s, t0) * 1e3;
  return r;
}

}  // namespace

Status run_memcached_bench(const MemcachedConfig& cfg, bool json) {
  const Environment env = collect_environment();
  std::vector<Server> servers;
  std::vector<std::string> notes;
  const std::string pmcached = find_pmcached(cfg.pmcached);
  const std::string mb = std::to_string(std::max<uint64_t>(64, cfg.keys * 400 >> 20));
  const std::string threads = std::to_string(cfg.server_threads);
  if (in_path("memcached")) {
    Server m{"memcached", {"memcached", "-U", "0", "-l", "127.0.0.1", "-t", threads, "-m", mb},
             false, false, "", 0, -1};
    if (::geteuid() == 0) m.argv.insert(m.argv.end(), {"-u", "nobody"});
    servers.push_back(m);
  } else {
    notes.push_back("memcached is not installed (Debian: memcached): no reference row");
  }
  // Each server's files in a directory of this run's own (dir_cleanup.h).
  if (cfg.pmem_dir.empty() && cfg.fs_dir.empty()) {
    return Status::invalid_argument("--dir and --fs-dir are both empty: nowhere to run");
  }
  std::unique_ptr<RunDir> run_dirs[2];
  for (int i = 0; i < 2; i++) {
    const std::string& parent = i == 0 ? cfg.pmem_dir : cfg.fs_dir;
    if (parent.empty()) continue;
    Result<std::unique_ptr<RunDir>> d = RunDir::make(parent, "pm-bench-mc");
    if (!d.ok()) return d.status();
    run_dirs[i] = std::move(*d);
  }
  const std::string pmem_dir = run_dirs[0] ? run_dirs[0]->path() : "";
  const std::string fs_dir = run_dirs[1] ? run_dirs[1]->path() : "";
  for (const auto& [name, dir, pmem] :
       {std::tuple<std::string, std::string, bool>{"pmcached (pmem)", pmem_dir, true},
        {"pmcached (file system)", fs_dir, false}}) {
    if (dir.empty()) continue;
    Server s{name, {pmcached, dir + "/cache.kv", "-t", threads, "-m", mb}, pmem, true, "", 0, -1};
    servers.push_back(s);
  }
  for (Server& s : servers) {
    s.port = free_port();
    s.argv.insert(s.argv.end(), {"-p", std::to_string(s.port)});
    const std::string& dir = s.ours && !s.pmem_env ? fs_dir : pmem_dir.empty() ? fs_dir : pmem_dir;
    s.log = dir + "/" + (s.ours ? "pmcached.log" : "memcached.log");
  }
  struct Cleanup {
    std::vector<Server>* s;
    ~Cleanup() {
      for (Server& x : *s) stop(&x, SIGKILL);
    }
  } cleanup{&servers};
  for (Server& s : servers) {
    const auto t0 = Clock::now();
    PM_TRY(start(&s));
    PM_TRY(first_reply(&s, t0, "none", false).status());
    if (!json) std::fprintf(stderr, "loading %llu keys into %s ...\n",
                            static_cast<unsigned long long>(cfg.keys), s.name.c_str());
    PM_TRY(preload(&s, cfg.keys));
  }
  const Zipfian zipf(cfg.keys, 0.99);
  std::vector<Table> tables;
  std::vector<Target> goals;
  std::vector<std::pair<bool, int>> cells;
  for (int pct : cfg.set_percents) cells.push_back({true, pct});
  if (cfg.uniform) {
    for (int pct : cfg.set_percents) cells.push_back({false, pct});
  }
  for (const auto& [zipfian, pct] : cells) {
    std::vector<std::vector<Measured>> runs(servers.size());
    for (int r = 0; r < cfg.repeats; r++) {
      for (size_t i = 0; i < servers.size(); i++) {  // interleaved: one of each per repeat
        Result<Measured> c = run_cell(&servers[i], cfg, zipfian ? &zipf : nullptr, pct, cfg.seconds,
                                  static_cast<uint64_t>(r));
        if (!c.ok()) return c.status();
        runs[i].push_back(*c);
      }
    }
    Table t;
    t.title = fmt::format("{}, {}% sets ({} keys, {} connections x {} in flight, median of {})",
                          zipfian ? "zipfian 0.99" : "uniform", pct, cfg.keys, cfg.connections,
                          cfg.depth, cfg.repeats);
    t.columns = {{"server", "server"},
                 {"ops/s", "ops_per_s", Format::kRate},
                 {"vs memcached", "vs_memcached", Format::kRatio},
                 {"batch p50 us", "p50_us", Format::kMicros},
                 {"p99 us", "p99_us", Format::kMicros},
                 {"p99.9 us", "p999_us", Format::kMicros},
                 {"server CPU us/op", "cpu_us_per_op", Format::kMicros},
                 {"get hits", "hit_ratio", Format::kRatio}};
    auto med = [&](size_t i, double Measured::*f) {
      std::vector<double> v;
      for (const Measured& c : runs[i]) v.push_back(c.*f);
      return median(v);
    };
    const bool ref = !servers.empty() && !servers[0].ours;
    for (size_t i = 0; i < servers.size(); i++) {
      t.add_row({servers[i].name, med(i, &Measured::ops_s),
                 ref ? ratio(med(i, &Measured::ops_s), med(0, &Measured::ops_s)) : Cell(),
                 med(i, &Measured::p50), med(i, &Measured::p99), med(i, &Measured::p999),
                 med(i, &Measured::cpu_us), med(i, &Measured::hit_ratio)});
      if (ref && servers[i].pmem_env && zipfian && (pct == 0 || pct == 50)) {
        Target g = pct == 0 ? Target::at_least_of("gets (zipfian, 0% sets) vs memcached", 0.95, "x")
                            : Target::at_least_of("sets (zipfian, 50% sets) vs memcached", 0.8, "x");
        g.goal = pct == 0 ? ">= 0.95x" : ">= 0.8x";
        g.measured = med(i, &Measured::ops_s) / med(0, &Measured::ops_s);
        goals.push_back(g);
      }
    }
    t.notes.push_back("batch: the round trip of one connection's requests in flight");
    tables.push_back(std::move(t));
  }
  // Warm restart: clean stop, then kill -9 after more sets (logs to replay).
  Table rt;
  rt.title = fmt::format("restart with {} items: start to first correct reply", cfg.keys);
  rt.columns = {{"server", "server"},
                {"stop", "stop"},
                {"first reply ms", "first_reply_ms", Format::kMillis},
                {"index rebuilt ms", "index_ms", Format::kMillis},
                {"serves old items", "warm"}};
  for (Server& s : servers) {
    std::vector<std::pair<int, std::string>> stops = {{SIGTERM, "clean (SIGTERM)"}};
    if (s.ours) stops.push_back({SIGKILL, "kill -9 after 1% more sets"});
    for (const auto& [sig, what] : stops) {
      if (sig == SIGKILL) {
        Result<Measured> more = run_cell(&s, cfg, nullptr, 100, 0.05, 99);
        if (!more.ok()) return more.status();
      }
      Result<Restart> r = restart(&s, sig, cfg.keys, what);
      if (!r.ok()) return r.status();
      rt.add_row({s.name, what, r->first_ms, s.ours ? Cell(r->index_ms) : Cell(),
                  std::string(s.ours ? "yes" : "no (cold: 0 hits)")});
      if (s.pmem_env && sig == SIGTERM) {
        Target g = Target::at_most_of("first correct reply after a clean stop (pmem)", 100, "ms");
        g.goal = "<= 100 ms (at 10M items)";
        g.measured = r->first_ms;
        if (cfg.keys < 10000000) {
          g.not_applicable = fmt::format("measured at {} items; the goal is for 10M", cfg.keys);
        }
        goals.push_back(g);
      }
    }
  }
  tables.push_back(std::move(rt));
  for (const std::string& n : notes) tables.back().notes.push_back(n);
  for (Server& s : servers) stop(&s, SIGTERM);
  print_suite("memcached", env, tables, goals, json);
  return Status();
}

}  // namespace pm::bench
