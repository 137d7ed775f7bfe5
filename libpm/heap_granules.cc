// Granule pages: the small-object allocator of heap format 2.
//
// Why not size-class slabs: objects cannot move (applications hold raw
// pointers), so when a program changes the sizes it allocates, the survivors
// of the old size pin whatever holds them. A slab pinned by one survivor
// serves only its class; in granule pages the free space around survivors
// coalesces and serves any size, and a page with no object in it goes back
// to the page allocator. 8-byte granules keep rounding small even at 64 B
// (70 -> 72 B). docs/impl.md "Heap" has the measurements.
//
// Placement is best fit over free extents (the smallest that holds the
// object, the most recently freed among equals), carving from the extent's
// start; pages for new granules come right after the last ones taken.
//
// Data objects (AllocKind::kData) live in granule pages of their own (page
// map value kGranData), as atomic objects do in conservative collectors:
// two arenas with the same code, told apart by their pages' entry. Objects
// and free extents end where the entry changes.
#include <algorithm>
#include <bit>

#include "libpm/heap.h"
#include "libpm/size_classes.h"

namespace pm {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kGpp = kGranulesPerPage;
constexpr uint64_t kWords = kGpp / 64;
constexpr uint64_t kMaxObjectGranules = kMaxSmall / kGranule;
// Empty granule pages stay while the free granules would otherwise drop
// below this, so that alloc/free pairs do not hand a page back and forth.
constexpr uint64_t kKeepFreeGranules = 16 * kGpp;
constexpr uint64_t kNone = ~0ull;

bool test(const uint64_t* words, uint64_t bit) { return words[bit / 64] >> (bit % 64) & 1; }

// Bits [lo, hi) of a word, 0 <= lo < hi <= 64.
uint64_t range_mask(uint64_t lo, uint64_t hi) {
  uint64_t below_hi = hi == 64 ? ~0ull : (1ull << hi) - 1;
  return below_hi & ~((1ull << lo) - 1);
}

// Sizes round up to granules, and above 128 bytes to 16 steps per doubling
// (at most 6.25%): sizes that differ by a few percent then share holes, as
// 1000 and 1024 do.
uint64_t granules_for(uint64_t n) {
  if (n > 128) {
    uint64_t step = 1ull << (std::bit_width(n) - 5);
    n = (n + step - 1) / step * step;
  }
  return (n + kGranule - 1) / kGranule;
}

}  // namespace

// Length of the object starting at granule g: allocated granules without a
// start bit that follow it, across granule pages of its arena (entry e).
Result<uint64_t> Heap::object_granules(uint64_t g, uint32_t e) {
  uint64_t len = 1, cur = g + 1;
  const GranuleBits* b = bits_of(g / kGpp);
  while (len <= kMaxObjectGranules) {
    if (cur % kGpp == 0) {
      if (!in_arena(cur / kGpp, e)) return len;  // a page that is not ours ends it
      b = bits_of(cur / kGpp);
    }
    uint64_t bit = cur % kGpp, w = bit / 64, off = bit % 64;
    uint64_t cont = (b->alloc[w] & ~b->start[w]) >> off;  // zeros shift in on top
    auto n = static_cast<uint64_t>(std::countr_one(cont));
    len += n;
    cur += n;
    if (n < 64 - off) return len;
  }
  return Status::corruption("granule object at heap offset " + std::to_string(g * kGranule) +
                            " is longer than " + std::to_string(kMaxSmall) + " bytes");
}

// Sets (or clears) the allocation bits of [g, g+len) and g's start bit.
void Heap::set_bits(uint64_t g, uint64_t len, bool on) {
  GranuleBits* b = bits_of(g / kGpp);
  note(b, sizeof *b);  // both bitmaps of the page in one tracker call
  uint64_t& start = b->start[g % kGpp / 64];
  start = on ? start | 1ull << (g % 64) : start & ~(1ull << (g % 64));
  while (true) {
    uint64_t bit = g % kGpp, n = std::min(len, kGpp - bit);
    uint64_t w0 = bit / 64, w1 = (bit + n - 1) / 64;
    for (uint64_t w = w0; w <= w1; w++) {
      uint64_t m =
          range_mask(std::max(bit, w * 64) - w * 64, std::min(bit + n, w * 64 + 64) - w * 64);
      b->alloc[w] = on ? b->alloc[w] | m : b->alloc[w] & ~m;
    }
    g += n;
    len -= n;
    if (len == 0) return;
    b = bits_of(g / kGpp);
    note(b, sizeof *b);
  }
}

