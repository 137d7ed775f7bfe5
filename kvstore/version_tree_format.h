// The version tree's file format (docs/ordered.md): the superblock, node
// and slot layouts, and the rules a slot's bytes obey. One struct, so that
// VersionTree::Impl (version_tree_impl.h) reads the names as its own.
#ifndef KVSTORE_VERSION_TREE_FORMAT_H_
#define KVSTORE_VERSION_TREE_FORMAT_H_

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "kvstore/planted_bugs.h"
#include "pm/status.h"

namespace kv {

struct TreeFormat {
  static constexpr char kMagic[8] = {'P', 'M', 'V', 'T', 'R', 'E', 'E', '1'};
  static constexpr uint32_t kFormat = 1;
  static constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
  static constexpr uint32_t kLeafMagic = 0x4641454c;   // "LEAF"
  static constexpr uint32_t kInnerMagic = 0x524e4e49;  // "INNR"
  static constexpr uint64_t kNodeHeader = 64;
  static constexpr uint32_t kMaxHeight = 32;

  // Superblock, node 0 of the file. The immutable part and its checksum, then
  // the two root slots, then the committed version alone in its line.
  static constexpr uint64_t kSbChecksum = 32;
  static constexpr uint64_t kSbRoots = 64;
  static constexpr uint64_t kSbVersion = 128;

  // Node header: u32 magic, u32 level (0: leaf), u32 slot count.
  // Leaf slot:  u64 start, u64 end, u16 key length, u16 value length, u32 0,
  //             key[key_max], value[value_max].
  // Inner slot: u64 start, u64 end, u64 child, u16 key length, 6 bytes 0,
  //             key[key_max]: the child holds keys >= key (below the next).
  static constexpr uint64_t kStart = 0, kEnd = 8, kLeafKlen = 16, kLeafVlen = 18, kLeafKey = 24;
  static constexpr uint64_t kChild = 16, kInnerKlen = 24, kInnerKey = 32;

  // Slots are 16-byte multiples after a 64-byte header, so a slot's start and
  // end versions share one aligned 16 bytes: one cache line, one disk sector.
  // A torn write of a reused slot therefore leaves both old (the dead entry,
  // invisible) or both new (start > committed: freed by recovery), never an
  // old start with a new end, which would revive a dead entry.
  static uint64_t round16(uint64_t n) { return (n + 15) & ~uint64_t{15}; }
  static uint64_t round8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }  // planted bug only

  static bool visible(uint64_t start, uint64_t end, uint64_t v) {
    return start != 0 && start <= v && v < end;
  }

  struct Layout {
    uint32_t node_bytes = 0, key_max = 0, value_max = 0, fanout = 0;
    uint64_t leaf_slot = 0, inner_slot = 0;
    uint32_t leaf_slots = 0, inner_slots = 0;

    static pm::Result<Layout> make(uint32_t node_bytes, uint32_t key_max, uint32_t value_max,
                              uint32_t fanout) {
      Layout l{node_bytes, key_max, value_max, fanout, 0, 0, 0, 0};
      if (node_bytes < 4096 || node_bytes % 4096 != 0 || node_bytes > (1u << 24)) {
        return pm::Status::invalid_argument("node size " + std::to_string(node_bytes) +
                                        " is not a multiple of 4096 up to 16 MiB");
      }
      if (key_max < 1 || key_max > 255) {
        return pm::Status::invalid_argument("key limit " + std::to_string(key_max) +
                                        " is outside 1..255 bytes");
      }
      const auto round = g_kv_planted_bugs.tree_unaligned_slots ? round8 : round16;
      l.leaf_slot = round(kLeafKey + key_max + value_max);
      l.inner_slot = round(kInnerKey + key_max);
      l.leaf_slots = static_cast<uint32_t>((node_bytes - kNodeHeader) / l.leaf_slot);
      l.inner_slots = static_cast<uint32_t>((node_bytes - kNodeHeader) / l.inner_slot);
      if (fanout != 0 && fanout < 4) {
        return pm::Status::invalid_argument("fanout " + std::to_string(fanout) + " is below 4");
      }
      if (fanout != 0) {
        l.leaf_slots = std::min(l.leaf_slots, fanout);
        l.inner_slots = std::min(l.inner_slots, fanout);
      }
      l.leaf_slots = std::min(l.leaf_slots, 65535u);  // the DRAM order holds u16 slot ids
      l.inner_slots = std::min(l.inner_slots, 65535u);
      if (l.leaf_slots < std::min<uint32_t>(8, fanout == 0 ? 8 : fanout)) {
        return pm::Status::invalid_argument("value limit " + std::to_string(value_max) +
                                        " leaves fewer than 8 entries in a " +
                                        std::to_string(node_bytes) + "-byte node");
      }
      return l;
    }
    uint64_t slot_bytes(bool leaf) const { return leaf ? leaf_slot : inner_slot; }
    uint32_t slots(bool leaf) const { return leaf ? leaf_slots : inner_slots; }
  };

  // memcpy of a string_view that may be empty (with a null data()).
  static void copy_to(std::byte* dst, std::string_view src) {
    if (!src.empty()) std::memcpy(dst, src.data(), src.size());
  }

  static uint64_t sb_checksum(const std::byte* sb) { return XXH3_64bits(sb, kSbChecksum); }
};

}  // namespace kv

#endif  // KVSTORE_VERSION_TREE_FORMAT_H_
