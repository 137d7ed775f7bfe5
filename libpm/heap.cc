#include "libpm/heap.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "libpm/size_classes.h"

namespace pm {

namespace {

constexpr uint64_t kPage = 4096;
// Smallest segment added by growth. Beyond it, growth adds a quarter of
// the heap: the number of segments stays logarithmic in the heap's size
// (about 50 from 1 MiB to 64 GiB), and the file, whose new space is
// allocated at once (posix_fallocate), is at most a quarter larger than
// the heap needs (doubling made a store holding a 2.2 GiB file 4.2 GiB).
constexpr uint64_t kMinGrowPages = (1ull << 20) / kPage;
constexpr uint64_t kGrowDivisor = 4;
// Freed pages are handed back to the OS in batches of this many (one
// madvise per run instead of one per free).
constexpr uint64_t kReleaseBatchPages = 64;

uint64_t map_pages_for(uint64_t npages) {
  return (sizeof(SegmentHeader) + 4 * npages + kPage - 1) / kPage;
}

// Header and page map, then (format 2) one GranuleBits per page.
uint64_t meta_pages_for(uint64_t npages, bool granular) {
  uint64_t bits = granular ? (npages * sizeof(GranuleBits) + kPage - 1) / kPage : 0;
  return map_pages_for(npages) + bits;
}

uint32_t* segment_map(std::byte* seg) {
  return reinterpret_cast<uint32_t*>(seg + sizeof(SegmentHeader));
}

SlabHeader* slab_at(std::byte* p) { return reinterpret_cast<SlabHeader*>(p); }

size_t slab_header_bytes(const SizeClass& sc) { return 8 + 8 * ((sc.objects + 63) / 64); }

// The smallest segment with min_free pages besides its metadata.
uint64_t segment_pages_for(uint64_t min_free, bool granular) {
  uint64_t n = min_free + 1;
  while (n - meta_pages_for(n, granular) < min_free)
    n += min_free - (n - meta_pages_for(n, granular));
  return n;
}

// Writes a segment header and marks its metadata pages in its map. The map
// and bitmaps must read as zero (free) otherwise.
void write_segment(std::byte* seg, uint64_t npages, bool granular) {
  auto* h = reinterpret_cast<SegmentHeader*>(seg);
  h->magic = granular ? kSegmentMagicV2 : kSegmentMagic;
  h->npages = npages;
  h->meta_pages = meta_pages_for(npages, granular);
  uint32_t* map = segment_map(seg);
  for (uint64_t i = 0; i < h->meta_pages; i++) map[i] = page_entry(PageKind::kMeta, 0);
}

}  // namespace

Heap::Heap(std::byte* base, uint64_t max_size, DirtyTracker* tracker, GrowFn grow)
    : base_(base), max_size_(max_size), tracker_(tracker), grow_fn_(std::move(grow)) {
  partial_.resize(static_cast<size_t>(size_class_count()));
}

void Heap::format(std::byte* image, uint64_t size) {
  auto* h = reinterpret_cast<HeapHeader*>(image);
  h->magic = kHeapMagicV2;
  h->heap_size = size;
  h->segments = 1;
  write_segment(image + kPage, size / kPage - 1, true);
}

Status Heap::attach(uint64_t mapped) {
  std::lock_guard<std::mutex> l(mu_);
  const HeapHeader* h = header();
  if (h->magic != kHeapMagic && h->magic != kHeapMagicV2) {
    return Status::corruption("heap header damaged (bad magic)");
  }
  granular_ = h->magic == kHeapMagicV2;
  if (h->heap_size % kPage != 0 || h->heap_size < 2 * kPage || h->heap_size > mapped) {
    return Status::corruption("heap size " + std::to_string(h->heap_size) +
                              " does not fit the file (" + std::to_string(mapped) +
                              " bytes of heap): file truncated or damaged");
  }
  return load_segments(mapped);
}

Status Heap::reload(uint64_t mapped) {
  std::lock_guard<std::mutex> l(mu_);
  indexed_ = false;
  return load_segments(mapped);
}

void Heap::committed() {
  std::lock_guard<std::mutex> l(mu_);
  // An index built since the frees read them from the page maps already.
  if (indexed_) {
    for (const auto& [page, n] : freed_uncommitted_) add_free(page, n);
  }
  released_ += !freed_uncommitted_.empty();
  freed_uncommitted_.clear();
}

void Heap::reset_index() {
  freed_uncommitted_.clear();
  free_by_size_.clear();
  free_by_addr_.clear();
  for (auto& p : partial_) p.clear();
  for (uint32_t k : {kGranObjects, kGranData}) {
    GranArena& a = arenas_[k];
    a = GranArena();
    a.entry = page_entry(PageKind::kGran, k);
    a.bins.assign(granular_ ? kMaxSmall / kGranule + 2 : 0, {});
    a.bin_mask.assign((a.bins.size() + 63) / 64, 0);
  }
  indexed_ = false;
}

Status Heap::load_segments(uint64_t mapped) {
  segments_.clear();
  to_release_.clear();  // pages that may not be free in the reloaded state
  to_release_pages_ = 0;
  reset_index();
  const uint64_t magic = granular_ ? kSegmentMagicV2 : kSegmentMagic;
  const uint64_t end = std::min(header()->heap_size, mapped) / kPage;
  uint64_t page = 1;
  while (page < end) {
    auto* sh = reinterpret_cast<const SegmentHeader*>(page_addr(page));
    if (sh->magic != magic || sh->npages < 2 || sh->npages > end - page ||
        sh->meta_pages != meta_pages_for(sh->npages, granular_) || sh->meta_pages >= sh->npages) {
      return Status::corruption("heap segment at page " + std::to_string(page) + " is damaged");
    }
    auto* bits = granular_
                     ? reinterpret_cast<GranuleBits*>(page_addr(page + map_pages_for(sh->npages)))
                     : nullptr;
    segments_.push_back({page, sh->npages, sh->meta_pages, segment_map(page_addr(page)), bits});
    page += sh->npages;
  }
  if (page != end || segments_.size() != header()->segments) {
    return Status::corruption("heap segment chain does not match the heap header");
  }
  return Status();
}

const Heap::Segment* Heap::find_segment(uint64_t page) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), page,
                             [](uint64_t p, const Segment& s) { return p < s.first_page; });
  if (it == segments_.begin()) return nullptr;
  --it;
  if (page >= it->first_page + it->npages) return nullptr;
  last_seg_ = static_cast<size_t>(it - segments_.begin());
  return &*it;
}

