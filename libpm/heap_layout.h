// Persistent layout of the heap (the working view from the container's base
// address). Specified in docs/container_format.md; changes bump kFormatVersion.
//
//   page 0            HeapHeader (roots, counters, generation)
//   page 1 ...        segment 0: SegmentHeader + page map [+ granule bitmaps],
//                     then data pages
//   ...               segment 1, 2, ...: appended when the heap grows
//
// The page map has one 32-bit entry per page of its segment: a kind in the
// top 4 bits and a value in the low 28.
//
// Two heap formats share this file. Version 1 ("PMHEAP01" / "PMSGNT01")
// keeps small objects in size-class slabs. Version 2 ("PMHEAP02" /
// "PMSGNT02", container format 3) keeps them in granule pages: 8-byte
// granules with an allocation bit and a start bit each, held out of line in
// the segment's metadata so that objects pack tightly, may cross into the
// next granule page, and free neighbours coalesce. A heap keeps its format
// for life (growth appends segments of the same version).
//
// Data blocks (pointer-free, AllocKind::kData; heap format 2 only) are told
// apart by their pages, as conservative collectors keep atomic objects in
// blocks of their own: granule pages with value 1 hold only data objects,
// and a data page run has kind kDataRunHead. Files without data blocks are
// unchanged, so earlier files read as they are (every block an object).
#ifndef LIBPM_HEAP_LAYOUT_H_
#define LIBPM_HEAP_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace pm {

inline constexpr uint64_t kHeapMagic = 0x3130504145484d50ull;       // "PMHEAP01"
inline constexpr uint64_t kSegmentMagic = 0x3130544e47534d50ull;    // "PMSGNT01"
inline constexpr uint64_t kHeapMagicV2 = 0x3230504145484d50ull;     // "PMHEAP02"
inline constexpr uint64_t kSegmentMagicV2 = 0x3230544e47534d50ull;  // "PMSGNT02"
inline constexpr uint32_t kSlabMagic = 0x42414c53u;                 // "SLAB"
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
  kMeta = 1,         // segment header / page map
  kRunHead = 2,      // value: pages in the run
  kRunTail = 3,      // value: distance back to the head page
  kSlabHead = 4,     // value: size class
  kSlabTail = 5,     // value: distance back to the head page
  kGran = 6,         // value: kGranObjects or kGranData (version-2 segments only)
  kDataRunHead = 7,  // value: pages in the run; a pointer-free block (version-2 segments)
};
// Values of a kGran entry: which objects the granule page holds. An object
// runs on into the next page only if that page has the same entry.
inline constexpr uint32_t kGranObjects = 0;
inline constexpr uint32_t kGranData = 1;
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

// Granule pages (version 2). Object sizes round up to whole granules;
// an object of an even number of granules starts 16-byte aligned (a type
// that needs 16 has a size that is a multiple of 16).
inline constexpr uint64_t kGranule = 8;
inline constexpr uint64_t kGranulesPerPage = 4096 / kGranule;

// The bitmaps of one page of a version-2 segment, at bitmap page
// map_pages + i / 32 of the segment for its page i. alloc: granule holds
// object bytes; start: granule is an object's first. An object runs from
// its start bit over allocated granules up to the next start bit or free
// granule, possibly into the next page when that is a granule page too.
// Every page of the segment has an entry; it is zero unless the page is
// kGran.
struct GranuleBits {
  uint64_t alloc[kGranulesPerPage / 64];
  uint64_t start[kGranulesPerPage / 64];
};
static_assert(sizeof(GranuleBits) == 128);

}  // namespace pm

#endif  // LIBPM_HEAP_LAYOUT_H_
