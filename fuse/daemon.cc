// pmfs::mount: open the store, index it, mount, serve, unmount; unwound in
// reverse on every exit path.
#include <fmt/format.h>
#include <sys/stat.h>
#include <syslog.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/fs.h"
#include "fuse/handlers.h"
#include "pmfs/mount.h"

namespace pmfs {

namespace {

// Mount point paths in /proc/self/mountinfo escape space, tab, newline and
// backslash as \ooo.
std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether something is mounted on `path` already (mounting over it would
// hide it, and its unmount would then take ours).
bool is_mount_point(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return false;
  const std::string want(real);
  free(real);
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mnt;
    if (fields >> id >> parent >> dev >> root >> mnt && unescape_mountinfo(mnt) == want) {
      return true;
    }
  }
  return false;
}

pm::Status check_mountpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return pm::Status::from_errno(fmt::format("mount point {}", path), errno)
        .with_context("create the directory first");
  }
  if (!S_ISDIR(st.st_mode)) {
    return pm::Status::invalid_argument(fmt::format("mount point {}: not a directory", path));
  }
  if (is_mount_point(path)) {
    return pm::Status::busy(fmt::format(
        "mount point {}: something is mounted there already (unmount it first, e.g. "
        "fusermount3 -u {})",
        path, path));
  }
  return pm::Status();
}

kv::StoreOptions store_options(const MountOptions& o) {
  kv::StoreOptions so;
  so.create_if_missing = o.create_if_missing;
  so.logs = o.logs;
  so.log_bytes = o.log_bytes;
  so.max_key_bytes = o.max_key_bytes;
  so.max_value_bytes = o.max_value_bytes;
  so.initial_heap_bytes = o.initial_heap_bytes;
  so.durability = o.sync_every_change ? kv::Durability::kSync : kv::Durability::kSyncOnPmem;
  so.dram_budget_bytes = o.dram_budget_bytes;
  so.logger = [](pm::LogLevel level, std::string_view msg) {
    const fuse_log_level l = level == pm::LogLevel::kError  ? FUSE_LOG_ERR
                             : level == pm::LogLevel::kWarn ? FUSE_LOG_WARNING
                             : level == pm::LogLevel::kInfo ? FUSE_LOG_INFO
                                                            : FUSE_LOG_DEBUG;
    fuse_log(l, "pmfs: store: %.*s\n", static_cast<int>(msg.size()), msg.data());
  };
  return so;
}

// The generic mount options MountOptions::kernel_options may hold: what
// libfuse passes to mount(2) as flags. One it does not know would fail the
// mount after the store is open; atime updates this file system does not
// make (the mount is noatime).
const std::set<std::string, std::less<>>& known_kernel_options() {
  static const std::set<std::string, std::less<>> kKnown = {
      "ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "noatime", "nodiratime",
      "dirsync"};
  return kKnown;
}