uint32_t& Heap::entry(uint64_t page) {
  const Segment* s = segment_of(page);
  return s->map[page - s->first_page];
}

void Heap::set_entry(uint64_t page, uint32_t e) {
  uint32_t& slot = entry(page);
  note(&slot, sizeof slot);
  slot = e;
}

// One pass over the page maps (and slab headers, granule bitmaps):
// validates every entry it reads, so damaged metadata becomes an error here
// instead of overlapping blocks later. Damage that leaves the metadata well
// formed (a zeroed bitmap page: its objects would read as free and be
// handed out again) shows in the counts: what the pass finds allocated must
// be what the header's counters say, which every allocation and free keep
// in the same commit as the bits.
Status Heap::ensure_index() {
  if (indexed_) return Status();
  reset_index();  // what a failed pass left
  auto bad = [](uint64_t page, const char* what) {
    return Status::corruption("heap page map damaged at page " + std::to_string(page) + " (" +
                              what + "); run 'pm check'");
  };
  uint64_t used = 0, blocks = 0;
  for (const Segment& s : segments_) {
    uint64_t i = s.meta_pages;
    while (i < s.npages) {
      uint32_t e = s.map[i];
      uint64_t page = s.first_page + i;
      uint64_t span = 1;
      PageKind tail = PageKind::kFree;
      switch (entry_kind(e)) {
        case PageKind::kDataRunHead:
          if (s.bits == nullptr) return bad(page, "data run in a slab heap");
          [[fallthrough]];
        case PageKind::kRunHead:
          span = entry_value(e);
          tail = PageKind::kRunTail;
          used += span * kPage;
          blocks++;
          break;
        case PageKind::kSlabHead: {
          auto cls = static_cast<int>(entry_value(e));
          if (cls >= size_class_count()) return bad(page, "unknown size class");
          const SizeClass& sc = size_class(cls);
          const SlabHeader* sh = slab_at(page_addr(page));
          if (sh->magic != kSlabMagic || sh->size_class != cls || sh->nfree > sc.objects) {
            return bad(page, "slab header");
          }
          span = sc.pages;
          tail = PageKind::kSlabTail;
          if (sh->nfree > 0) partial_[static_cast<size_t>(cls)].insert(page);
          used += uint64_t{sc.objects - sh->nfree} * sc.size;
          blocks += sc.objects - sh->nfree;
          break;
        }
        case PageKind::kGran: {
          if (s.bits == nullptr || entry_value(e) > kGranData) {
            return bad(page, "granule page entry");
          }
          uint64_t j = i + 1;
          while (j < s.npages && s.map[j] == e) j++;
          PM_TRY(index_gran_pages(page, j - i, &used, &blocks));
          i = j;
          continue;
        }
        case PageKind::kFree: {
          if (e != 0) return bad(page, "free entry with a value");
          uint64_t j = i + 1;
          while (j < s.npages && s.map[j] == 0) j++;
          add_free(page, j - i);
          i = j;
          continue;
        }
        default:
          return bad(page, "continuation without a head");
      }
      if (span == 0 || span > s.npages - i) return bad(page, "block past its segment");
      for (uint64_t t = 1; t < span; t++) {
        if (s.map[i + t] != page_entry(tail, t)) return bad(page + t, "continuation entry");
      }
      i += span;
    }
  }
  const HeapHeader* h = header();
  if (h->used_bytes != used || h->blocks != blocks) {
    return Status::corruption("heap metadata damaged: its counters say " +
                              std::to_string(h->blocks) + " blocks of " +
                              std::to_string(h->used_bytes) + " bytes, its page maps and " +
                              "bitmaps " + std::to_string(blocks) + " of " +
                              std::to_string(used) + "; run 'pm check'");
  }
  indexed_ = true;
  return Status();
}

