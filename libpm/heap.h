// Heap: the allocator inside a container. All of its state lives in the
// working view (HeapHeader, segment page maps, slab headers), so commit() and
// abort() cover allocations like any other write. A DRAM index (free page
// runs by size and address, slabs with free slots) speeds allocation; it is
// derived from the persistent state and rebuilt lazily after open and abort.
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
  static void format(std::byte* image, uint64_t size);

  // Validates the header and the segment chain against `mapped` bytes.
  Status attach(uint64_t mapped);

  // Forgets the DRAM index; the persistent state changed underneath (abort).
  Status reload(uint64_t mapped);

  Result<void*> alloc(uint64_t n);
  Status free(void* p);
  Result<BlockInfo> find_block(const void* p);
  Status reserve(uint64_t heap_bytes);

  void* root(std::string_view name);
  Status set_root(void* p, std::string_view name);

  uint64_t bump_generation();
  uint64_t generation();

  struct Stats {
    uint64_t heap_bytes, used_bytes, blocks, meta_bytes, segments;
    uint64_t free_page_bytes;  // whole free pages (0 until the index is built)
  };
  Stats stats();

  // Full consistency check of the persistent heap metadata: page maps, slab
  // headers and bitmaps, counters. Appends one line per problem to `problems`.
  void check(std::vector<std::string>* problems);

  // Visits every allocated block (start, size), for checks and collection.
  void for_each_block(const std::function<void(void*, uint64_t)>& fn);

  // Reachability (reach.cc). collect() frees what mark() does not reach;
  // find_escapes() reports words of reachable blocks that `is_volatile`
  // classifies as pointers out of the container (it returns a description,
  // empty for "not a pointer out").
  Status collect(bool dry_run, CollectReport* report);
  using Classifier = std::function<std::string(uint64_t value)>;
  void find_escapes(const Classifier& is_volatile, CheckReport* report);

 private:
  struct Segment {
    uint64_t first_page;  // global page index of the segment header
    uint64_t npages;
    uint64_t meta_pages;
    uint32_t* map;
  };

  HeapHeader* header() const { return reinterpret_cast<HeapHeader*>(base_); }
  std::byte* page_addr(uint64_t page) const { return base_ + page * 4096; }
  void note(const void* p, size_t n) { tracker_->will_write(p, n); }

  Status load_segments(uint64_t mapped);
  Status ensure_index();
  const Segment* segment_of(uint64_t page) const;
  uint32_t& entry(uint64_t page);
  void set_entry(uint64_t page, uint32_t e);

  Result<uint64_t> alloc_pages(uint64_t npages, PageKind head, uint32_t head_value, PageKind tail);
  void free_pages(uint64_t page, uint64_t npages);
  void add_free(uint64_t page, uint64_t npages);
  void remove_free(uint64_t page, uint64_t npages);
  Status grow(uint64_t min_pages);

  Status free_locked(void* p);
  Result<BlockInfo> find_block_locked(uint64_t off);
  void visit_blocks_locked(const std::function<void(std::byte*, uint64_t)>& fn);
  // Marks blocks reachable from the roots in `marks` (a bit per 16 bytes of
  // heap) and calls `visit` once per reachable block.
  void mark(std::vector<uint64_t>* marks, const std::function<void(std::byte*, uint64_t)>& visit);

  Result<void*> alloc_small(int cls);
  Status free_small(uint64_t slab_page, std::byte* p);
  Result<uint64_t> block_head(uint64_t off, PageKind* kind);

  std::mutex mu_;
  std::byte* base_;
  uint64_t max_size_;
  DirtyTracker* tracker_;
  GrowFn grow_fn_;
  std::vector<Segment> segments_;
  bool indexed_ = false;
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (npages, page)
  std::map<uint64_t, uint64_t> free_by_addr_;             // page -> npages
  std::vector<std::set<uint64_t>> partial_;               // per class: slab pages
};

}  // namespace pm

#endif  // LIBPM_HEAP_H_
