// Heap::split_fresh: which changed bytes of a commit lie where the
// committed heap keeps nothing. The container writes those home before its
// commit point instead of journaling them (container_commit.cc, commit_locked):
// a crash before the commit point leaves them in free space, where no
// recovered state reads.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "libpm/heap.h"

namespace pm {

namespace {

constexpr uint64_t kPage = 4096;

// Appends [off, off+len) to `v`, merging with an adjacent last run.
void append(std::vector<Run>* v, uint64_t off, uint64_t len) {
  if (!v->empty() && v->back().off + v->back().len == off) {
    v->back().len += len;
  } else {
    v->push_back({off, len});
  }
}

}  // namespace

void Heap::split_fresh(const std::byte* home, uint64_t home_size, std::vector<Run>* runs,
                       std::vector<Run>* fresh) {
  // No lock: the caller excludes every mutator (the container's closed
  // gate), so segments_ holds still, and segment_of() is not used because
  // it writes its cache (readers such as find_block share it under mu_).
  // Taking mu_ here would invert the order of growth (mu_, then the
  // container's persist lock).
  size_t seg = 0;
  auto segment = [&](uint64_t page) -> const Segment* {
    if (seg >= segments_.size() || page - segments_[seg].first_page >= segments_[seg].npages) {
      auto it = std::upper_bound(segments_.begin(), segments_.end(), page,
                                 [](uint64_t p, const Segment& s) { return p < s.first_page; });
      if (it == segments_.begin()) return nullptr;
      seg = static_cast<size_t>(it - segments_.begin()) - 1;
      if (page - segments_[seg].first_page >= segments_[seg].npages) return nullptr;
    }
    return &segments_[seg];
  };
  auto* hh = reinterpret_cast<const HeapHeader*>(home);
  if (home_size < kPage || hh->magic != header()->magic) return;  // nothing is fresh
  // Pages at or past the committed heap's end belong to segments grown
  // since: no committed state uses them.
  const uint64_t home_pages = std::min(hh->heap_size, home_size) / kPage;
  // How the committed image uses a page: not at all, whole, or as a
  // granule page (then line by line: a line holds 8 granules, one byte of
  // the page's alloc bits).
  enum class Use { kNone, kWhole, kGranules };
  const std::byte* gran_alloc = nullptr;  // the alloc bits of a kGranules page
  auto page_use = [&](uint64_t page) {
    if (page >= home_pages) return Use::kNone;
    const Segment* s = segment(page);
    if (s == nullptr || s->first_page + s->npages > home_pages) return Use::kWhole;
    const uint64_t i = page - s->first_page;
    if (i < s->meta_pages) return Use::kWhole;
    uint32_t e;
    std::memcpy(&e, home + (reinterpret_cast<const std::byte*>(s->map + i) - base_), sizeof e);
    if (e == 0) return Use::kNone;
    if (entry_kind(e) != PageKind::kGran || s->bits == nullptr) return Use::kWhole;
    gran_alloc = home + (reinterpret_cast<const std::byte*>(s->bits + i) - base_) +
                 offsetof(GranuleBits, alloc);
    return Use::kGranules;
  };
  std::vector<Run> kept;
  for (const Run& r : *runs) {
    for (uint64_t at = r.off, end = r.off + r.len; at < end;) {
      const uint64_t page_end = std::min(end, (at / kPage + 1) * kPage);
      switch (page_use(at / kPage)) {
        case Use::kNone:
          append(fresh, at, page_end - at);
          break;
        case Use::kWhole:
          append(&kept, at, page_end - at);
          break;
        case Use::kGranules:
          for (uint64_t line = at; line < page_end; line += kLine) {
            const bool used = gran_alloc[(line % kPage) / kLine] != std::byte{0};
            append(used ? &kept : fresh, line, kLine);
          }
          break;
      }
      at = page_end;
    }
  }
  runs->swap(kept);
}

}  // namespace pm