void Heap::add_free(uint64_t page, uint64_t npages) {
  // Coalesce with free neighbours (a segment's metadata pages are never
  // free, so runs never merge across segments).
  auto next = free_by_addr_.find(page + npages);
  if (next != free_by_addr_.end()) {
    npages += next->second;
    free_by_size_.erase({next->second, next->first});
    free_by_addr_.erase(next);
  }
  auto prev = free_by_addr_.lower_bound(page);
  if (prev != free_by_addr_.begin()) {
    --prev;
    if (prev->first + prev->second == page) {
      page = prev->first;
      npages += prev->second;
      free_by_size_.erase({prev->second, prev->first});
      free_by_addr_.erase(prev);
    }
  }
  free_by_addr_[page] = npages;
  free_by_size_.insert({npages, page});
}

void Heap::remove_free(uint64_t page, uint64_t npages) {
  free_by_addr_.erase(page);
  free_by_size_.erase({npages, page});
}

// Best fit: the smallest free run that holds npages, the lowest of equals.
Result<uint64_t> Heap::take_pages(uint64_t npages) {
  auto it = free_by_size_.lower_bound({npages, 0});
  if (it == free_by_size_.end()) {
    PM_TRY(grow(npages));
    it = free_by_size_.lower_bound({npages, 0});
    if (it == free_by_size_.end()) return Status::no_space("heap growth gave too little space");
  }
  auto [have, page] = *it;
  remove_free(page, have);
  if (have > npages) add_free(page + npages, have - npages);
  return page;
}

