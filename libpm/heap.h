// Heap: the allocator inside a container. All of its state lives in the
// working view (HeapHeader, segment page maps, granule bitmaps, slab
// headers), so commit() and abort() cover allocations like any other write.
// A DRAM index (free page runs by size and address, free granule extents in
// bins by length, slabs with free slots) speeds allocation; it is derived
// from the persistent state and rebuilt lazily after open and abort.
//
// Objects up to kMaxSmall bytes live in granule pages (heap format 2) or
// size-class slabs (format 1, files made before granule pages); larger
// ones are page runs. Data blocks (AllocKind::kData, format 2 only) have
// granule pages and page runs of their own kind (heap_layout.h).
//
// Thread safety: every public method locks mu_. The container additionally
// holds the commit gate (shared) around calls that write.
#ifndef LIBPM_HEAP_H_
#define LIBPM_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "libpm/heap_layout.h"
#include "libpm/journal.h"
#include "libpm/tracker.h"
#include "pm/container.h"
#include "pm/status.h"

namespace pm {

class Heap {
 public:
  // Grows the mapped heap to `new_size` bytes (file, working view, tracker).
  using GrowFn = std::function<Status(uint64_t new_size)>;

  Heap(std::byte* base, uint64_t max_size, DirtyTracker* tracker, GrowFn grow);

  // Writes a fresh heap (header + one segment) of `size` bytes at `image`,
  // which is a zeroed buffer that becomes the heap's first bytes in the file.
  // Always the current heap format (granule pages).
  static void format(std::byte* image, uint64_t size);

  // Validates the header and the segment chain against `mapped` bytes.
  Status attach(uint64_t mapped);

  // Forgets the DRAM index; the persistent state changed underneath (abort).
  Status reload(uint64_t mapped);

  Result<void*> alloc(uint64_t n, AllocKind kind);
  // Pages a free releases are allocated again only after the commit that
  // frees them (committed() below), as PMDK frees at a transaction's end:
  // the blocks of a commit then land in space its committed state left
  // free, which it writes home without the journal (fresh bytes,
  // journal.h), and a commit never needs journal room for a large block
  // written over one it frees (on a full disk, the room it would not get).
  // Granules inside a granule page are reused at once.
  Status free(void* p);
  // The commit that freed them is durable: their pages may be allocated.
  void committed();
  // Container::shrink.
  Status shrink(void* p, uint64_t n);
  Result<BlockInfo> find_block(const void* p);
  Status reserve(uint64_t heap_bytes);

  void* root(std::string_view name);
  Status set_root(void* p, std::string_view name);

  uint64_t bump_generation();
  uint64_t generation();

  struct Stats {
    uint64_t heap_bytes, used_bytes, blocks, meta_bytes, segments;
    // Whole free pages (0 until the index is built), plus bitmap pages that
    // describe no granule page (never written, or all zero again).
    uint64_t free_page_bytes;
  };
  Stats stats();
  HeapCounters counters();

  // Full consistency check of the persistent heap metadata: page maps (data
  // block kinds included), slab headers and bitmaps, counters. Appends one
  // line per problem to `problems`.
  void check(std::vector<std::string>* problems);

  // Fresh bytes (heap_fresh.cc): splits the 64-byte-line runs in `runs`
  // (heap offsets) into the lines that no block uses in the heap at `home`
  // (the committed image: the home view's heap start, `home_size` bytes
  // mapped there), appended to `fresh`, and the others, left in `runs`.
  // Bytes past the committed heap (segments grown since) are fresh.
  // Anything the committed image does not describe soundly is not fresh.
  // REQUIRES: nothing allocates, frees or grows meanwhile (it takes no lock).
  void split_fresh(const std::byte* home, uint64_t home_size, std::vector<Run>* runs,
                   std::vector<Run>* fresh);

  // Visits every allocated block (start, size), for checks and collection.
  void for_each_block(const std::function<void(void*, uint64_t)>& fn);

  // Reachability (reach.cc). collect() frees what mark() does not reach;
  // find_escapes() reports words of reachable object blocks that
  // `is_volatile` classifies as pointers out of the container (it returns a
  // description, empty for "not a pointer out"). Data blocks are marked
  // when reached but never scanned.
  Status collect(bool dry_run, CollectReport* report);
  using Classifier = std::function<std::string(uint64_t value)>;
  void find_escapes(const Classifier& is_volatile, CheckReport* report);

 private:
  struct Segment {
    uint64_t first_page;  // global page index of the segment header
    uint64_t npages;
    uint64_t meta_pages;
    uint32_t* map;
    GranuleBits* bits;  // one per page; null in format-1 segments
  };

  HeapHeader* header() const { return reinterpret_cast<HeapHeader*>(base_); }
  std::byte* page_addr(uint64_t page) const { return base_ + page * 4096; }
  void note(const void* p, size_t n) { tracker_->will_write(p, n); }

  Status load_segments(uint64_t mapped);
  void reset_index();
  Status ensure_index();
  // Runs of calls mostly ask about one segment: the last answer is tried
  // first (inline: the granule code asks several times per call).
  const Segment* segment_of(uint64_t page) const {
    if (last_seg_ < segments_.size()) {
      const Segment& s = segments_[last_seg_];
      if (page - s.first_page < s.npages) return &s;
    }
    return find_segment(page);
  }
  const Segment* find_segment(uint64_t page) const;
  uint32_t& entry(uint64_t page);
  void set_entry(uint64_t page, uint32_t e);

