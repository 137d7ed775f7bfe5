// pm mount STORE MOUNTPOINT: serve a kv::Store as a file system until it is
// unmounted (fusermount3 -u MOUNTPOINT) or signalled. In the background by
// default: the command returns once the mount is up, or fails with the
// daemon's error; -f keeps it in the foreground.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kv/store.h"
#include "pm/command.h"
#include "pmfs/mount.h"

namespace pm::cli {

namespace {

struct MountArgs {
  pmfs::MountOptions o;
  uint64_t log_mib = 8;
  bool foreground = false;
  bool no_create = false;
};

std::string absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (!p.empty() && p[0] == '/') return p;
  if (getcwd(buf, sizeof buf) == nullptr) return p;
  return std::string(buf) + "/" + p;
}

// The daemon child: mounts, reports "ok" or the error over `report` and
// exits. Only the first line of the report is read by the parent.
[[noreturn]] void run_daemon(const MountArgs& a, int report) {
  setsid();
  pmfs::log_to_syslog();  // errors before the mount also come back over `report`
  if (chdir("/") != 0) {
  }  // paths are absolute by now
  pmfs::MountOptions o = a.o;
  auto fd = std::make_shared<int>(report);  // -1 once closed: the number may be reused
  o.on_ready = [fd] {
    if (write(*fd, "ok\n", 3) != 3) {
    }
    close(*fd);
    *fd = -1;
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, 0), dup2(null, 1), dup2(null, 2), close(null);
  };
  const Status s = pmfs::mount(o);
  if (!s.ok() && *fd >= 0) {
    // The code, then the message: the parent rebuilds the same Status.
    const std::string msg = std::to_string(static_cast<int>(s.code())) + " " + s.message() + "\n";
    if (write(*fd, msg.data(), msg.size()) < 0) {
    }
  }
  _exit(s.ok() ? 0 : 1);
}

// Forks before the store is opened: its threads would not survive a fork.
Status run_background(const MountArgs& a) {
  int fds[2];
  if (pipe(fds) != 0) return Status::from_errno("pipe", errno);
  const pid_t pid = fork();
  if (pid < 0) return Status::from_errno("fork", errno);
  if (pid == 0) {
    close(fds[0]);
    run_daemon(a, fds[1]);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) {
    msg.append(buf, static_cast<size_t>(n));
    if (msg.find('\n') != std::string::npos) break;
  }
  close(fds[0]);
  if (msg == "ok\n") return Status();
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  if (msg.empty()) return Status::io_error("the mount daemon died before mounting");
  const size_t sp = msg.find(' ');
  const int code = sp == std::string::npos ? 0 : std::atoi(msg.substr(0, sp).c_str());
  return Status::of(static_cast<pm::Code>(code), msg.substr(sp + 1));
}

Status run_mount(MountArgs a) {
  a.o.store_path = absolute(a.o.store_path);
  a.o.mountpoint = absolute(a.o.mountpoint);
  a.o.log_bytes = a.log_mib << 20;
  a.o.create_if_missing = !a.no_create;
  if (a.foreground) return pmfs::mount(a.o);
  return run_background(a);
}

}  // namespace

void add_mount_commands(CLI::App& root, const Globals& g, std::vector<Command>* out) {
  (void)g;
  auto a = std::make_shared<MountArgs>();
  CLI::App* m = root.add_subcommand(
      "mount", "mount STORE (a kv store) on MOUNTPOINT: key a/b/c is the file a/b/c");
  m->add_option("store", a->o.store_path, "store file (created when missing)")
      ->required()
      ->check(kPath);
  m->add_option("mountpoint", a->o.mountpoint, "an existing directory")->required()->check(kPath);
  m->add_flag("-f,--foreground", a->foreground, "stay in the foreground (logs to stderr)");
  m->add_flag("-d,--debug", a->o.debug, "log every request (implies nothing else)");
  m->add_flag("--allow-other", a->o.allow_other,
              "let other users in (permissions are still checked)");
  m->add_option("-o,--options", a->o.kernel_options,
                "generic mount options, comma-separated: ro, nosuid, nodev, noexec, nodiratime, "
                "dirsync (and rw, suid, dev, exec, noatime)")
      ->check(CLI::Validator(
          [](std::string& v) {
            const pm::Status s = pmfs::check_kernel_options(v);
            return s.ok() ? std::string() : s.message();
          },
          "OPTIONS"));
  m->add_option("--threads", a->o.max_threads, "most worker threads")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  m->add_flag("--index-at-mount", a->o.index_at_mount,
              "read every key at mount instead of each directory at its first use");
  m->add_option("--wait", a->o.wait_seconds,
                "seconds to wait for a store another process holds (a daemon still exiting)")
      ->capture_default_str()
      ->check(kFinite & CLI::Range(0.0, 3600.0));
  m->add_flag("--no-create", a->no_create, "fail instead of creating a missing store");
  m->add_flag("--sync", a->o.sync_every_change,
              "every change is durable before it returns, also off pmem (default: at once on "
              "pmem, else at fsync or within 10 ms)");
  add_size_option(m, "--dram", a->o.dram_budget_bytes,
                  "DRAM the store keeps of committed data: cached values, and private copies of "
                  "committed pages, each up to this (default 256MiB; 0: no limit)");
  const char* kCreation = "Creation (used only when the store is created)";
  m->add_option("--logs", a->o.logs, "number of persistent logs")
      ->capture_default_str()
      ->check(CLI::Range(1, kv::StoreOptions::kMaxLogs))
      ->group(kCreation);
  m->add_option("--log-mb", a->log_mib, "size of each log in MiB")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{16} << 10))
      ->group(kCreation);
  m->add_option("--max-key", a->o.max_key_bytes, "longest key in bytes (a path plus 2)")
      ->capture_default_str()
      ->group(kCreation);
  m->add_option("--max-value", a->o.max_value_bytes,
                "largest value in bytes: files up to it are one value, larger ones chunks")
      ->capture_default_str()
      ->group(kCreation);
  add_size_option(m, "--heap,--size", a->o.initial_heap_bytes,
                  "heap made at create (it grows as needed; a small one fits a small disk)")
      ->capture_default_str()
      ->check(kHeapSize)
      ->group(kCreation);
  add_size_option(m, "--max-file-size", a->o.max_file_bytes,
                  "largest file (e.g. 4GiB; writes past it get EFBIG; default: what the store "
                  "allows, (max-value - 16) / 8 chunks)");
  out->push_back({m, [a] { return run_mount(*a); }});
}

}  // namespace pm::cli
