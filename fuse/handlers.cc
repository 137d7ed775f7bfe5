#include "fuse/handlers.h"

#include <cerrno>
#include <exception>
#include <string>

namespace pmfs {

namespace {

Fs& fs_of(fuse_req_t req) { return *static_cast<Fs*>(fuse_req_userdata(req)); }
Handle* handle_of(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }
static_assert(sizeof(Handle*) <= sizeof(uint64_t), "a handle pointer must fit in fi->fh");

Caller caller_of(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  return Caller{c->uid, c->gid};
}

// Work after a reply: an exception there must not reach Guarded, which
// would reply a second time.
template <typename F>
void after_reply(Fs& fs, F&& fn) {
  try {
    fn();
  } catch (const std::exception&) {
    fs.fail("out of memory");
  }
}

void reply_entry_or_err(fuse_req_t req, int err, const fuse_entry_param& e) {
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_entry(req, &e);
  }
}

void sfs_init(void* userdata, fuse_conn_info* conn) {
  (void)userdata;
  // Capabilities are asked for only when the kernel offers them.
  // atomic_o_trunc: open(O_TRUNC) is staged with the writes, so a rewrite
  // replaces the value in one put instead of exposing an empty file.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  // Always readdirplus, not the kernel's "auto" mode. Auto switches to plain
  // readdir after the first batch when no stat came in between, and tools
  // that stat after reading the whole directory (ls -l, du, find -ls) then
  // pay one LOOKUP round trip per entry: readdir + stat of 1M entries took
  // 45 s that way against 5.5 s (plain `ls` pays 1.4 -> 2.5 s).
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // File handles (open_by_handle_at, NFS): the kernel looks up "." of an
  // inode number it no longer caches (Fs::do_lookup).
  if (conn->capable & FUSE_CAP_EXPORT_SUPPORT) conn->want |= FUSE_CAP_EXPORT_SUPPORT;
  // Values are written whole at flush: no writeback cache, no splicing.
  conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
                  FUSE_CAP_SPLICE_MOVE);
  conn->max_write = 1u << 20;
  // Every change to a file's content comes through the kernel, which keeps
  // its pages (set_caching): it need not drop them when a getattr shows a
  // new mtime (libfuse asks for that by default).
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  conn->max_readahead = 1u << 20;  // the kernel keeps its own limit if lower
}

void sfs_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  reply_entry_or_err(req, fs_of(req).do_lookup(parent, name, &e), e);
}

// Forgets allocate nothing; after Fs::fail they leave the index alone.
void sfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  if (!fs_of(req).failed()) fs_of(req).do_forget(ino, nlookup);
  fuse_reply_none(req);
}

void sfs_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  if (!fs_of(req).failed()) {
    for (size_t i = 0; i < count; i++) fs_of(req).do_forget(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void reply_attr_or_err(fuse_req_t req, int err, const struct stat& st) {
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_attr(req, &st, kCacheSeconds);
  }
}

void sfs_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)fi;
  struct stat st;
  reply_attr_or_err(req, fs_of(req).do_getattr(ino, &st), st);
}

void sfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                 fuse_file_info* fi) {
  struct stat st;
  Handle* h = fi != nullptr ? handle_of(fi) : nullptr;
  reply_attr_or_err(req, fs_of(req).do_setattr(ino, *attr, to_set, h, caller_of(req), &st), st);
}

// Regular files, FIFOs, sockets and device nodes. The kernel serves FIFOs,
// sockets and devices itself from the mode and rdev that getattr reports,
// so for pmfs they are a record and an empty value.
void sfs_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  if (S_ISDIR(mode) || S_ISLNK(mode)) {
    fuse_reply_err(req, EINVAL);  // mkdir and symlink have their own calls
    return;
  }
  fuse_entry_param e;
  reply_entry_or_err(req, fs_of(req).do_make(parent, name, mode, rdev, "", caller_of(req), &e), e);
}

void sfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  fuse_entry_param e;
  reply_entry_or_err(
      req, fs_of(req).do_make(parent, name, S_IFDIR | (mode & 07777), 0, "", caller_of(req), &e),
      e);
}

void sfs_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, fs_of(req).do_remove(parent, name, false));
}

void sfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, fs_of(req).do_remove(parent, name, true));
}

void sfs_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                const char* newname, unsigned flags) {
  fuse_reply_err(req, fs_of(req).do_rename(parent, name, newparent, newname, flags));
}

void sfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  fuse_entry_param e;
  reply_entry_or_err(req, fs_of(req).do_link(ino, newparent, newname, &e), e);
}

void sfs_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  fuse_entry_param e;
  reply_entry_or_err(
      req, fs_of(req).do_make(parent, name, S_IFLNK | 0777, 0, link, caller_of(req), &e), e);
}

void sfs_readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string target;
  if (int err = fs_of(req).do_readlink(ino, &target)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_readlink(req, target.c_str());
  }
}

// Files go through the kernel's page cache, kept across opens, so that
// shared writable mmap works (SQLite's WAL index, fsx) and re-reads cost no
// round trip. It stays coherent because every change to a file's content
// arrives as a kernel request, which the kernel applies to its own pages;
// the one change it does not see, a failed flush that puts the stored
// content back, invalidates the file's pages (Fs::invalidate_content).
void set_caching(fuse_file_info* fi) {
  fi->direct_io = 0;
  fi->keep_cache = 1;
}

void sfs_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Handle* h = nullptr;
  bool mode_changed = false;
  if (int err = fs_of(req).do_open(ino, fi->flags, caller_of(req), &h, &mode_changed)) {
    fuse_reply_err(req, err);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(h);
  set_caching(fi);
  Fs& fs = fs_of(req);
  const bool replied = fuse_reply_open(req, fi) == 0;
  after_reply(fs, [&] {
    if (!replied) {
      fs.do_release(h);  // open was interrupted
    } else if (mode_changed) {
      fs.invalidate_attr(ino);
    }
  });
}

void sfs_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                fuse_file_info* fi) {
  Fs& fs = fs_of(req);
  fuse_entry_param e;
  if (int err = fs.do_make(parent, name, S_IFREG | (mode & 07777), 0, "", caller_of(req), &e)) {
    fuse_reply_err(req, err);
    return;
  }
  Handle* h = nullptr;
  bool mode_changed = false;  // (a new file has no SUID to clear)
  if (int err = fs.do_open(e.ino, fi->flags & ~O_TRUNC, caller_of(req), &h, &mode_changed)) {
    fs.do_forget(e.ino, 1);
    fuse_reply_err(req, err);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(h);
  set_caching(fi);
  if (fuse_reply_create(req, &e, fi) != 0) {
    after_reply(fs, [&] {
      fs.do_release(h);
      fs.do_forget(e.ino, 1);
    });
  }
}

void sfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  (void)ino;
  std::string data;
  if (int err = fs_of(req).do_read(handle_of(fi), size, off, &data)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_buf(req, data.data(), data.size());
  }
}

void sfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi) {
  (void)ino;
  off_t at = 0;
  if (int err = fs_of(req).do_lseek(handle_of(fi), off, whence, &at)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_lseek(req, at);
  }
}

void sfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                   fuse_file_info* fi) {
  Fs& fs = fs_of(req);
  bool mode_changed = false;
  fuse_reply_err(req, fs.do_fallocate(handle_of(fi), mode, off, len, caller_of(req), &mode_changed));
  if (mode_changed) after_reply(fs, [&] { fs.invalidate_attr(ino); });
}

void sfs_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
               fuse_file_info* fi) {
  Fs& fs = fs_of(req);
  bool mode_changed = false;
  if (int err = fs.do_write(handle_of(fi), buf, size, off, caller_of(req), &mode_changed,
                            fi->writepage != 0)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_write(req, size);
    if (mode_changed) after_reply(fs, [&] { fs.invalidate_attr(ino); });
  }
}

void sfs_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)ino;
  fuse_reply_err(req, fs_of(req).do_flush(handle_of(fi)));
}

void sfs_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)ino;
  fs_of(req).do_release(handle_of(fi));
  fuse_reply_err(req, 0);
}

void sfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  (void)ino, (void)datasync;
  fuse_reply_err(req, fs_of(req).do_fsync(handle_of(fi)));
}

void sfs_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  struct stat st;
  int err = fs_of(req).do_getattr(ino, &st);
  if (err == 0 && !S_ISDIR(st.st_mode)) err = ENOTDIR;
  if (err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  fi->fh = 0;  // readdir offsets are cookies in the index: no per-open state
  fuse_reply_open(req, fi);
}

void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  std::string buf;
  if (int err = fs_of(req).do_readdir(req, ino, size, off, plus, &buf)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_buf(req, buf.data(), buf.size());
  }
}

void sfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  (void)fi;
  readdir_common(req, ino, size, off, false);
}

void sfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  (void)fi;
  readdir_common(req, ino, size, off, true);
}

