// Hints tracker: only ranges announced with will_write() are dirty. No faults
// and no system calls: the fastest commit, for code that announces all its
// writes (the kvstore backend, ported code with explicit hints).
#include <algorithm>

#include "libpm/page_bitmap.h"
#include "libpm/tracker.h"

namespace pm {

namespace {

class HintsTracker final : public DirtyTracker {
 public:
  explicit HintsTracker(uint64_t max_len) : bits_(max_len / kPage), lines_(max_len / kPage) {}

  TrackerKind kind() const override { return TrackerKind::kHints; }

  Status track(std::byte* begin, uint64_t new_len) override {
    if (begin_ == nullptr) begin_ = begin;
    if (new_len > len_) len_ = new_len;
    return Status();
  }

  // The pages, and each one's lines kept for take_dirty_lines() (an abort
  // takes pages only: its lines are dropped with them).
  Status take_dirty(std::vector<PageRun>* out) override {
    const size_t from = out->size();
    bits_.collect(true, out);
    taken_lines_.clear();
    for (size_t i = from; i < out->size(); i++) {
      for (uint64_t page = (*out)[i].first; page < (*out)[i].first + (*out)[i].count; page++) {
        append_lines(page, lines_.take(page), &taken_lines_);
      }
    }
    return Status();
  }
  Status peek_dirty(std::vector<PageRun>* out) override {
    bits_.collect(false, out);
    return Status();
  }
  void take_dirty_lines(std::vector<PageRun>* out) override {
    out->swap(taken_lines_);
    taken_lines_.clear();
  }

  Status redirty(const std::vector<PageRun>& runs) override {
    for (const PageRun& r : runs) will_write(begin_ + r.first * kPage, r.count * kPage);
    return Status();
  }

  // Each announced line, with an entry header as if it were a run alone.
  uint64_t dirty_bytes_bound() override {
    std::vector<PageRun> pages;
    bits_.collect(false, &pages);
    uint64_t lines = 0;
    for (const PageRun& r : pages) {
      for (uint64_t page = r.first; page < r.first + r.count; page++) {
        lines += static_cast<uint64_t>(__builtin_popcountll(lines_.peek(page)));
      }
    }
    return lines * (kLine + 16);
  }

  void will_write(const void* p, size_t n) override {
    if (n == 0) return;
    const uint64_t a = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(begin_);
    const uint64_t first = a / kLine, last = (a + n - 1) / kLine;
    for (uint64_t page = first / kLinesPerPage; page <= last / kLinesPerPage; page++) {
      bits_.set(page);
      const uint64_t lo = std::max(first, page * kLinesPerPage) % kLinesPerPage;
      const uint64_t hi = std::min(last, page * kLinesPerPage + kLinesPerPage - 1) % kLinesPerPage;
      lines_.set(page, (~uint64_t{0} >> (63 - hi)) & (~uint64_t{0} << lo));
    }
  }

 private:
  static constexpr uint64_t kPage = 4096, kLine = 64, kLinesPerPage = kPage / kLine;

  // Line numbers of the set bits of `page`'s mask, appended as runs.
  static void append_lines(uint64_t page, uint64_t mask, std::vector<PageRun>* out) {
    while (mask != 0) {
      const uint64_t lo = static_cast<uint64_t>(__builtin_ctzll(mask));
      const uint64_t rest = ~(mask >> lo);  // 0 when every line is set (ctz(0) is undefined)
      const uint64_t len = rest == 0 ? 64 : static_cast<uint64_t>(__builtin_ctzll(rest));
      const uint64_t line = page * kLinesPerPage + lo;
      if (!out->empty() && out->back().first + out->back().count == line) {
        out->back().count += len;
      } else {
        out->push_back({line, len});
      }
      mask = len == 64 ? 0 : mask & ~((~uint64_t{0} >> (64 - len)) << lo);
    }
  }

  PageBitmap bits_;
  LineMasks lines_;
  std::vector<PageRun> taken_lines_;  // by the last take_dirty()
  std::byte* begin_ = nullptr;
  uint64_t len_ = 0;
};

}  // namespace

std::unique_ptr<DirtyTracker> make_hints_tracker(uint64_t max_len) {
  return std::make_unique<HintsTracker>(max_len);
}

}  // namespace pm
