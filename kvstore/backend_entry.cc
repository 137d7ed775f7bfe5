#include "kvstore/backend_entry.h"

#include <xxhash.h>

namespace kv {

uint64_t entry_checksum(const BackendEntry* e) {
  // Key and value are contiguous; the header fields go into the seed.
  const uint64_t lens = uint64_t{e->klen & ~kSumBit} << 32 | (entry_is_ghost(e) ? 0u : e->vlen);
  const uint64_t seed = e->seq * 0x9E3779B97F4A7C15ull ^ lens * 0xC2B2AE3D27D4EB4Full;
  return XXH3_64bits_withSeed(e->data, entry_key_len(e) + (entry_is_ghost(e) ? 0 : e->vlen),
                              seed);
}

bool entry_sum_ok(const BackendEntry* e) {
  if (!entry_has_sum(e)) return true;
  uint64_t stored;
  std::memcpy(&stored, e->data + entry_key_len(e) + entry_data_len(e), sizeof stored);
  return stored == entry_checksum(e);
}

void entry_seal(pm::Container* c, BackendEntry* e) {
  const uint64_t sum = entry_checksum(e);
  char* at = e->data + entry_key_len(e) + entry_data_len(e);
  c->will_write(at, sizeof sum);
  std::memcpy(at, &sum, sizeof sum);
}

std::string entry_problem(const BackendEntry* e, uintptr_t lo, uintptr_t hi, uint32_t max_key,
                          uint32_t max_value) {
  const auto at = reinterpret_cast<uintptr_t>(e);
  if (at < lo || at % 8 != 0 || at > hi || hi - at < sizeof(BackendEntry)) {
    return "an entry link points out of the heap";
  }
  const uint32_t klen = entry_key_len(e);
  if (klen == 0 || klen > max_key || (e->klen & ~(kKeyLenMask | kGhostBit | kSumBit)) != 0) {
    return "an entry's key length (" + std::to_string(e->klen) + ") is out of range";
  }
  if (!entry_is_ghost(e) && e->vlen > max_value) {
    return "an entry's value length (" + std::to_string(e->vlen) + ") is over the limit";
  }
  if (hi - at < entry_size(e)) return "an entry runs past the end of the heap";
  return "";
}

}  // namespace kv
