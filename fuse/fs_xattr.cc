// Fs: extended attributes, one record per file or directory that has any
// (docs/fuse.md, "Extended attributes").
#include <sys/xattr.h>

#include <cerrno>
#include <functional>
#include <string>

#include "fuse/errno_map.h"
#include "fuse/fs.h"
#include "fuse/fs_internal.h"

namespace pmfs {

// ---------------------------------------------------------------- extended attributes

namespace {

// Namespaces kept as they are; system.* (POSIX ACLs) would need enforcing.
int check_xattr_name(const char* name) {
  const std::string_view n(name);
  if (n.empty() || n.size() > XATTR_NAME_MAX) return ERANGE;
  for (std::string_view ns : {"user.", "security.", "trusted."}) {
    if (n.starts_with(ns) && n.size() > ns.size()) return 0;
  }
  return ENOTSUP;
}

}  // namespace

int Fs::read_xattrs(const Node& n, Xattrs* out) {
  out->clear();
  if (!n.has_xattrs) return 0;
  std::string record;
  if (n.parent == 0 && n.ino != kRootIno) {  // detached, still open: kept in DRAM
    if (n.unlinked_xattrs.empty()) return 0;
    record = n.unlinked_xattrs;
  } else {
    pm::Status s = store_->get(xattr_key(n.key), &record);
    if (s.is_not_found()) return 0;
    if (!s.ok()) return to_errno(s);
  }
  std::optional<Xattrs> x = decode_xattrs(record);
  if (!x) {
    fuse_log(FUSE_LOG_ERR, "pmfs: inode %llu: damaged extended attribute record\n",
             static_cast<unsigned long long>(n.ino));
    return EIO;
  }
  *out = std::move(*x);
  return 0;
}

// Reads the attributes, applies `change`, stores them with the new ctime.
int Fs::change_xattrs(Ino ino, const std::function<int(Xattrs*)>& change) {
  std::unique_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  if (int err = change(&x)) return err;
  Meta m = n->meta;
  m.ctime_ns = now_ns();
  const bool stored = n->parent != 0 || n->ino == kRootIno;  // a detached node has no keys
  if (stored) {
    Batch b(store_.get());
    if (x.empty()) {
      b.remove(xattr_key(n->key));
    } else {
      b.put(xattr_key(n->key), encode_xattrs(x));
    }
    if (n->is_dir()) {
      b.put_dir(n->key, m);
    } else {
      b.put(meta_key(n->key), encode_meta(m));
    }
    if (int err = commit(b, ENOSPC)) return err;  // over the store's value limit
    n->has_record = true;
  } else {
    n->unlinked_xattrs = x.empty() ? std::string() : encode_xattrs(x);
  }
  n->has_xattrs = !x.empty();
  n->meta = m;
  return 0;
}

int Fs::do_setxattr(Ino ino, const char* name, std::string_view value, int flags) {
  if (int err = check_xattr_name(name)) return err;
  if (value.size() > XATTR_SIZE_MAX) return E2BIG;
  return change_xattrs(ino, [&](Xattrs* x) {
    const bool exists = x->count(name) != 0;
    if ((flags & XATTR_CREATE) && exists) return EEXIST;
    if ((flags & XATTR_REPLACE) && !exists) return ENODATA;
    (*x)[name] = std::string(value);
    return 0;
  });
}

int Fs::do_removexattr(Ino ino, const char* name) {
  if (int err = check_xattr_name(name)) return err == ENOTSUP ? ENODATA : err;
  return change_xattrs(ino, [&](Xattrs* x) { return x->erase(name) == 1 ? 0 : ENODATA; });
}

int Fs::do_getxattr(Ino ino, const char* name, std::string* value) {
  std::shared_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  auto it = x.find(name);
  if (it == x.end()) return ENODATA;
  *value = it->second;
  return 0;
}

int Fs::do_listxattr(Ino ino, std::string* names) {
  std::shared_lock lock(mu_);
  Node* n = table_.get(ino);
  if (n == nullptr) return ENOENT;
  Xattrs x;
  if (int err = read_xattrs(*n, &x)) return err;
  names->clear();
  for (const auto& [k, v] : x) (*names += k) += '\0';
  return 0;
}

}  // namespace pmfs