// An arena's free extent index is a set of hints: bins[min(len, kMaxObjectGranules
// + 1)] holds starts of free extents of that length, pushed whenever an
// extent appears or changes. The bitmaps are the truth; a hint whose extent
// has since been merged, split or used is recognised and dropped when popped
// (no tree to keep in step on every call). compact_hints() rebuilds the bins
// when stale hints outnumber the extents.
void Heap::push_hint(GranArena& a, uint64_t g, uint64_t len) {
  uint64_t b = std::min(len, kMaxObjectGranules + 1);
  a.bins[b].push_back(g);
  a.bin_mask[b / 64] |= 1ull << (b % 64);
  a.hints++;
}

// The first non-empty bin >= b, or kNone.
uint64_t Heap::next_bin(const GranArena& a, uint64_t b) const {
  for (uint64_t w = b / 64; w < a.bin_mask.size(); w++) {
    uint64_t m = a.bin_mask[w] & (w == b / 64 ? ~0ull << (b % 64) : ~0ull);
    if (m != 0) return w * 64 + static_cast<uint64_t>(std::countr_zero(m));
  }
  return kNone;
}

// Granule g is free and in a page of the arena whose pages have entry e.
bool Heap::is_free_granule(uint64_t g, uint32_t e) const {
  return in_arena(g / kGpp, e) && !test(bits_of(g / kGpp)->alloc, g % kGpp);
}

// The first granule at or after g that is not free (allocated, or past the
// arena's pages; g is in a page with entry e or at the end of one).
uint64_t Heap::free_run_end(uint64_t g, uint32_t e) const {
  while (true) {
    if (g % kGpp == 0 && !in_arena(g / kGpp, e)) return g;
    const GranuleBits* b = bits_of(g / kGpp);
    uint64_t off = g % 64;
    // Zeros shift in on top, so n <= 64 - off.
    auto n = static_cast<uint64_t>(std::countr_one(~b->alloc[g % kGpp / 64] >> off));
    g += n;
    if (n < 64 - off) return g;
  }
}

// The first granule of the free run that ends at g (g itself if g - 1 is
// not free), in pages with entry e.
uint64_t Heap::free_run_start(uint64_t g, uint32_t e) const {
  while (g % kGpp != 0 || in_arena(g / kGpp - 1, e)) {
    uint64_t last = g - 1, off = last % 64;
    const GranuleBits* b = bits_of(last / kGpp);
    // Zeros shift in below, so n <= off + 1.
    auto n = static_cast<uint64_t>(std::countl_one(~b->alloc[last % kGpp / 64] << (63 - off)));
    g -= n;
    if (n < off + 1) return g;
  }
  return g;
}

// Records the free extent [g, g+len) (its neighbours are not free), after
// handing whole empty pages in it back to the page allocator: the last ones
// first, keeping kKeepFreeGranules so that alloc/free pairs do not move a
// page back and forth.
void Heap::add_free_extent(GranArena& a, uint64_t g, uint64_t len) {
  uint64_t p0 = (g + kGpp - 1) / kGpp, p1 = (g + len) / kGpp;
  uint64_t spare =
      a.gfree_total > kKeepFreeGranules ? (a.gfree_total - kKeepFreeGranules) / kGpp : 0;
  if (p0 < p1) p0 = p1 - std::min(p1 - p0, spare);
  if (p0 >= p1) {
    push_hint(a, g, len);
    return;
  }
  a.extents--;
  a.gfree_total -= (p1 - p0) * kGpp;
  free_pages(p0, p1 - p0);
  if (p0 * kGpp > g) {
    push_hint(a, g, p0 * kGpp - g);
    a.extents++;
  }
  if (g + len > p1 * kGpp) {
    push_hint(a, p1 * kGpp, g + len - p1 * kGpp);
    a.extents++;
  }
}

// Rebuilds an arena's bins from the bitmaps once stale hints dominate.
Status Heap::compact_hints(GranArena& a) {
  for (auto& bin : a.bins) bin.clear();
  std::fill(a.bin_mask.begin(), a.bin_mask.end(), 0);
  a.hints = a.extents = a.gfree_total = 0;
  uint64_t used = 0, blocks = 0;  // ensure_index() compared them
  for (const Segment& s : segments_) {
    for (uint64_t i = s.meta_pages; s.bits != nullptr && i < s.npages;) {
      uint64_t j = i;
      while (j < s.npages && s.map[j] == a.entry) j++;
      if (j > i) PM_TRY(index_gran_pages(s.first_page + i, j - i, &used, &blocks));
      i = j + 1;
    }
  }
  return Status();
}

