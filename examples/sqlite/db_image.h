// pmsqlite::DbImage: the bytes of one SQLite database file, kept in a
// container. The file is a table of 64 KiB chunks (a chunk holds whole
// SQLite pages: every page size divides it) under the container's named root
// "sqlite"; a missing chunk reads as zeros.
//
// Every change is announced with will_write(), so a container opened with
// the hints tracker commits exactly the bytes SQLite wrote, with no page
// faults. Nothing here commits: the caller (the VFS's xSync) does, which is
// what makes a transaction atomic and durable.
//
// Thread safety: none. The VFS's lock levels keep writers exclusive.
#ifndef PMSQLITE_DB_IMAGE_H_
#define PMSQLITE_DB_IMAGE_H_

#include <cstddef>
#include <cstdint>

#include "pm/container.h"

namespace pmsqlite {

inline constexpr char kRootName[] = "sqlite";
inline constexpr unsigned kChunkShift = 16;
inline constexpr uint64_t kChunkBytes = uint64_t{1} << kChunkShift;

// The persistent root. Frozen: it is the file format.
struct ImageRoot {
  uint64_t magic;     // kImageMagic
  uint32_t version;   // 1
  uint32_t chunk_shift;
  uint64_t size;      // file size in bytes
  uint64_t capacity;  // entries in `chunks`
  std::byte** chunks; // capacity pointers to kChunkBytes data blocks, or nullptr
};
static_assert(sizeof(ImageRoot) == 40);
inline constexpr uint64_t kImageMagic = 0x31657469'6c717370ull;  // "psqlite1"

class DbImage {
 public:
  // The image in `c`, made (uncommitted) when the container has none.
  // kCorruption when the root is there but damaged.
  static pm::Result<DbImage> attach(pm::Container& c);

  uint64_t size() const { return root_->size; }

  // Copies [off, off+n) into buf, zeros past the end of the file. Returns
  // how many bytes were inside the file.
  size_t read(void* buf, size_t n, uint64_t off) const;

  // Writes, growing the file and the chunk table as needed. kNoSpace when
  // the container cannot grow (its max_size, or a full file system).
  pm::Status write(const void* buf, size_t n, uint64_t off);

  // Sets the size. Shrinking zeroes the cut tail of the last chunk and, with
  // `free_chunks`, frees whole chunks past the end (not while SQLite holds
  // pointers from fetch()).
  pm::Status truncate(uint64_t size, bool free_chunks);

  // Copies [off, off+n), which lies in one chunk inside the file, as the
  // container's last commit left it (Container::read_committed).
  // kNotFound when the last commit held no such range.
  pm::Status read_committed(void* buf, size_t n, uint64_t off) const;

  // The n bytes at off, in place, when they lie in one chunk inside the
  // file; else nullptr (SQLite then reads with read()).
  void* fetch(uint64_t off, size_t n) const;

 private:
  DbImage(pm::Container& c, ImageRoot* root) : c_(&c), root_(root) {}
  pm::Status reserve_table(uint64_t chunks);
  pm::Result<std::byte*> chunk_for_write(uint64_t index);
  void set_size(uint64_t size);
  void store_changed_lines(std::byte* to, const std::byte* from, size_t n);

  pm::Container* c_;
  ImageRoot* root_;
};

}  // namespace pmsqlite

#endif  // PMSQLITE_DB_IMAGE_H_