// Takes pages [page, page+npages) if they are free; false if not.
bool Heap::take_pages_at(uint64_t page, uint64_t npages) {
  auto it = free_by_addr_.upper_bound(page);
  if (it == free_by_addr_.begin()) return false;
  --it;
  auto [first, have] = *it;
  if (first + have < page + npages) return false;
  remove_free(first, have);
  if (page > first) add_free(first, page - first);
  if (first + have > page + npages) add_free(page + npages, first + have - page - npages);
  return true;
}

Result<uint64_t> Heap::alloc_pages(uint64_t npages, PageKind head, uint32_t head_value,
                                   PageKind tail) {
  Result<uint64_t> r = take_pages(npages);
  if (!r.ok()) return r.status();
  uint64_t page = *r;
  set_entry(page, page_entry(head, head_value));
  for (uint64_t i = 1; i < npages; i++) set_entry(page + i, page_entry(tail, i));
  return page;
}

void Heap::free_pages(uint64_t page, uint64_t npages) {
  for (uint64_t i = 0; i < npages; i++) set_entry(page + i, 0);
  freed_uncommitted_.push_back({page, npages});  // indexed at committed()
  to_release_.push_back({page, npages});
  to_release_pages_ += npages;
  if (to_release_pages_ >= kReleaseBatchPages) release_free_pages();
}

// Drops the working view's private copies of pages freed since the last
// call, so that free memory costs no DRAM. A dropped page reads the file
// again (its last committed bytes): no block uses it, and no tracker needs
// to know, because commit compares pages with the file and finds these
// equal (abort() drops dirty pages the same way). Pages reused since they
// were queued are skipped. The file keeps its pages.
void Heap::release_free_pages() {
  for (const auto& [page, n] : to_release_) {
    for (uint64_t i = 0; i < n;) {
      uint64_t j = i;
      while (j < n && entry(page + j) == 0) j++;
      if (j > i) ::madvise(page_addr(page + i), (j - i) * kPage, MADV_DONTNEED);
      i = j + 1;
    }
  }
  to_release_.clear();
  to_release_pages_ = 0;
}

Status Heap::grow(uint64_t min_pages) {
  HeapHeader* h = header();
  uint64_t cur = h->heap_size / kPage;
  const uint64_t least = segment_pages_for(min_pages, granular_);
  uint64_t want = std::max({least, cur / kGrowDivisor, kMinGrowPages});
  uint64_t limit = max_size_ / kPage;
  if (cur + want > limit) want = limit - cur;
  if (want < least || want > kPageValueMask) {
    return Status::no_space("container heap would exceed its max_size of " +
                            std::to_string(max_size_ >> 20) +
                            " MiB; create it with a larger max_size");
  }
  if (Status s = grow_fn_(h->heap_size + want * kPage); !s.ok()) {
    // A disk too full for the usual step may still hold what this
    // allocation needs: its last megabytes stay usable.
    if (s.code() != Code::kNoSpace || want == least) return s;
    want = least;
    PM_TRY(grow_fn_(h->heap_size + want * kPage));
  }
  std::byte* seg = page_addr(cur);
  // Only the header and map are written; the bitmaps of a new segment read
  // as zero (the grown file is sparse there).
  note(seg, map_pages_for(want) * kPage);
  write_segment(seg, want, granular_);
  note(h, sizeof *h);
  h->heap_size += want * kPage;
  h->segments++;
  auto* bits =
      granular_ ? reinterpret_cast<GranuleBits*>(seg + map_pages_for(want) * kPage) : nullptr;
  Segment s{cur, want, meta_pages_for(want, granular_), segment_map(seg), bits};
  segments_.push_back(s);
  add_free(cur + s.meta_pages, want - s.meta_pages);
  return Status();
}

