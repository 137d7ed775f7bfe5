// A backend entry's layout and what makes one valid; shared by the backend
// and the store checker (check.h).
//
//   next u64 | seq u64 | klen u32 | vlen u32 | key | value or ghost link | [checksum u64]
//
// klen holds the key length (at most 65535) and two flags: kGhostBit (a
// remembered removal: no value, an 8-byte link in the ghost list instead)
// and kSumBit (an XXH3 checksum of seq, lengths, key and value follows, at
// an unaligned offset). Entries written since checksums came (every entry of
// a store created since) carry one; an older store's entries may not.
#ifndef KVSTORE_BACKEND_ENTRY_H_
#define KVSTORE_BACKEND_ENTRY_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "pm/container.h"

namespace kv {

struct BackendEntry {
  BackendEntry* next;
  uint64_t seq;
  uint32_t klen;  // key length | kGhostBit | kSumBit
  uint32_t vlen;
  char data[];
};
static_assert(sizeof(BackendEntry) == 24);

inline constexpr uint32_t kGhostBit = 0x80000000u;
inline constexpr uint32_t kSumBit = 0x40000000u;
inline constexpr uint32_t kKeyLenMask = 0x3fffffffu;

inline uint32_t entry_key_len(const BackendEntry* e) { return e->klen & kKeyLenMask; }
inline bool entry_is_ghost(const BackendEntry* e) { return (e->klen & kGhostBit) != 0; }
inline bool entry_has_sum(const BackendEntry* e) { return (e->klen & kSumBit) != 0; }
inline std::string_view entry_key(const BackendEntry* e) { return {e->data, entry_key_len(e)}; }
inline std::string_view entry_value(const BackendEntry* e) {
  return entry_is_ghost(e) ? std::string_view() : std::string_view(e->data + entry_key_len(e), e->vlen);
}
// Bytes after the key: the value, or the ghost link.
inline uint64_t entry_data_len(const BackendEntry* e) {
  return entry_is_ghost(e) ? sizeof(void*) : e->vlen;
}
// Bytes of an entry with these contents.
inline uint64_t entry_bytes(uint64_t klen, uint64_t data_len) {
  return sizeof(BackendEntry) + klen + data_len + sizeof(uint64_t);
}
inline uint64_t entry_size(const BackendEntry* e) {
  return sizeof(BackendEntry) + entry_key_len(e) + entry_data_len(e) +
         (entry_has_sum(e) ? sizeof(uint64_t) : 0);
}
inline BackendEntry* entry_ghost_link(const BackendEntry* e) {
  BackendEntry* p;
  std::memcpy(&p, e->data + entry_key_len(e), sizeof p);
  return p;
}

// Chain ends. In a store with kChainEndsMarked (backend.h) the link that
// ends bucket b's chain holds kChainEndTag | b << 1, not 0: odd, it is
// never an entry's address, and it names its bucket, so a link that damage
// zeroed (or pointed at another chain's end) is told from a chain's end. A
// 0 there would end the chain early and hide every key after it as a miss;
// the entries' checksums do not cover their links. The tag's high bits keep
// the mark out of the heap read either way the heap's conservative marking
// reads a word (reach.cc: an address, or an offset from the word): small
// marks, read as offsets, pointed into the segment itself, and each cost a
// search for the block holding that address (the crash harness, which
// checks every crash image's heap, ran nine times slower).
inline constexpr uint64_t kChainEndTag = 0xc000000000000001;
inline BackendEntry* chain_end(uint64_t bucket) {
  return reinterpret_cast<BackendEntry*>(kChainEndTag | bucket << 1);
}
// The end of a chain, marked or not (what a walk stops at).
inline bool is_chain_end(const BackendEntry* e) {
  return e == nullptr || (reinterpret_cast<uintptr_t>(e) & 1) != 0;
}

// The checksum the entry should carry now.
uint64_t entry_checksum(const BackendEntry* e);
// True when the entry has no checksum, or a matching one.
bool entry_sum_ok(const BackendEntry* e);
// Stores the checksum (the entry must have kSumBit) and announces the write.
void entry_seal(pm::Container* c, BackendEntry* e);

// "" when the entry lies inside [lo, hi) with lengths within the limits,
// else what is wrong. Reads only the header until the lengths are known to
// be sane, so a damaged entry cannot send it out of the mapping.
std::string entry_problem(const BackendEntry* e, uintptr_t lo, uintptr_t hi, uint32_t max_key,
                          uint32_t max_value);

}  // namespace kv

#endif  // KVSTORE_BACKEND_ENTRY_H_
