#include "bench/fuse/fuse_target.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/interrupt.h"
#include "bench/fuse/fuse_ops.h"
#include "kv/store.h"
#include "pmfs/mount.h"

namespace pm::bench {

namespace {

constexpr auto kMountWait = std::chrono::seconds(20);
constexpr auto kExitWait = std::chrono::seconds(10);

// Where CMake built libfuse's examples (tools/CMakeLists.txt); empty: not built.
#ifdef PM_FUSE_PASSTHROUGH
constexpr const char* kPassthrough = PM_FUSE_PASSTHROUGH;
#else
constexpr const char* kPassthrough = "";
#endif
#ifdef PM_FUSE_PASSTHROUGH_LL
constexpr const char* kPassthroughLl = PM_FUSE_PASSTHROUGH_LL;
#else
constexpr const char* kPassthroughLl = "";
#endif

bool is_fuse(FsKind k) { return k != FsKind::kTmpfs; }

// A passthrough example where the build left it, or (an installed pm)
// where the install put it: <prefix>/<libexecdir>/libpm, <prefix>/bin/pm.
std::string baseline(const std::string& built) {
#ifdef PM_FUSE_LIBEXEC
  const std::filesystem::path libexec = PM_FUSE_LIBEXEC;
#else
  const std::filesystem::path libexec = "libexec/libpm";
#endif
  if (built.empty()) return "";
  std::error_code ec;
  if (std::filesystem::exists(built, ec)) return built;
  const auto prefix = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "..";
  const auto dir = libexec.is_absolute() ? libexec : prefix / libexec;
  const auto installed = dir / std::filesystem::path(built).filename();
  return std::filesystem::exists(installed, ec) ? installed.string() : built;
}

// True once `pid` has exited (reaped), waiting up to `limit`.
bool reap_within(pid_t pid, std::chrono::steady_clock::duration limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  do {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      forget_child(pid);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

}  // namespace

const char* fs_kind_name(FsKind k) {
  switch (k) {
    case FsKind::kPmfs:
      return "pmfs";
    case FsKind::kPassthrough:
      return "passthrough";
    case FsKind::kPassthroughLl:
      return "passthrough_ll";
    case FsKind::kTmpfs:
      return "tmpfs";
  }
  return "?";
}

FsTarget::FsTarget(FsKind kind, std::string work, std::string tmpfs, std::string exe)
    : kind_(kind),
      name_(fs_kind_name(kind)),
      work_(std::move(work)),
      mnt_(work_ + "/mnt"),
      backing_(std::move(tmpfs)),
      store_(work_ + "/store.kv"),
      log_(work_ + "/daemon.log"),
      exe_(std::move(exe)) {}

Result<std::unique_ptr<FsTarget>> FsTarget::create(FsKind kind, const std::string& work,
                                                   const std::string& tmpfs,
                                                   const FuseConfig& cfg) {
  std::string exe;
  if (kind == FsKind::kPmfs) exe = cfg.pm_exe.empty() ? "/proc/self/exe" : cfg.pm_exe;
  if (kind == FsKind::kPassthrough) exe = baseline(kPassthrough);
  if (kind == FsKind::kPassthroughLl) exe = baseline(kPassthroughLl);
  if (is_fuse(kind) && exe.empty()) {
    return Status::not_found(
        fmt::format("{}: not built (CMake found no /usr/share/doc/libfuse3-dev/examples; "
                    "tools/install-deps.sh installs libfuse3-dev)",
                    fs_kind_name(kind)));
  }
  std::error_code ec;
  const std::string abs_work = std::filesystem::absolute(work, ec).string();
  if (ec) return Status::io_error(fmt::format("{}: {}", work, ec.message()));
  std::unique_ptr<FsTarget> t(new FsTarget(kind, abs_work, tmpfs, exe));
  std::filesystem::create_directories(t->mnt_, ec);
  if (ec) return Status::io_error(fmt::format("mkdir {}: {}", t->mnt_, ec.message()));
  return t;
}

FsTarget::~FsTarget() {
  if (pid_ > 0) (void)unmount();
}

std::string FsTarget::root() const {
  switch (kind_) {
    case FsKind::kPmfs:
    case FsKind::kPassthroughLl:
      return mnt_;
    case FsKind::kPassthrough:  // mounts "/": the tmpfs directory is below the mount point
      return mnt_ + backing_;
    case FsKind::kTmpfs:
      return backing_;
  }
  return backing_;
}

std::string FsTarget::log_tail() const { return output_tail(log_); }

Status FsTarget::mount() {
  if (!is_fuse(kind_)) return Status();
  std::vector<std::string> args;
  if (kind_ == FsKind::kPmfs) {
    args = {exe_, "mount", "-f", store_, mnt_};
  } else if (kind_ == FsKind::kPassthrough) {
    args = {exe_, "-f", mnt_};  // as shipped: no caching (timeouts 0), no readdirplus
  } else {
    args = {exe_, "-f", "-o", "source=" + backing_, mnt_};  // as shipped: cache=auto (1 s)
  }
  const auto t0 = std::chrono::steady_clock::now();
  Status started = spawn_command(std::move(args), log_, /*stderr_too=*/true, &pid_);
  if (!started.ok()) {
    pid_ = -1;
    return started.with_context(name_);
  }
  unmount_on_interrupt(mnt_);
  PM_TRY(wait_mounted());
  mount_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status();
}

// Mounted when the mount point's device differs from its parent's.
Status FsTarget::wait_mounted() {
  const auto end = std::chrono::steady_clock::now() + kMountWait;
  struct stat parent, m;
  if (::stat(work_.c_str(), &parent) != 0) return Status::from_errno("stat " + work_, errno);
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      forget_child(pid_);
      forget_mount(mnt_);
      pid_ = -1;
      return Status::io_error(
          fmt::format("{}: the daemon exited before mounting: {}", name_, log_tail()));
    }
    if (::stat(mnt_.c_str(), &m) == 0 && m.st_dev != parent.st_dev) return Status();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (void)unmount();
  return Status::io_error(fmt::format("{}: not mounted after {} s: {}", name_,
                                      std::chrono::seconds(kMountWait).count(), log_tail()));
}

Status FsTarget::unmount() {
  if (pid_ <= 0) return Status();
  const pid_t pid = pid_;
  pid_ = -1;
  Result<int> rc = run_command({"fusermount3", "-u", mnt_}, log_, true);
  if (rc.ok() && *rc == 0 && reap_within(pid, kExitWait)) {
    forget_mount(mnt_);
    return Status();
  }
  // Stuck: end the daemon and detach the mount, then say so.
  ::kill(pid, SIGKILL);
  reap_within(pid, kExitWait);
  (void)run_command({"fusermount3", "-uz", mnt_}, log_, true);
  forget_mount(mnt_);
  return Status::io_error(fmt::format("{}: clean unmount failed: {}", name_, log_tail()));
}

Status FsTarget::populate_behind(const std::string& rel, uint64_t n, uint32_t bytes) {
  if (kind_ != FsKind::kPmfs) return write_files(backing_ + "/" + rel, n, bytes);
  // The store with pm mount's creation defaults, so that the mount opens it as its own.
  const pmfs::MountOptions mo;
  kv::StoreOptions so;
  so.logs = mo.logs;
  so.log_bytes = mo.log_bytes;
  so.max_key_bytes = mo.max_key_bytes;
  so.max_value_bytes = mo.max_value_bytes;
  auto store = kv::Store::open(store_, so);
  if (!store.ok()) return store.status().with_context("open " + store_);
  for (uint64_t i = 0; i < n; i++) {
    PM_TRY((*store)->put(rel + "/" + bench_file_name(i), bench_file_bytes(i, bytes)));
  }
  return (*store)->checkpoint();
}

}  // namespace pm::bench