Result<void*> Heap::alloc(uint64_t n, AllocKind kind) {
  std::lock_guard<std::mutex> l(mu_);
  PM_TRY(ensure_index());
  if (n == 0) n = 1;
  // Slab heaps (format 1) record no kinds: every block is an object there.
  if (n <= kMaxSmall) {
    if (!granular_) return alloc_small(size_class_for(n));
    return alloc_gran(n, arenas_[kind == AllocKind::kData]);
  }
  const bool data = kind == AllocKind::kData && granular_;
  if (n > max_size_) {
    return Status::no_space("alloc(" + std::to_string(n) + "): larger than the container's " +
                            "max_size; create it with a larger max_size");
  }
  uint64_t npages = (n + kPage - 1) / kPage;
  Result<uint64_t> page =
      alloc_pages(npages, data ? PageKind::kDataRunHead : PageKind::kRunHead,
                  static_cast<uint32_t>(npages), PageKind::kRunTail);
  if (!page.ok()) return page.status();
  zero_tail(page_addr(*page), n, npages * kPage);
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes += npages * kPage;
  h->blocks++;
  return static_cast<void*>(page_addr(*page));
}

// Zeroes bytes [n, size) of a new block: the application never writes its
// rounding tail, and stale pointers there would keep garbage alive through
// collect().
void Heap::zero_tail(std::byte* block, uint64_t n, uint64_t size) {
  note(block + n, size - n);
  std::memset(block + n, 0, size - n);
}

Result<void*> Heap::alloc_small(int cls) {
  const SizeClass& sc = size_class(cls);
  auto& partial = partial_[static_cast<size_t>(cls)];
  if (partial.empty()) {
    Result<uint64_t> page =
        alloc_pages(sc.pages, PageKind::kSlabHead, static_cast<uint32_t>(cls), PageKind::kSlabTail);
    if (!page.ok()) return page.status();
    SlabHeader* s = slab_at(page_addr(*page));
    note(s, slab_header_bytes(sc));
    std::memset(s, 0, slab_header_bytes(sc));
    s->magic = kSlabMagic;
    s->size_class = static_cast<uint16_t>(cls);
    s->nfree = static_cast<uint16_t>(sc.objects);
    partial.insert(*page);
  }
  uint64_t page = *partial.begin();
  SlabHeader* s = slab_at(page_addr(page));
  uint32_t idx = 0;
  for (uint32_t w = 0; w * 64 < sc.objects; w++) {
    if (~s->bitmap[w] != 0) {
      idx = w * 64 + static_cast<uint32_t>(std::countr_one(s->bitmap[w]));
      break;
    }
  }
  note(s, 8);
  note(&s->bitmap[idx / 64], 8);
  s->bitmap[idx / 64] |= 1ull << (idx % 64);
  if (--s->nfree == 0) partial.erase(partial.begin());
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes += sc.size;
  h->blocks++;
  return static_cast<void*>(page_addr(page) + sc.first_off + uint64_t{idx} * sc.size);
}

// The first page of the block holding heap offset `off`, with that page's
// map entry in *head (a granule page: the page itself).
Result<uint64_t> Heap::block_head(uint64_t off, uint32_t* head) {
  if (off >= header()->heap_size) return Status::not_found("address outside the heap");
  uint64_t page = off / kPage;
  const Segment* seg = segment_of(page);
  if (seg == nullptr) return Status::not_found("address in the heap header");
  uint32_t e = seg->map[page - seg->first_page];
  PageKind kind = entry_kind(e);
  if (kind == PageKind::kGran) {
    if (seg->bits == nullptr) return Status::corruption("bad page map entry");
    *head = e;
    return page;
  }
  if (kind == PageKind::kRunTail || kind == PageKind::kSlabTail) {
    if (entry_value(e) > page - seg->first_page) return Status::corruption("bad page map entry");
    page -= entry_value(e);
    e = seg->map[page - seg->first_page];
    bool run = entry_kind(e) == PageKind::kRunHead || entry_kind(e) == PageKind::kDataRunHead;
    if (kind == PageKind::kRunTail ? !run : entry_kind(e) != PageKind::kSlabHead) {
      return Status::corruption("bad page map entry");
    }
    kind = entry_kind(e);
  }
  if (kind != PageKind::kRunHead && kind != PageKind::kDataRunHead &&
      kind != PageKind::kSlabHead) {
    return Status::not_found("address in free or metadata pages");
  }
  if ((kind == PageKind::kSlabHead && static_cast<int>(entry_value(e)) >= size_class_count()) ||
      (kind == PageKind::kDataRunHead && seg->bits == nullptr)) {
    return Status::corruption("bad page map entry");
  }
  *head = e;
  return page;
}

