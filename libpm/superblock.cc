#include "libpm/superblock.h"

#include <xxhash.h>

#include <cstring>

namespace pm {

uint64_t superblock_checksum(const Superblock& sb) {
  return XXH3_64bits(&sb, offsetof(Superblock, checksum));
}

Status validate_superblock(const Superblock& sb, uint64_t file_size) {
  if (std::memcmp(sb.magic, kSuperblockMagic, sizeof sb.magic) != 0) {
    return Status::corruption("not a libpm container (bad magic)");
  }
  if (sb.version != kFormatVersion && sb.version != 3 && sb.version != 2 &&
      !(sb.version == 1 && sb.heap_offset == kHeapOffset)) {
    return Status::not_supported("container format version " + std::to_string(sb.version) +
                                 "; this build reads version " + std::to_string(kFormatVersion));
  }
  if (superblock_checksum(sb) != sb.checksum) {
    return Status::corruption("superblock checksum mismatch (damaged; run 'pm check')");
  }
  if (sb.superblock_size != sizeof(Superblock) || sb.page_size != kPageSize ||
      sb.heap_offset < kHeapOffset ||
      sb.heap_offset > kHeapOffset + kMaxRawBytes || sb.heap_offset % kPageSize != 0 || sb.base_address % (1ull << 30) != 0 ||
      sb.max_size % (1ull << 30) != 0 || sb.max_size == 0 || sb.base_address == 0 ||
      sb.base_address + sb.max_size < sb.base_address || sb.layout[31] != '\0') {
    return Status::corruption("superblock fields out of range");
  }
  if (file_size < sb.heap_offset + kPageSize) {
    return Status::corruption("file truncated: " + std::to_string(file_size) +
                              " bytes is smaller than the smallest container");
  }
  return Status();
}

}  // namespace pm
