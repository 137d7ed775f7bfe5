// Internals shared by the files that implement pmfs::Fs (fs.cc: state,
// attributes, content and space; fs_index.cc: the index built at mount;
// fs_names.cc: names and listings; fs_files.cc: open files; fs_xattr.cc:
// extended attributes). Not a public header.
#ifndef PMFS_FS_INTERNAL_H_
#define PMFS_FS_INTERNAL_H_

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/fs.h"
#include "fuse/key_names.h"
#include "kv/store.h"

namespace pmfs {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

inline timespec to_timespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) ts.tv_nsec += 1000000000, ts.tv_sec--;
  return ts;
}

inline int64_t to_ns(const timespec& ts) { return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec; }

inline std::string meta_key(std::string_view key) { return std::string(kMetaPrefix) += key; }
inline std::string dir_key(std::string_view key) { return std::string(kDirPrefix) += key; }
inline std::string xattr_key(std::string_view key) { return std::string(kXattrPrefix) += key; }

// The types a file's record may give it (a directory is one by its keys).
inline bool valid_file_type(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK:
      return true;
    default:
      return false;
  }
}

inline bool writable(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }


// What Linux does on a local file system (should_remove_suid): a write or a
// truncation by a process without CAP_FSETID (here: not root) clears
// set-user-ID, and set-group-ID where the group may execute (without group
// execute it marks mandatory locking and stays).
// Returns whether the mode changed.
inline bool kill_suid(Meta* m, const Caller& c) {
  if (c.uid == 0) return false;
  const uint32_t kill = S_ISUID | ((m->mode & S_IXGRP) ? S_ISGID : 0);
  if ((m->mode & kill) == 0) return false;
  m->mode &= ~kill;
  return true;
}

// Puts and removes that commit as one store transaction. They are kept
// until the Batch goes, so that a commit refused for room can be tried
// again once removed files' chunks made some (Fs::commit).
class Fs::Batch {
 public:
  explicit Batch(kv::Store* s) : store_(s) {}
  void put(std::string_view k, std::string_view v) { ops_.push_back({false, k, v}); }
  void remove(std::string_view k) { ops_.push_back({true, k, {}}); }
  void put_dir(std::string_view key, const Meta& m) { put(dir_key(key), encode_meta(m)); }
  // A name of the file with hard links whose inode key holds id; m is kept
  // in its record for readers that know no links (only the flag counts).
  void put_link(std::string_view name_key, uint64_t id, Meta m) {
    m.link = true;
    m.chunked = false;
    m.ino = 0;  // the inode's record holds it
    put(name_key, id_key("", id));
    put(meta_key(name_key), encode_meta(m));
  }
  pm::Status commit() {
    std::unique_ptr<kv::Transaction> t = store_->begin();
    for (const Op& op : ops_) PM_TRY(op.remove ? t->remove(op.key) : t->put(op.key, op.value));
    return t->commit();
  }

 private:
  struct Op {
    Op(bool r, std::string_view k, std::string_view v) : remove(r), key(k), value(v) {}
    bool remove;
    std::string key, value;
  };
  kv::Store* store_;
  std::vector<Op> ops_;
};

}  // namespace pmfs

#endif  // PMFS_FS_INTERNAL_H_