Status Heap::free(void* p) {
  std::lock_guard<std::mutex> l(mu_);
  PM_TRY(ensure_index());
  return free_locked(p);
}

Status Heap::shrink(void* p, uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  PM_TRY(ensure_index());
  auto off = static_cast<uint64_t>(static_cast<std::byte*>(p) - base_);
  uint32_t e = 0;
  Result<uint64_t> head = block_head(off, &e);
  Result<BlockInfo> block = head.ok() ? find_block_locked(off) : Result<BlockInfo>(head.status());
  if (!block.ok() || block->start != p) {
    return Status::invalid_argument("shrink(" + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                                    "): not the start of an allocated block");
  }
  const bool run = entry_kind(e) == PageKind::kRunHead || entry_kind(e) == PageKind::kDataRunHead;
  if (!run) return Status();  // a small block: nothing worth giving back
  const uint64_t npages = entry_value(e);
  const uint64_t keep = std::max<uint64_t>(1, n / kPage + (n % kPage != 0));
  if (keep >= npages) return Status();
  // An object's bytes past n are read as pointers by collect(): no stale
  // ones may keep garbage alive (as zero_tail for a new block).
  if (entry_kind(e) == PageKind::kRunHead) zero_tail(static_cast<std::byte*>(p), n, keep * kPage);
  set_entry(*head, page_entry(entry_kind(e), keep));
  free_pages(*head + keep, npages - keep);
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes -= (npages - keep) * kPage;
  return Status();
}

Status Heap::free_locked(void* p) {
  auto off = static_cast<uint64_t>(static_cast<std::byte*>(p) - base_);
  uint32_t e = 0;
  Result<uint64_t> head = block_head(off, &e);
  auto invalid = [&] {
    return Status::invalid_argument("free(" + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                                    "): not the start of an allocated block");
  };
  if (!head.ok()) return invalid();
  if (entry_kind(e) == PageKind::kGran) return free_gran(off, e);
  if (entry_kind(e) == PageKind::kSlabHead) return free_small(*head, static_cast<std::byte*>(p));
  if (off != *head * kPage) return invalid();
  uint64_t npages = entry_value(e);
  free_pages(*head, npages);
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes -= npages * kPage;
  h->blocks--;
  return Status();
}

Status Heap::free_small(uint64_t slab_page, std::byte* p) {
  int cls = static_cast<int>(entry_value(entry(slab_page)));
  const SizeClass& sc = size_class(cls);
  std::byte* slab = page_addr(slab_page);
  uint64_t rel = static_cast<uint64_t>(p - slab);
  if (rel < sc.first_off || (rel - sc.first_off) % sc.size != 0 ||
      (rel - sc.first_off) / sc.size >= sc.objects) {
    return Status::invalid_argument("free: pointer is inside a block, not at its start");
  }
  uint64_t idx = (rel - sc.first_off) / sc.size;
  SlabHeader* s = slab_at(slab);
  if ((s->bitmap[idx / 64] >> (idx % 64) & 1) == 0) {
    return Status::invalid_argument("free: block is not allocated (double free?)");
  }
  note(s, 8);
  note(&s->bitmap[idx / 64], 8);
  s->bitmap[idx / 64] &= ~(1ull << (idx % 64));
  auto& partial = partial_[static_cast<size_t>(cls)];
  s->nfree++;
  partial.insert(slab_page);
  // Return an empty slab's pages unless it is the class's only free space
  // (avoids thrashing a slab in and out on alloc/free pairs).
  if (s->nfree == sc.objects && partial.size() > 1) {
    partial.erase(slab_page);
    free_pages(slab_page, sc.pages);
  }
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes -= sc.size;
  h->blocks--;
  return Status();
}