void sfs_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  (void)ino, (void)fi;
  fuse_reply_err(req, 0);
}

void sfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
  (void)ino, (void)datasync, (void)fi;
  fuse_reply_err(req, fs_of(req).do_sync());
}

void sfs_statfs(fuse_req_t req, fuse_ino_t ino) {
  (void)ino;
  struct statvfs st;
  if (int err = fs_of(req).do_statfs(&st)) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_statfs(req, &st);
  }
}

void sfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                  int flags) {
  fuse_reply_err(req, fs_of(req).do_setxattr(ino, name, std::string_view(value, size), flags));
}

// getxattr and listxattr: size 0 asks for the length; a smaller buffer is ERANGE.
void reply_xattr_bytes(fuse_req_t req, int err, const std::string& bytes, size_t size) {
  if (err != 0) {
    fuse_reply_err(req, err);
  } else if (size == 0) {
    fuse_reply_xattr(req, bytes.size());
  } else if (size < bytes.size()) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, bytes.data(), bytes.size());
  }
}

void sfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  std::string value;
  const int err = fs_of(req).do_getxattr(ino, name, &value);
  reply_xattr_bytes(req, err, value, size);
}

void sfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  std::string names;
  const int err = fs_of(req).do_listxattr(ino, &names);
  reply_xattr_bytes(req, err, names, size);
}

void sfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  fuse_reply_err(req, fs_of(req).do_removexattr(ino, name));
}

// libfuse calls the handlers from C: nothing may throw out of them. Out of
// DRAM (a directory of millions of names, a large file's bytes) fails the
// request with ENOMEM; since it may have come after the store changed and
// before the index did, the mount then fails every request (Fs::fail).
// Each handler replies after the work that allocates, so an exception
// leaves its request unanswered.
template <auto F, typename Sig = decltype(F)>
struct Guarded;
template <auto F, typename... A>
struct Guarded<F, void (*)(fuse_req_t, A...)> {
  static void call(fuse_req_t req, A... a) {
    Fs& fs = fs_of(req);
    if (fs.failed()) {
      fuse_reply_err(req, EIO);
      return;
    }
    try {
      F(req, a...);
    } catch (const std::exception&) {  // bad_alloc, length_error
      fs.fail("out of memory");
      fuse_reply_err(req, ENOMEM);
    }
  }
};

}  // namespace

fuse_lowlevel_ops make_operations() {
  fuse_lowlevel_ops ops{};
  ops.init = sfs_init;
  ops.lookup = Guarded<sfs_lookup>::call;
  ops.forget = sfs_forget;
  ops.forget_multi = sfs_forget_multi;
  ops.getattr = Guarded<sfs_getattr>::call;
  ops.setattr = Guarded<sfs_setattr>::call;
  ops.mknod = Guarded<sfs_mknod>::call;
  ops.mkdir = Guarded<sfs_mkdir>::call;
  ops.unlink = Guarded<sfs_unlink>::call;
  ops.rmdir = Guarded<sfs_rmdir>::call;
  ops.rename = Guarded<sfs_rename>::call;
  ops.link = Guarded<sfs_link>::call;
  ops.symlink = Guarded<sfs_symlink>::call;
  ops.readlink = Guarded<sfs_readlink>::call;
  ops.open = Guarded<sfs_open>::call;
  ops.create = Guarded<sfs_create>::call;
  ops.read = Guarded<sfs_read>::call;
  ops.write = Guarded<sfs_write>::call;
  ops.fallocate = Guarded<sfs_fallocate>::call;
  ops.lseek = Guarded<sfs_lseek>::call;
  ops.flush = Guarded<sfs_flush>::call;
  ops.release = Guarded<sfs_release>::call;
  ops.fsync = Guarded<sfs_fsync>::call;
  ops.opendir = Guarded<sfs_opendir>::call;
  ops.readdir = Guarded<sfs_readdir>::call;
  ops.readdirplus = Guarded<sfs_readdirplus>::call;
  ops.releasedir = Guarded<sfs_releasedir>::call;
  ops.fsyncdir = Guarded<sfs_fsyncdir>::call;
  ops.statfs = Guarded<sfs_statfs>::call;
  ops.setxattr = Guarded<sfs_setxattr>::call;
  ops.getxattr = Guarded<sfs_getxattr>::call;
  ops.listxattr = Guarded<sfs_listxattr>::call;
  ops.removexattr = Guarded<sfs_removexattr>::call;
  return ops;
}

}  // namespace pmfs
