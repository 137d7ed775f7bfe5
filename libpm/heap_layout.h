// Persistent layout of the heap (the working view from the container's base
// address). Specified in docs/container_format.md; changes bump kFormatVersion.
//
//   page 0            HeapHeader (roots, counters, generation)
//   page 1 ...        segment 0: SegmentHeader + page map, then data pages
//   ...               segment 1, 2, ...: appended when the heap grows
//
// The page map has one 32-bit entry per page of its segment: a kind in the
// top 4 bits and a value in the low 28.
#ifndef LIBPM_HEAP_LAYOUT_H_
#define LIBPM_HEAP_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace pm {

inline constexpr uint64_t kHeapMagic = 0x3130504145484d50ull;     // "PMHEAP01"
inline constexpr uint64_t kSegmentMagic = 0x3130544e47534d50ull;  // "PMSGNT01"
inline constexpr uint32_t kSlabMagic = 0x42414c53u;               // "SLAB"
inline constexpr int kMaxNamedRoots = 32;
inline constexpr size_t kMaxRootName = 47;

struct NamedRoot {
  char name[48];  // NUL-terminated; empty = free slot
  uint64_t off;   // heap offset of the object
  uint64_t reserved;
};
static_assert(sizeof(NamedRoot) == 64);

struct HeapHeader {
  uint64_t magic;
  uint64_t heap_size;  // bytes from the base to the end of the last segment
  uint64_t generation;
  uint64_t root;  // heap offset of the root object, 0 = none
  uint64_t used_bytes;
  uint64_t blocks;
  uint64_t segments;
  uint64_t reserved[9];
  NamedRoot roots[kMaxNamedRoots];
};
static_assert(sizeof(HeapHeader) == 128 + 64 * kMaxNamedRoots);
static_assert(sizeof(HeapHeader) <= 4096);

struct SegmentHeader {
  uint64_t magic;
  uint64_t npages;      // pages in the segment, metadata pages included
  uint64_t meta_pages;  // header + page map pages at the segment start
  uint64_t reserved[5];
  // uint32_t map[npages] follows.
};
static_assert(sizeof(SegmentHeader) == 64);

// Page map entry kinds (frozen).
enum class PageKind : uint32_t {
  kFree = 0,
  kMeta = 1,      // segment header / page map
  kRunHead = 2,   // value: pages in the run
  kRunTail = 3,   // value: distance back to the head page
  kSlabHead = 4,  // value: size class
  kSlabTail = 5,  // value: distance back to the head page
};
inline constexpr uint32_t kPageValueMask = (1u << 28) - 1;
inline uint32_t page_entry(PageKind k, uint64_t v) {
  return (static_cast<uint32_t>(k) << 28) | static_cast<uint32_t>(v);
}
inline PageKind entry_kind(uint32_t e) { return static_cast<PageKind>(e >> 28); }
inline uint32_t entry_value(uint32_t e) { return e & kPageValueMask; }

// At the start of every slab span; objects start at the class's first_off.
struct SlabHeader {
  uint32_t magic;
  uint16_t size_class;
  uint16_t nfree;
  uint64_t bitmap[1];  // really ceil(objects/64) words
};

}  // namespace pm

#endif  // LIBPM_HEAP_LAYOUT_H_
