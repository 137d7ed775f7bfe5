// Memory for the frontend's items, on huge pages (docs/impl.md, "Items on
// huge pages").
//
// Items are read at random and a million of them span about 180 MB: on
// 4 KiB pages nearly every lookup of a cold item also misses the TLB. So
// items of up to kMaxSmall bytes come from 2 MiB-aligned regions, one size
// class (16-byte steps) per region, each carved by a bump pointer with a
// free list; larger items use malloc. No header per item: the caller
// passes the size back when it frees. A class's first two regions stay on
// small pages (a small store holds what it uses); the kernel is asked to
// back the others with huge pages (MADV_HUGEPAGE: a hint, honoured where
// transparent huge pages are enabled for madvise).
//
// A region whose items are all freed goes back to the system (the last
// one of its class only gives its pages back): values that move to another
// size class, or items evicted under a DRAM budget, do not pin the regions
// they emptied (one item left pins its region, as with any allocator of
// pages). Under ASan and
// TSan everything goes to malloc, so that overflows and uses after
// reclamation are still caught.
//
// Thread safety: every function, from any thread (one mutex: items are
// allocated only for new keys and values that outgrow theirs, and freed
// by reclamation). The mutex is held across fork(), as malloc's locks
// are, so that a child can allocate.
#ifndef KVSTORE_ITEM_ARENA_H_
#define KVSTORE_ITEM_ARENA_H_

#include <cstddef>

namespace kv::item_arena {

inline constexpr size_t kMaxSmall = 1024;
inline constexpr size_t kRegionBytes = size_t{2} << 20;

// `bytes` bytes aligned to 16 (bytes: a multiple of 16); nullptr when the
// system has no memory for them.
void* allocate(size_t bytes);
// Frees what allocate(bytes) returned.
void release(void* p, size_t bytes);

// For tests: bytes of the regions mapped now, and of the items allocated
// from them and not yet released.
size_t mapped_bytes();
size_t live_bytes();

}  // namespace kv::item_arena

#endif  // KVSTORE_ITEM_ARENA_H_
