#include "bench/common/interrupt.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

extern char** environ;

namespace pm::bench {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

int g_pipe[2] = {-1, -1};
std::mutex g_mu;
std::vector<pid_t> g_children;
std::vector<std::string> g_mounts;
std::vector<std::pair<std::string, std::string>> g_dirs;  // (dir, top)
bool g_interrupted = false;  // under g_mu: the cleanup has begun

void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!::write(g_pipe[1], &b, 1);
}

template <typename T>
void erase(std::vector<T>* v, const T& x) {
  v->erase(std::remove(v->begin(), v->end(), x), v->end());
}

// Waits up to `limit` for the children in `left` to exit; those reaped
// (by us or, meanwhile, by the main thread: ECHILD) leave the list.
void reap_within(std::vector<pid_t>* left, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::erase_if(*left, [](pid_t p) { return ::waitpid(p, nullptr, WNOHANG) != 0; });
    if (left->empty() || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void stop_children(std::vector<pid_t> pids) {
  // Only children not reaped yet: a pid the main thread reaped may be reused.
  std::erase_if(pids, [](pid_t p) { return ::waitpid(p, nullptr, WNOHANG) != 0; });
  for (pid_t p : pids) ::kill(p, SIGTERM);
  reap_within(&pids, std::chrono::milliseconds(1000));
  for (pid_t p : pids) ::kill(p, SIGKILL);
  reap_within(&pids, std::chrono::milliseconds(2000));  // one stuck in D state is left
}

void unmount(const std::string& mnt) {
  const char* argv[] = {"fusermount3", "-uz", mnt.c_str(), nullptr};
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, const_cast<char**>(argv), environ) == 0) {
    std::vector<pid_t> left = {pid};
    reap_within(&left, std::chrono::milliseconds(2000));
    if (!left.empty()) ::kill(pid, SIGKILL);
  }
  posix_spawn_file_actions_destroy(&fa);
}

// Below an open directory `fd` on device `dev`.
void remove_below(int fd, dev_t dev) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  for (const std::string& n : names) {
    struct stat st;
    if (::fstatat(::dirfd(d), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_dev != dev) continue;  // a mount point: never into it
    if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(::dirfd(d), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (sub >= 0) remove_below(sub, dev);
      ::unlinkat(::dirfd(d), n.c_str(), AT_REMOVEDIR);
    } else {
      ::unlinkat(::dirfd(d), n.c_str(), 0);
    }
  }
  ::closedir(d);
}

[[noreturn]] void cleanup_and_die(int sig) {
  // A reader of our output that the same Ctrl-C ended (| tee) must not end
  // the cleanup with SIGPIPE; a second signal ends the process at once.
  std::signal(SIGPIPE, SIG_IGN);
  restore_signal_defaults();
  std::vector<pid_t> children;
  std::vector<std::string> mounts;
  std::vector<std::pair<std::string, std::string>> dirs;
  {
    std::lock_guard g(g_mu);
    g_interrupted = true;  // later registrations are acted on at once
    children = g_children;
    mounts = g_mounts;
    dirs = g_dirs;
  }
  std::fflush(stdout);
  std::fprintf(stderr, "\npm bench: interrupted: stopping %zu processes, %zu mounts; removing %zu "
               "directories\n", children.size(), mounts.size(), dirs.size());
  for (const std::string& m : mounts) unmount(m);  // before the daemon dies: no stale mount
  stop_children(children);
  for (const std::string& m : mounts) unmount(m);
  for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) {
    remove_tree(d->first);
    remove_empty_up_to(std::filesystem::path(d->first).parent_path().string(), d->second);
  }
  std::fflush(stderr);
  ::raise(sig);
  ::_exit(128 + sig);
}

// The main thread, failing on EINTR or on a child the signal killed, may
// reach exit() while the cleanup runs: it waits here for the cleanup to
// end the process.
void wait_for_cleanup() {
  bool interrupted;
  {
    std::lock_guard g(g_mu);
    interrupted = g_interrupted;
  }
  if (interrupted) {
    for (;;) ::pause();
  }
}

}  // namespace

void install_interrupt_cleanup() {
  if (g_pipe[0] >= 0 || ::pipe2(g_pipe, O_CLOEXEC) != 0) return;
  std::atexit(wait_for_cleanup);
  std::thread([] {
    unsigned char b = 0;
    while (::read(g_pipe[0], &b, 1) != 1) {
    }
    cleanup_and_die(b);
  }).detach();
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;  // the main thread's reads and waits go on meanwhile
  sigemptyset(&sa.sa_mask);
  for (int s : kSignals) {
    struct sigaction old;
    // A signal the caller ignores (nohup) stays ignored.
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(s, &sa, nullptr);
  }
}

void kill_on_interrupt(pid_t pid) {
  std::lock_guard g(g_mu);
  if (g_interrupted) ::kill(pid, SIGKILL);  // started after the cleanup's snapshot
  g_children.push_back(pid);
}
void forget_child(pid_t pid) {
  std::lock_guard g(g_mu);
  erase(&g_children, pid);
}
void unmount_on_interrupt(const std::string& mnt) {
  std::lock_guard g(g_mu);
  g_mounts.push_back(mnt);
}
void forget_mount(const std::string& mnt) {
  std::lock_guard g(g_mu);
  erase(&g_mounts, mnt);
}
void remove_on_interrupt(const std::string& dir, const std::string& top) {
  std::lock_guard g(g_mu);
  g_dirs.emplace_back(dir, top);
}
void forget_dir(const std::string& dir) {
  std::lock_guard g(g_mu);
  std::erase_if(g_dirs, [&](const auto& d) { return d.first == dir; });
}

void restore_signal_defaults() {
  for (int s : kSignals) {
    struct sigaction old;
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == on_signal) std::signal(s, SIG_DFL);
  }
}

void remove_empty_up_to(const std::string& dir, const std::string& top) {
  if (top.empty()) return;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec).lexically_normal();
  const std::filesystem::path stop = std::filesystem::absolute(top, ec).lexically_normal();
  auto inside = [&](const std::filesystem::path& x) {  // `top` or below it
    const std::filesystem::path r = x.lexically_relative(stop);
    return !r.empty() && *r.begin() != "..";
  };
  while (inside(p) && ::rmdir(p.c_str()) == 0) {  // rmdir fails when not empty
    if (p == stop) return;
    p = p.parent_path();
  }
}

void remove_tree(const std::string& dir) {
  // Passes until it is gone: on interrupt the main thread may still be
  // creating files in it (its creates fail once the directory is gone).
  for (int pass = 0; pass < 20; pass++) {
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) return;
    remove_below(fd, st.st_dev);
    if (::rmdir(dir.c_str()) == 0 || errno != ENOTEMPTY) return;
  }
}

}  // namespace pm::bench