// The options of a comma-separated list, empty ones left out.
std::vector<std::string_view> split_options(std::string_view opts) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at <= opts.size();) {
    const size_t end = std::min(opts.find(',', at), opts.size());
    if (end > at) out.push_back(opts.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// Session, signal handlers, mount, loop; each undone by its destructor.
class Session {
 public:
  Session(Fs* fs, const MountOptions& o) {
    // The store's path is the mount's source (mount, df and findmnt show it,
    // as sshfs shows its remote); fuse_opt splits on ',' and takes '\' as an
    // escape, so both are escaped.
    std::string fsname;
    for (char c : o.store_path) {
      if (c == ',' || c == '\\') fsname += '\\';
      fsname += c;
    }
    // noatime: reads never change atime here (a store write each), so the
    // mount says so (mount and findmnt showed relatime).
    std::string opts = "default_permissions,noatime,subtype=pmfs,fsname=" + fsname;
    if (o.allow_other) opts += ",allow_other";
    for (std::string_view k : split_options(o.kernel_options)) opts += "," + std::string(k);
    args_ = {"pm", "-o", opts};
    if (o.debug) args_.push_back("-d");
    for (std::string& a : args_) argv_.push_back(a.data());
    fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv_.size()), argv_.data());
    const fuse_lowlevel_ops ops = make_operations();
    se_ = fuse_session_new(&args, &ops, sizeof ops, fs);
    fuse_opt_free_args(&args);  // fuse_session_new may have copied it onto the heap
  }
  ~Session() {
    if (mounted_) fuse_session_unmount(se_);
    if (signals_) fuse_remove_signal_handlers(se_);
    if (se_ != nullptr) fuse_session_destroy(se_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  pm::Status mount(const std::string& mountpoint) {
    if (se_ == nullptr) return pm::Status::io_error("fuse_session_new failed (see above)");
    if (fuse_set_signal_handlers(se_) != 0) {
      return pm::Status::io_error("cannot install signal handlers");
    }
    signals_ = true;
    if (fuse_session_mount(se_, mountpoint.c_str()) != 0) {
      return pm::Status::io_error(fmt::format(
          "mount {}: refused (fuse's message is on stderr, or in syslog in the background; "
          "is /dev/fuse usable, is the directory a mount point already, and for "
          "--allow-other is user_allow_other in /etc/fuse.conf?)",
          mountpoint));
    }
    mounted_ = true;
    return pm::Status();
  }

  fuse_session* se() const { return se_; }

  // Serves until unmounted or signalled.
  pm::Status loop(unsigned max_threads) {
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, max_threads);
    fuse_loop_cfg_set_clone_fd(cfg, 0);
    const int ret = fuse_session_loop_mt(se_, cfg);
    fuse_loop_cfg_destroy(cfg);
    if (ret < 0) return pm::Status::from_errno("fuse session loop", -ret);
    return pm::Status();
  }

 private:
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  fuse_session* se_ = nullptr;
  bool signals_ = false, mounted_ = false;
};

void syslog_line(fuse_log_level level, const char* fmt, va_list ap) {
  vsyslog(LOG_DAEMON | static_cast<int>(level), fmt, ap);  // fuse levels are syslog's
}

}  // namespace

void log_to_syslog() { fuse_set_log_func(syslog_line); }

pm::Status check_kernel_options(const std::string& opts) {
  for (std::string_view o : split_options(opts)) {
    if (known_kernel_options().count(o) != 0) continue;
    std::string known;
    for (const std::string& k : known_kernel_options()) known += (known.empty() ? "" : ", ") + k;
    return pm::Status::invalid_argument(
        fmt::format("mount option '{}' is not one of {}", o, known));
  }
  return pm::Status();
}

pm::Status mount(const MountOptions& o) {
  PM_TRY(check_kernel_options(o.kernel_options));
  PM_TRY(check_mountpoint(o.mountpoint));
  // Every file and directory keeps a metadata record (up to 56 bytes) as a
  // value: a store whose values cannot hold one cannot hold a file.
  auto too_small = [&](uint64_t max_value) {
    return pm::Status::invalid_argument(fmt::format(
        "{}: values of at most {} bytes cannot hold a file's metadata record ({} bytes); "
        "a mounted store needs --max-value {} or more (set when the store is created)",
        o.store_path, max_value, kMetaRecordMaxBytes, kMetaRecordMaxBytes));
  };
  struct stat st;
  if (::stat(o.store_path.c_str(), &st) != 0 && o.max_value_bytes < kMetaRecordMaxBytes) {
    return too_small(o.max_value_bytes);
  }
  // Right after fusermount3 -u returns, the previous daemon may still hold
  // the store for a moment while it exits: wait for it (bounded).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(o.wait_seconds);
  auto store = kv::Store::open(o.store_path, store_options(o));
  for (auto pause = std::chrono::milliseconds(2);
       !store.ok() && store.status().is_busy() && std::chrono::steady_clock::now() < deadline;
       pause = std::min(pause * 2, std::chrono::milliseconds(100))) {
    std::this_thread::sleep_for(pause);
    store = kv::Store::open(o.store_path, store_options(o));
  }
  if (!store.ok()) return store.status().with_context(fmt::format("open {}", o.store_path));
  if (const uint64_t mv = (*store)->stats().max_value_bytes; mv < kMetaRecordMaxBytes) {
    return too_small(mv);
  }
  Fs fs(std::move(*store), o);
  PM_TRY(fs.build_index().with_context(fmt::format("index {}", o.store_path)));
  Session session(&fs, o);
  PM_TRY(session.mount(o.mountpoint));
  fs.set_session(session.se());
  if (o.on_ready) o.on_ready();
  return session.loop(o.max_threads);
}

}  // namespace pmfs