  Result<uint64_t> take_pages(uint64_t npages);
  bool take_pages_at(uint64_t page, uint64_t npages);
  Result<uint64_t> alloc_pages(uint64_t npages, PageKind head, uint32_t head_value, PageKind tail);
  void free_pages(uint64_t page, uint64_t npages);
  void release_free_pages();
  void add_free(uint64_t page, uint64_t npages);
  void remove_free(uint64_t page, uint64_t npages);
  Status grow(uint64_t min_pages);

  Status free_locked(void* p);
  void root_problems_locked(std::vector<std::string>* problems);
  Result<BlockInfo> find_block_locked(uint64_t off);
  void visit_blocks_locked(const std::function<void(std::byte*, uint64_t)>& fn);
  // Marks blocks reachable from the roots in `marks` (a bit per 8-byte granule of
  // heap) and calls `visit` once per reachable block. Words of data blocks
  // are not followed.
  void mark(std::vector<uint64_t>* marks, const std::function<void(const BlockInfo&)>& visit);

  void zero_tail(std::byte* block, uint64_t n, uint64_t size);
  Result<void*> alloc_small(int cls);
  Status free_small(uint64_t slab_page, std::byte* p);
  Result<uint64_t> block_head(uint64_t off, uint32_t* head);

  // Granule pages (heap_granules.cc). Granule g covers heap bytes
  // [8g, 8g+8); extents are [g, g+len). Object and data granule pages are
  // two arenas that never share a page, an object or a free extent; each
  // has its own free-extent index.
  struct GranArena {
    uint32_t entry = 0;                       // page map entry of its pages
    std::vector<std::vector<uint64_t>> bins;  // free extent hints by length
    std::vector<uint64_t> bin_mask;           // bit b: bins[b] is not empty
    uint64_t hints = 0;                       // entries in bins
    uint64_t extents = 0;                     // free extents (maximal runs of free granules)
    uint64_t gfree_total = 0;                 // free granules in the arena's pages
    uint64_t next = 0;                        // page after the last taken for the arena
  };
  // The page map entry of `page`, or 0 (free) outside the segments.
  uint32_t map_entry(uint64_t page) const {
    const Segment* s = segment_of(page);
    return s != nullptr ? s->map[page - s->first_page] : 0;
  }
  bool is_gran_page(uint64_t page) const {
    const Segment* s = segment_of(page);
    return s != nullptr && s->bits != nullptr &&
           entry_kind(s->map[page - s->first_page]) == PageKind::kGran;
  }
  // A granule page with page map entry `e` (of one arena).
  bool in_arena(uint64_t page, uint32_t e) const {
    const Segment* s = segment_of(page);
    return s != nullptr && s->bits != nullptr && s->map[page - s->first_page] == e;
  }
  // REQUIRES: e is the entry of a granule page, validated (value 0 or 1).
  GranArena& arena_for(uint32_t e) { return arenas_[e & kGranData]; }
  // REQUIRES: page is in a format-2 segment.
  GranuleBits* bits_of(uint64_t page) const {
    const Segment* s = segment_of(page);
    return s->bits + (page - s->first_page);
  }
  Result<void*> alloc_gran(uint64_t n, GranArena& a);
  uint64_t take_fit(GranArena& a, uint64_t k, bool align16);
  // e: the page map entry of off's page (it says which arena).
  Status free_gran(uint64_t off, uint32_t e);
  Result<BlockInfo> find_gran(uint64_t off, uint32_t e);
  // Adds the pages' allocated bytes and objects to *used and *blocks.
  Status index_gran_pages(uint64_t page, uint64_t npages, uint64_t* used, uint64_t* blocks);
  void visit_gran_pages(uint64_t page, uint64_t npages,
                        const std::function<void(std::byte*, uint64_t)>& fn);
  Result<uint64_t> object_granules(uint64_t g, uint32_t e);
  Status take_gran_pages(GranArena& a, uint64_t granules);
  void set_bits(uint64_t g, uint64_t len, bool on);
  bool is_free_granule(uint64_t g, uint32_t e) const;
  uint64_t free_run_end(uint64_t g, uint32_t e) const;
  uint64_t free_run_start(uint64_t g, uint32_t e) const;
  void push_hint(GranArena& a, uint64_t g, uint64_t len);
  uint64_t next_bin(const GranArena& a, uint64_t b) const;
  void add_free_extent(GranArena& a, uint64_t g, uint64_t len);
  Status compact_hints(GranArena& a);
  uint64_t unused_bitmap_pages() const;
  void check_gran_page(const Segment& s, uint64_t i, uint64_t* used, uint64_t* blocks,
                       std::vector<std::string>* problems);
  void check_idle_bitmaps(const Segment& s, std::vector<std::string>* problems);

  std::mutex mu_;
  std::byte* base_;
  uint64_t max_size_;
  DirtyTracker* tracker_;
  GrowFn grow_fn_;
  std::vector<Segment> segments_;
  mutable size_t last_seg_ = 0;                            // segment_of()'s last answer
  std::vector<std::pair<uint64_t, uint64_t>> to_release_;  // freed runs (page, npages)
  std::vector<std::pair<uint64_t, uint64_t>> freed_uncommitted_;  // (page, npages), see free()
  uint64_t released_ = 0;  // committed() calls that made freed pages allocatable
  uint64_t to_release_pages_ = 0;
  bool indexed_ = false;
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (npages, page)
  std::map<uint64_t, uint64_t> free_by_addr_;             // page -> npages
  std::vector<std::set<uint64_t>> partial_;               // per class: slab pages
  bool granular_ = false;                                 // heap format 2
  GranArena arenas_[2];  // object granule pages, data granule pages
};

}  // namespace pm

#endif  // LIBPM_HEAP_H_
