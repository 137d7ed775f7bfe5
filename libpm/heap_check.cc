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
    uint64_t i = s.meta_pages;
    while (i < s.npages) {
      uint32_t e = s.map[i];
      uint64_t page = s.first_page + i;
      PageKind k = entry_kind(e);
      uint64_t span = 1;
      PageKind tail = PageKind::kFree;
      if (k == PageKind::kRunHead) {
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
  const HeapHeader* h = header();
  if (h->used_bytes != used || h->blocks != blocks) {
    problems->push_back("heap counters say " + std::to_string(h->blocks) + " blocks / " +
                        std::to_string(h->used_bytes) + " bytes; page maps say " +
                        std::to_string(blocks) + " / " + std::to_string(used));
  }
}

}  // namespace pm
