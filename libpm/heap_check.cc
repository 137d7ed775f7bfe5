// Heap::check: verifies the persistent heap metadata without trusting the
// DRAM index (which is derived from it).
#include <bit>
#include <string>

#include "libpm/heap.h"
#include "libpm/size_classes.h"

namespace pm {

namespace {

void check_slab(const std::byte* at, uint64_t page, int cls, uint64_t* used, uint64_t* blocks,
                std::vector<std::string>* problems) {
  const SizeClass& sc = size_class(cls);
  auto* sh = reinterpret_cast<const SlabHeader*>(at);
  std::string where = "slab at page " + std::to_string(page);
  if (sh->magic != kSlabMagic || sh->size_class != cls) {
    problems->push_back(where + ": header damaged");
    return;
  }
  uint32_t set = 0;
  for (uint32_t w = 0; w * 64 < sc.objects; w++) {
    uint64_t bits = sh->bitmap[w];
    uint32_t valid = std::min<uint32_t>(64, sc.objects - w * 64);
    if (valid < 64 && (bits >> valid) != 0)
      problems->push_back(where + ": bits past the last slot");
    set += static_cast<uint32_t>(std::popcount(valid < 64 ? bits & ((1ull << valid) - 1) : bits));
  }
  if (sc.objects - set != sh->nfree) {
    problems->push_back(where + ": free count " + std::to_string(sh->nfree) +
                        " disagrees with its bitmap (" + std::to_string(sc.objects - set) + ")");
  }
  *used += uint64_t{set} * sc.size;
  *blocks += set;
}

}  // namespace

// One granule page: its entry says object or data page, start bits only on
// allocated granules, every run of allocated granules begins with one (a run
// may continue from the previous page when that is a granule page of the
// same kind), objects no longer than kMaxSmall.
void Heap::check_gran_page(const Segment& s, uint64_t i, uint64_t* used, uint64_t* blocks,
                           std::vector<std::string>* problems) {
  const uint64_t page = s.first_page + i;
  const GranuleBits* b = s.bits + i;
  std::string where = "granule page " + std::to_string(page);
  if (entry_value(s.map[i]) > kGranData) {
    problems->push_back(where + ": page map entry has an unknown value " +
                        std::to_string(entry_value(s.map[i])));
  }
  bool after_gran = i > 0 && s.map[i - 1] == s.map[i];
  uint64_t carry = after_gran ? s.bits[i - 1].alloc[kGranulesPerPage / 64 - 1] >> 63 : 0;
  for (uint64_t w = 0; w < kGranulesPerPage / 64; w++) {
    uint64_t a = b->alloc[w], st = b->start[w];
    if ((st & ~a) != 0) problems->push_back(where + ": start bit on a free granule");
    if ((a & ~(a << 1 | carry) & ~st) != 0) {
      problems->push_back(where + ": allocated granules without a start bit");
    }
    carry = a >> 63;
    *used += static_cast<uint64_t>(std::popcount(a)) * kGranule;
    *blocks += static_cast<uint64_t>(std::popcount(st));
    for (uint64_t bits = st & a; bits != 0; bits &= bits - 1) {
      uint64_t g = page * kGranulesPerPage + w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      Result<uint64_t> len = object_granules(g, s.map[i]);
      if (!len.ok()) problems->push_back(where + ": " + len.status().message());
    }
  }
}

// Pages of a format-2 segment that are not granule pages have zero bitmaps
// (a page becomes a granule page with none set).
void Heap::check_idle_bitmaps(const Segment& s, std::vector<std::string>* problems) {
  if (s.bits == nullptr) return;
  for (uint64_t i = 0; i < s.npages; i++) {
    if (entry_kind(s.map[i]) == PageKind::kGran) continue;
    const GranuleBits& b = s.bits[i];
    for (uint64_t w = 0; w < kGranulesPerPage / 64; w++) {
      if ((b.alloc[w] | b.start[w]) != 0) {
        problems->push_back("page " + std::to_string(s.first_page + i) +
                            ": granule bits set on a page that is not a granule page");
        break;
      }
    }
  }
}

void Heap::check(std::vector<std::string>* problems) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t used = 0, blocks = 0;
  for (const Segment& s : segments_) {
    std::string seg = "segment at page " + std::to_string(s.first_page);
    for (uint64_t i = 0; i < s.meta_pages; i++) {
      if (entry_kind(s.map[i]) != PageKind::kMeta) {
        problems->push_back(seg + ": metadata page " + std::to_string(i) + " not marked");
      }
    }
    check_idle_bitmaps(s, problems);
    uint64_t i = s.meta_pages;
    while (i < s.npages) {
      uint32_t e = s.map[i];
      uint64_t page = s.first_page + i;
      PageKind k = entry_kind(e);
      uint64_t span = 1;
      PageKind tail = PageKind::kFree;
      if (k == PageKind::kGran && s.bits != nullptr) {
        check_gran_page(s, i, &used, &blocks, problems);
        i++;
        continue;
      }
      if (k == PageKind::kDataRunHead && s.bits == nullptr) {
        problems->push_back("page " + std::to_string(page) + ": data run in a slab heap");
        i++;
        continue;
      }
      if (k == PageKind::kRunHead || k == PageKind::kDataRunHead) {
        span = entry_value(e);
        tail = PageKind::kRunTail;
        used += span * 4096;
        blocks++;
      } else if (k == PageKind::kSlabHead) {
        int cls = static_cast<int>(entry_value(e));
        if (cls >= size_class_count()) {
          problems->push_back("page " + std::to_string(page) + ": unknown size class");
          i++;
          continue;
        }
        span = size_class(cls).pages;
        tail = PageKind::kSlabTail;
      } else if (k != PageKind::kFree || e != 0) {
        problems->push_back("page " + std::to_string(page) + ": stray page map entry " +
                            std::to_string(e));
        i++;
        continue;
      }
      if (span == 0 || span > s.npages - i) {
        problems->push_back("page " + std::to_string(page) + ": block runs past its segment");
        i++;
        continue;
      }
      for (uint64_t t = 1; t < span; t++) {
        if (s.map[i + t] != page_entry(tail, t)) {
          problems->push_back("page " + std::to_string(page + t) + ": bad continuation entry");
          break;
        }
      }
      if (k == PageKind::kSlabHead) {
        check_slab(page_addr(page), page, static_cast<int>(entry_value(e)), &used, &blocks,
                   problems);
      }
      i += span;
    }
  }
  root_problems_locked(problems);
  const HeapHeader* h = header();
  if (h->used_bytes != used || h->blocks != blocks) {
    problems->push_back("heap counters say " + std::to_string(h->blocks) + " blocks / " +
                        std::to_string(h->used_bytes) + " bytes; page maps say " +
                        std::to_string(blocks) + " / " + std::to_string(used));
  }
}

}  // namespace pm