// New granule pages for an object of `granules` that fits no free extent.
// The pages right after the last ones taken come first: the free tail of
// those pages then grows into them instead of staying behind as a remnant
// (as the top chunk of a malloc heap does).
Status Heap::take_gran_pages(GranArena& a, uint64_t granules) {
  uint64_t tail = 0;
  if (a.next > 0 && in_arena(a.next - 1, a.entry)) {
    tail = a.next * kGpp - free_run_start(a.next * kGpp, a.entry);
  }
  // One granule spare: the tail may start where a 16-aligned object cannot.
  uint64_t npages = (granules + 1 - std::min(granules, tail) + kGpp - 1) / kGpp;
  Result<uint64_t> page = a.next;
  if (a.next == 0 || !take_pages_at(a.next, npages)) {
    npages = (granules + kGpp - 1) / kGpp;
    page = take_pages(npages);
  }
  if (!page.ok()) return page.status();
  a.next = *page + npages;
  for (uint64_t p = *page; p < *page + npages; p++) {
    const GranuleBits* b = bits_of(p);
    for (uint64_t w = 0; w < kWords; w++) {
      if (b->alloc[w] != 0 || b->start[w] != 0) {
        return Status::corruption("granule bitmap of free page " + std::to_string(p) +
                                  " is not empty; run 'pm check'");
      }
    }
    set_entry(p, a.entry);
  }
  const uint64_t g = *page * kGpp, end = g + npages * kGpp;
  uint64_t s = free_run_start(g, a.entry), e = free_run_end(g, a.entry);
  a.extents += 1 - (s < g) - (e > end);
  a.gfree_total += npages * kGpp;
  push_hint(a, s, e - s);
  return Status();
}

// Takes k granules (16-byte aligned if align16) from the smallest free
// extent that holds them and returns the first, or kNone. An extent of
// exactly k that starts misaligned is passed over. At most 8 per bin are,
// which bounds the work; the search then goes on in the next bins, whose
// extents are longer: a bin full of such extents must not hide them (nor
// the pages take_gran_pages just added).
uint64_t Heap::take_fit(GranArena& a, uint64_t k, bool align16) {
  std::vector<uint64_t> misaligned;
  uint64_t at = kNone, s = 0, len = 0;
  const uint32_t e = a.entry;
  for (uint64_t b = next_bin(a, k); b != kNone && at == kNone; b = next_bin(a, b + 1)) {
    std::vector<uint64_t>& bin = a.bins[b];
    const size_t passed_before = misaligned.size();
    while (!bin.empty() && at == kNone && misaligned.size() - passed_before < 8) {
      s = bin.back();
      bin.pop_back();
      a.hints--;
      // (A page freed and taken by the other arena makes its hints stale too.)
      if (!is_free_granule(s, e) || (s % kGpp != 0 ? !test(bits_of(s / kGpp)->alloc, s % kGpp - 1)
                                                   : is_free_granule(s - 1, e))) {
        continue;  // stale: s is no longer an extent's start
      }
      len = free_run_end(s, e) - s;
      uint64_t a = s + (align16 ? s % 2 : 0);
      if (a + k <= s + len) {
        at = a;
      } else if (len >= k) {
        misaligned.push_back(s);
      }
    }
    if (bin.empty()) a.bin_mask[b / 64] &= ~(1ull << (b % 64));
  }
  for (uint64_t m : misaligned) push_hint(a, m, free_run_end(m, e) - m);
  if (at == kNone) return kNone;
  a.extents += (at > s) + (at + k < s + len) - 1;
  a.gfree_total -= k;
  if (at > s) push_hint(a, s, at - s);
  // The rest may hold whole pages (of an extent that grew by merging).
  if (at + k < s + len) add_free_extent(a, at + k, s + len - at - k);

  return at;
}

Result<void*> Heap::alloc_gran(uint64_t n, GranArena& a) {
  const uint64_t k = granules_for(n);
  const bool align16 = k % 2 == 0;
  uint64_t at = take_fit(a, k, align16);
  if (at == kNone) {
    PM_TRY(take_gran_pages(a, k));
    // A fresh page starts 16-aligned, or extends a free extent to >= k + 1.
    at = take_fit(a, k, align16);
    if (at == kNone) return Status::corruption("granule index lost a fresh page");
  }
  set_bits(at, k, true);
  zero_tail(base_ + at * kGranule, n, k * kGranule);
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes += k * kGranule;
  h->blocks++;
  return static_cast<void*>(base_ + at * kGranule);
}

Status Heap::free_gran(uint64_t off, uint32_t e) {
  const uint64_t g = off / kGranule;
  const GranuleBits* b = bits_of(g / kGpp);
  if (off % kGranule != 0 || !test(b->start, g % kGpp)) {
    return Status::invalid_argument("free: not the start of an allocated block (double free?)");
  }
  Result<uint64_t> len = object_granules(g, e);
  if (!len.ok()) return len.status();
  set_bits(g, *len, false);
  HeapHeader* h = header();
  note(h, sizeof *h);
  h->used_bytes -= *len * kGranule;
  h->blocks--;
  GranArena& a = arena_for(e);
  uint64_t fs = free_run_start(g, e), fe = free_run_end(g + *len, e);
  a.extents += 1 - (fs < g) - (fe > g + *len);
  a.gfree_total += *len;
  add_free_extent(a, fs, fe - fs);
  if (a.hints > 2 * a.extents + 4096) return compact_hints(a);
  return Status();
}