Result<BlockInfo> Heap::find_block(const void* p) {
  std::lock_guard<std::mutex> l(mu_);
  auto* bp = static_cast<const std::byte*>(p);
  if (bp < base_) return Status::not_found("address outside the heap");
  return find_block_locked(static_cast<uint64_t>(bp - base_));
}

Result<BlockInfo> Heap::find_block_locked(uint64_t off) {
  uint32_t e = 0;
  Result<uint64_t> head = block_head(off, &e);
  if (!head.ok()) return head.status();
  const PageKind kind = entry_kind(e);
  if (kind == PageKind::kGran) return find_gran(off, e);
  std::byte* start = page_addr(*head);
  if (kind == PageKind::kRunHead || kind == PageKind::kDataRunHead) {
    return BlockInfo{start, uint64_t{entry_value(e)} * kPage,
                     kind == PageKind::kDataRunHead ? AllocKind::kData : AllocKind::kObject};
  }
  const SizeClass& sc = size_class(static_cast<int>(entry_value(e)));
  uint64_t rel = off - *head * kPage;
  if (rel < sc.first_off) return Status::not_found("address in a slab header");
  uint64_t idx = (rel - sc.first_off) / sc.size;
  if (idx >= sc.objects || !(slab_at(start)->bitmap[idx / 64] >> (idx % 64) & 1)) {
    return Status::not_found("address in a free slot");
  }
  return BlockInfo{start + sc.first_off + idx * sc.size, sc.size};
}

Status Heap::reserve(uint64_t heap_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  PM_TRY(ensure_index());
  uint64_t cur = header()->heap_size;
  if (heap_bytes <= cur) return Status();
  return grow((heap_bytes - cur + kPage - 1) / kPage);
}

void* Heap::root(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  const HeapHeader* h = header();
  if (name.empty()) return h->root ? base_ + h->root : nullptr;
  for (const NamedRoot& r : h->roots) {
    if (r.name[0] != '\0' && name == r.name) return r.off ? base_ + r.off : nullptr;
  }
  return nullptr;
}

Status Heap::set_root(void* p, std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  HeapHeader* h = header();
  uint64_t off = p ? static_cast<uint64_t>(static_cast<std::byte*>(p) - base_) : 0;
  if (p != nullptr && (static_cast<std::byte*>(p) < base_ || off >= h->heap_size)) {
    return Status::invalid_argument("set_root: object is not inside this container");
  }
  if (p != nullptr && !find_block_locked(off).ok()) {
    return Status::invalid_argument("set_root: the address is in no allocated block (heap "
                                    "metadata, free space or a freed object)");
  }
  if (name.empty()) {
    note(&h->root, 8);
    h->root = off;
    return Status();
  }
  if (name.size() > kMaxRootName) {
    return Status::invalid_argument("root name longer than 47 bytes: " + std::string(name));
  }
  NamedRoot* slot = nullptr;
  for (NamedRoot& r : h->roots) {
    if (r.name[0] != '\0' && name == r.name) {
      slot = &r;
      break;
    }
    if (r.name[0] == '\0' && slot == nullptr) slot = &r;
  }
  if (slot == nullptr && p == nullptr) return Status();  // clearing a root that is not there
  if (slot == nullptr) return Status::no_space("all 32 named roots are in use");
  note(slot, sizeof *slot);
  if (p == nullptr) {
    std::memset(slot, 0, sizeof *slot);
    return Status();
  }
  std::memset(slot->name, 0, sizeof slot->name);
  std::memcpy(slot->name, name.data(), name.size());
  slot->off = off;
  return Status();
}

