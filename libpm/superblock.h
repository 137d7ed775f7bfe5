// Superblock: the first 512 bytes of a container file, written once at create
// (with a copy at kSuperblockCopyOffset).
// Layout is specified in docs/container_format.md; a change bumps kFormatVersion.
#ifndef LIBPM_SUPERBLOCK_H_
#define LIBPM_SUPERBLOCK_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "pm/status.h"

namespace pm {

inline constexpr char kSuperblockMagic[8] = {'P', 'M', 'C', 'O', 'N', 'T', 'N', 'R'};
// Version 2 added the raw region (heap_offset may exceed 4096); version-1
// files (no raw region) are read as they are. Version 3 keeps small objects
// in granule pages (heap format 2); version-1 and -2 files keep their slab
// heap and are read and written as they are. Version 4 adds a second
// journal header slot (libpm/journal.h), so that off pmem a commit's
// write-back can wait for the next commit's flush; version-3 files keep one
// slot and drain every write-back.
inline constexpr uint32_t kFormatVersion = 4;
inline constexpr uint64_t kPageSize = 4096;
// File offset of the raw region (Options::raw_bytes); the heap follows it,
// at sb.heap_offset. Without a raw region the heap starts here.
inline constexpr uint64_t kHeapOffset = 4096;
inline constexpr uint64_t kMaxRawBytes = 16ull << 30;
// A copy of the superblock, written with it at create (never changed after,
// like the superblock): open() falls back on it when the superblock itself
// is damaged. Zero in files made before it (nothing else uses the bytes).
inline constexpr uint64_t kSuperblockCopyOffset = 4096 - 512;
// Journal header slots: slot 0 in every version, slot 1 from version 4.
inline constexpr uint64_t kJournalHeaderOffset = 512;
inline constexpr uint64_t kJournalSlot1Offset = 576;

struct Superblock {
  char magic[8];
  uint32_t version;
  uint32_t superblock_size;  // sizeof(Superblock)
  uint64_t page_size;
  uint64_t heap_offset;
  uint64_t base_address;  // where the heap is mapped
  uint64_t max_size;      // reserved heap bytes
  uint64_t created_ns;    // CLOCK_REALTIME at create
  uint8_t uuid[16];
  char layout[32];  // NUL-terminated
  uint8_t reserved[400];
  uint64_t checksum;  // XXH3-64 of all bytes before it
};
static_assert(sizeof(Superblock) == 512);
static_assert(offsetof(Superblock, checksum) == 504);

uint64_t superblock_checksum(const Superblock& sb);

// Validates magic, version, checksum and field ranges against the file size.
// The message says which check failed.
Status validate_superblock(const Superblock& sb, uint64_t file_size);

}  // namespace pm

#endif  // LIBPM_SUPERBLOCK_H_
