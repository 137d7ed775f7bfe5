#include "crash/fuse_walk.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <vector>

namespace pm::crash {

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

Status errno_status(int err, const std::string& what) {
  if (err == 0) return Status();
  return Status::io_error(fmt::format("{}: {}", what, std::strerror(err)));
}

namespace {

// The entries of one readdir buffer (struct fuse_dirent, 8-byte aligned).
struct Dirent {
  std::string name;
  uint64_t off;
};
std::vector<Dirent> parse_dirents(const std::string& buf) {
  std::vector<Dirent> out;
  for (size_t pos = 0; pos + 24 <= buf.size();) {
    uint64_t off;
    uint32_t namelen;
    std::memcpy(&off, buf.data() + pos + 8, 8);
    std::memcpy(&namelen, buf.data() + pos + 16, 4);
    out.push_back({buf.substr(pos + 24, namelen), off});
    pos += (24 + namelen + 7) / 8 * 8;
  }
  return out;
}

Status read_xattrs(pmfs::Fs& fs, pmfs::Ino ino, const std::string& path,
                  std::map<std::string, std::string>* out) {
  std::string names;
  PM_TRY(errno_status(fs.do_listxattr(ino, &names), "listxattr " + path));
  for (size_t pos = 0; pos < names.size();) {
    const std::string name = names.substr(pos, names.find('\0', pos) - pos);
    pos += name.size() + 1;
    PM_TRY(errno_status(fs.do_getxattr(ino, name.c_str(), &(*out)[name]), "getxattr " + path));
  }
  return Status();
}

}  // namespace

// What a fresh mount of the store shows below directory `ino` (at `path`),
// through the same calls the kernel makes: readdir, lookup, read, readlink.
Status walk(pmfs::Fs& fs, pmfs::Ino ino, const std::string& path, Tree* out) {
  off_t off = 0;
  for (;;) {
    std::string buf;
    PM_TRY(errno_status(fs.do_readdir(nullptr, ino, 4096, off, false, &buf), "readdir " + path));
    const std::vector<Dirent> ents = parse_dirents(buf);
    if (ents.empty()) return Status();
    for (const Dirent& d : ents) {
      off = static_cast<off_t>(d.off);
      if (d.name == "." || d.name == "..") continue;
      const std::string p = join(path, d.name);
      fuse_entry_param e;
      PM_TRY(errno_status(fs.do_lookup(ino, d.name.c_str(), &e), "lookup " + p));
      if (e.ino == 0) return Status::corruption("listed but not found: " + p);
      Entry entry{'F', static_cast<uint32_t>(e.attr.st_mode & 07777), "",
                  static_cast<uint32_t>(e.attr.st_nlink), e.ino};
      if (S_ISDIR(e.attr.st_mode)) {
        entry.type = 'D';
        entry.nlink = 1;
        PM_TRY(walk(fs, e.ino, p, out));
      } else if (S_ISLNK(e.attr.st_mode)) {
        entry.type = 'L';
        PM_TRY(errno_status(fs.do_readlink(e.ino, &entry.data), "readlink " + p));
      } else {
        pmfs::Handle* h = nullptr;
        bool ignored = false;
        PM_TRY(errno_status(fs.do_open(e.ino, O_RDONLY, pmfs::Caller{0, 0}, &h, &ignored),
                            "open " + p));
        const int err = fs.do_read(h, 1 << 20, 0, &entry.data);
        fs.do_release(h);
        PM_TRY(errno_status(err, "read " + p));
      }
      if (entry.type != 'L') PM_TRY(read_xattrs(fs, e.ino, p, &entry.xattrs));
      (*out)[p] = std::move(entry);
    }
  }
}

}  // namespace pm::crash