// A root names an object: a root in no allocated block is damage, or a
// freed object's (collect() would free everything it used to reach).
void Heap::root_problems_locked(std::vector<std::string>* problems) {
  const HeapHeader* h = header();
  auto one = [&](uint64_t off, std::string name) {
    if (off == 0 || (off < h->heap_size && find_block_locked(off).ok())) return;
    problems->push_back(name + " (heap offset " + std::to_string(off) +
                        ") is in no allocated block: damaged, or its object was freed");
  };
  one(h->root, "the root");
  for (const NamedRoot& r : h->roots) {
    if (r.name[0] == '\0') continue;
    one(r.off, "root '" + std::string(r.name, strnlen(r.name, sizeof r.name)) + "'");
  }
}

uint64_t Heap::bump_generation() {
  std::lock_guard<std::mutex> l(mu_);
  note(&header()->generation, 8);
  return ++header()->generation;
}

uint64_t Heap::generation() {
  std::lock_guard<std::mutex> l(mu_);
  return header()->generation;
}

Heap::Stats Heap::stats() {
  std::lock_guard<std::mutex> l(mu_);
  const HeapHeader* h = header();
  // Bitmap pages of no granule page were never written (or hold zeros):
  // they count as free, not as metadata.
  uint64_t unused_bits = unused_bitmap_pages();
  uint64_t meta = kPage;
  for (const Segment& s : segments_) meta += s.meta_pages * kPage;
  meta -= unused_bits * kPage;
  uint64_t free_pages = unused_bits;
  if (ensure_index().ok()) {
    for (const auto& [page, n] : free_by_addr_) free_pages += n;
    for (const auto& [page, n] : freed_uncommitted_) free_pages += n;
  }
  return {h->heap_size, h->used_bytes, h->blocks, meta, h->segments, free_pages * kPage};
}

HeapCounters Heap::counters() {
  std::lock_guard<std::mutex> l(mu_);
  const HeapHeader* h = header();
  return {h->heap_size, h->used_bytes, h->blocks, released_};
}

void Heap::for_each_block(const std::function<void(void*, uint64_t)>& fn) {
  std::lock_guard<std::mutex> l(mu_);
  visit_blocks_locked([&](std::byte* p, uint64_t n) { fn(p, n); });
}

void Heap::visit_blocks_locked(const std::function<void(std::byte*, uint64_t)>& fn) {
  for (const Segment& s : segments_) {
    for (uint64_t i = s.meta_pages; i < s.npages;) {
      uint32_t e = s.map[i];
      std::byte* at = page_addr(s.first_page + i);
      if (entry_kind(e) == PageKind::kGran && s.bits != nullptr) {
        uint64_t j = i + 1;
        while (j < s.npages && s.map[j] == e) j++;
        visit_gran_pages(s.first_page + i, j - i, fn);
        i = j;
      } else if ((entry_kind(e) == PageKind::kRunHead || entry_kind(e) == PageKind::kDataRunHead) &&
                 entry_value(e) > 0) {
        fn(at, uint64_t{entry_value(e)} * kPage);
        i += entry_value(e);
      } else if (entry_kind(e) == PageKind::kSlabHead &&
                 static_cast<int>(entry_value(e)) < size_class_count()) {
        const SizeClass& sc = size_class(static_cast<int>(entry_value(e)));
        const SlabHeader* sh = slab_at(at);
        for (uint32_t k = 0; k < sc.objects; k++) {
          if (sh->bitmap[k / 64] >> (k % 64) & 1)
            fn(at + sc.first_off + uint64_t{k} * sc.size, sc.size);
        }
        i += sc.pages;
      } else {
        i++;
      }
    }
  }
}

}  // namespace pm
