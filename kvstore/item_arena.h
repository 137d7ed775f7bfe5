// Memory for the frontend's items, on huge pages (docs/impl.md, "Items on
// huge pages").
//
// Items are read at random and a million of them span about 180 MB: on
// 4 KiB pages nearly every lookup of a cold item also misses the TLB. So
// items come from 2 MiB-aligned regions that the kernel is asked to back
// with huge pages (MADV_HUGEPAGE: a hint, honoured where transparent huge
// pages are enabled for madvise), carved by a bump pointer, with a free
// list per 16-byte size class up to kMaxSmall; larger items use malloc.
// No header per item: the caller passes the size back when it frees.
//
// Freed items are reused, not returned to the system, until every item
// of the process is freed (the stores closed): then every region is. Under
// AddressSanitizer everything goes to malloc, so that item overflows are
// still caught.
//
// Thread safety: both functions, from any thread (one mutex: items are
// allocated only for new keys and values that outgrow their item, and
// freed by reclamation). The mutex is held across fork(), as malloc's
// locks are, so that a child can allocate.
#ifndef KVSTORE_ITEM_ARENA_H_
#define KVSTORE_ITEM_ARENA_H_

#include <cstddef>

namespace kv::item_arena {

inline constexpr size_t kMaxSmall = 1024;

// `bytes` bytes aligned to 16 (bytes: a multiple of 16); nullptr when the
// system has no memory for them.
void* allocate(size_t bytes);
// Frees what allocate(bytes) returned.
void release(void* p, size_t bytes);

// Bytes of the regions mapped now (for tests).
size_t mapped_bytes();

}  // namespace kv::item_arena

#endif  // KVSTORE_ITEM_ARENA_H_
