// Hints tracker: only ranges announced with will_write() are dirty. No faults
// and no system calls: the fastest commit, for code that announces all its
// writes (the kvstore backend, ported code with explicit hints).
#include "libpm/page_bitmap.h"
#include "libpm/tracker.h"

namespace pm {

namespace {

class HintsTracker final : public DirtyTracker {
 public:
  explicit HintsTracker(uint64_t max_len) : bits_(max_len / 4096) {}

  TrackerKind kind() const override { return TrackerKind::kHints; }

  Status track(std::byte* begin, uint64_t new_len) override {
    if (begin_ == nullptr) begin_ = begin;
    if (new_len > len_) len_ = new_len;
    return Status();
  }

  Status take_dirty(std::vector<PageRun>* out) override {
    bits_.collect(true, out);
    return Status();
  }
  Status peek_dirty(std::vector<PageRun>* out) override {
    bits_.collect(false, out);
    return Status();
  }

  Status redirty(const std::vector<PageRun>& runs) override {
    for (const PageRun& r : runs) will_write(begin_ + r.first * 4096, r.count * 4096);
    return Status();
  }

  void will_write(const void* p, size_t n) override {
    if (n == 0) return;
    auto a = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(begin_);
    for (uint64_t page = a / 4096; page <= (a + n - 1) / 4096; page++) bits_.set(page);
  }

 private:
  PageBitmap bits_;
  std::byte* begin_ = nullptr;
  uint64_t len_ = 0;
};

}  // namespace

std::unique_ptr<DirtyTracker> make_hints_tracker(uint64_t max_len) {
  return std::make_unique<HintsTracker>(max_len);
}

}  // namespace pm
