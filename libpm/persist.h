// Persist: the one module that writes a container file.
//
// Every store to the file's home view and every flush, drain and sync goes
// through this interface, so that a test backend can record them and build
// crash images (what survives a power failure at any point). Words keep
// PMDK's meanings: write() stores without any ordering; flush() starts
// write-back of a range; drain() waits until everything flushed so far is
// durable (the barrier). Nothing written is durable before a drain() that
// follows its flush().
//
// Thread safety: not thread-safe (but see persist_range); the container
// serialises its use.
#ifndef LIBPM_PERSIST_H_
#define LIBPM_PERSIST_H_

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pm/status.h"

namespace pm {

class Persist {
 public:
  virtual ~Persist() = default;

  // True when flush+drain reach persistence with CPU cache flushes (real or
  // forced pmem); false when drain() is msync.
  virtual bool is_pmem() const = 0;

  // The home view: read-only to everyone but this module. Valid until the
  // next resize().
  virtual const std::byte* view() const = 0;
  virtual uint64_t size() const = 0;

  virtual void write(uint64_t off, const void* src, size_t n) = 0;
  virtual void flush(uint64_t off, size_t n) = 0;
  // write() then flush(); backends may do both at once (non-temporal copy).
  virtual void write_flushed(uint64_t off, const void* src, size_t n) {
    write(off, src, n);
    flush(off, n);
  }
  virtual Status drain() = 0;

  // Makes [off, off+n) durable now, independently of other flushed ranges.
  // In PmemFile this is thread-safe against concurrent calls on disjoint
  // ranges and against the other methods (except resize), so that raw-region
  // writers need not wait for a commit.
  virtual Status persist_range(uint64_t off, size_t n) {
    flush(off, n);
    return drain();
  }

  // Sets the file size to new_size; bytes in [keep, new_size) read as zero
  // afterwards. The size change is durable on return. Remaps the view.
  // REQUIRES: keep <= new_size.
  virtual Status resize(uint64_t keep, uint64_t new_size) = 0;

  // Bytes the file's file system can still give it (statvfs), or
  // UINT64_MAX when unknown. A growth that failed for want of room is tried
  // again once this has grown: space freed outside the container must let
  // it grow without waiting for a commit that may never come.
  virtual uint64_t free_bytes() const { return UINT64_MAX; }

  // A named point inside a long sequence without a barrier, for the crash
  // harness (e.g. between journal apply steps). No-op in production.
  virtual void kill_point(std::string_view /*name*/) {}

  // The file was renamed (a create publishing it under its final name).
  virtual void set_path(const std::string& /*path*/) {}

  // Whether this is a view of the file open at `fd` (a path replaced
  // between the lock's open and this one's names another file); true when
  // it cannot tell.
  virtual bool same_file(int /*fd*/) const { return true; }
};

// kNoSpace, naming the limit, when a file of `size` bytes would pass the
// process's RLIMIT_FSIZE: growing past it raises SIGXFSZ, which kills a
// process that does not ignore it, where a full disk is an error.
Status check_file_size_limit(uint64_t size, const std::string& path);

// Allocates blocks for [off, off + len) of the file (posix_fallocate), so
// that stores through a shared mapping never meet a hole: on a full disk
// they would raise SIGBUS. kNoSpace when the file system is full.
Status allocate_file_space(int fd, uint64_t off, uint64_t len, const std::string& path);

// A file with holes (a sparse copy: cp --sparse=always, tar -S, rsync -S)
// takes disk space when a hole is first written through a mapping, on
// tmpfs even when it is read; on a full disk that is SIGBUS. So an open
// fills them first (kNoSpace when there is no room); a read-only open,
// which may not, is refused (kNoSpace) on a tmpfs without room for them.
// Holes at or past `used_end` (bytes no recovery or heap reads: a growth
// that a crash cut short between extending the file and allocating it)
// are cut off instead by a writable open, and passed over by a read-only
// one: filling them needed room a full disk did not have, and the file
// could not be opened at all.
Status fill_holes(int fd, struct stat st, bool read_only, uint64_t used_end,
                  const std::string& path);

// Opens the home view of an existing file through libpmem (pmem_map_file).
Result<std::unique_ptr<Persist>> open_pmem_file(const std::string& path);

// A private copy of an existing file, opened read-only: write() changes only
// this process's copy; drain(), persist_range() and resize() fail with
// kReadOnly.
Result<std::unique_ptr<Persist>> open_read_only_file(const std::string& path);

// How a container obtains its Persist; tests substitute recording backends.
using PersistOpener = std::function<Result<std::unique_ptr<Persist>>(const std::string& path)>;

}  // namespace pm

#endif  // LIBPM_PERSIST_H_