// The object holding heap offset `off` (interior pointers included): back
// over allocated granules to the nearest start bit.
Result<BlockInfo> Heap::find_gran(uint64_t off, uint32_t e) {
  const uint64_t g = off / kGranule;
  const AllocKind kind = entry_value(e) == kGranData ? AllocKind::kData : AllocKind::kObject;
  for (uint64_t cur = g; g - cur < kMaxObjectGranules; cur--) {
    if (cur != g && cur % kGpp == kGpp - 1 && !in_arena(cur / kGpp, e)) break;
    const GranuleBits* b = bits_of(cur / kGpp);
    if (!test(b->alloc, cur % kGpp)) {
      if (cur == g) return Status::not_found("address in a free granule");
      break;
    }
    if (test(b->start, cur % kGpp)) {
      Result<uint64_t> len = object_granules(cur, e);
      if (!len.ok()) return len.status();
      return BlockInfo{base_ + cur * kGranule, *len * kGranule, kind};
    }
  }
  return Status::corruption("allocated granule at heap offset " + std::to_string(off) +
                            " belongs to no object");
}

// Validates the bitmaps of npages consecutive granule pages of one arena
// (one page map entry) and indexes their free extents. Every run of
// allocated granules must begin with a start bit, and start bits only mark
// allocated granules.
Status Heap::index_gran_pages(uint64_t page, uint64_t npages, uint64_t* used,
                              uint64_t* blocks) {
  GranArena& a = arena_for(map_entry(page));
  uint64_t carry = 0, run = kNone;
  auto close = [&](uint64_t end) {
    if (run != kNone) {
      push_hint(a, run, end - run);
      a.extents++;
      a.gfree_total += end - run;
    }
    run = kNone;
  };
  for (uint64_t p = page; p < page + npages; p++) {
    const GranuleBits* b = bits_of(p);
    for (uint64_t w = 0; w < kWords; w++) {
      uint64_t a = b->alloc[w], heads = a & ~(a << 1 | carry);
      if ((b->start[w] & ~a) != 0 || (heads & ~b->start[w]) != 0) {
        return Status::corruption("granule bitmap damaged at page " + std::to_string(p) +
                                  "; run 'pm check'");
      }
      carry = a >> 63;
      *used += static_cast<uint64_t>(std::popcount(a)) * kGranule;
      *blocks += static_cast<uint64_t>(std::popcount(b->start[w]));
      uint64_t base = p * kGpp + w * 64;
      if (a == ~0ull) {
        close(base);
        continue;
      }
      for (uint64_t i = 0; i < 64; i++) {
        if (a == 0 && run != kNone) break;  // the whole rest stays free
        bool used = a >> i & 1;
        if (used) close(base + i);
        if (!used && run == kNone) run = base + i;
      }
    }
  }
  close((page + npages) * kGpp);
  return Status();
}

void Heap::visit_gran_pages(uint64_t page, uint64_t npages,
                            const std::function<void(std::byte*, uint64_t)>& fn) {
  const uint32_t e = map_entry(page);
  for (uint64_t p = page; p < page + npages; p++) {
    const GranuleBits* b = bits_of(p);
    for (uint64_t w = 0; w < kWords; w++) {
      for (uint64_t s = b->start[w]; s != 0; s &= s - 1) {
        uint64_t g = p * kGpp + w * 64 + static_cast<uint64_t>(std::countr_zero(s));
        Result<uint64_t> len = object_granules(g, e);
        if (len.ok()) fn(base_ + g * kGranule, *len * kGranule);
      }
    }
  }
}

// Bitmap pages whose 32 pages include no granule page: never written since
// the segment was made, or all zero again.
uint64_t Heap::unused_bitmap_pages() const {
  constexpr uint64_t kPerBitmapPage = kPage / sizeof(GranuleBits);
  uint64_t unused = 0;
  for (const Segment& s : segments_) {
    if (s.bits == nullptr) continue;
    for (uint64_t i = 0; i < s.npages; i += kPerBitmapPage) {
      uint64_t end = std::min(s.npages, i + kPerBitmapPage);
      bool any = false;
      for (uint64_t j = i; j < end && !any; j++) any = entry_kind(s.map[j]) == PageKind::kGran;
      unused += !any;
    }
  }
  return unused;
}

}  // namespace pm
