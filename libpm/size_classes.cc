#include "libpm/size_classes.h"

#include <array>
#include <cassert>
#include <cstddef>

namespace pm {

namespace {

constexpr uint64_t kPage = 4096;

uint32_t first_offset(uint32_t size, uint32_t objects) {
  uint32_t hdr = 8 + 8 * ((objects + 63) / 64);
  uint32_t align = (size % 64 == 0) ? 64 : 16;
  return (hdr + align - 1) / align * align;
}

SizeClass make_class(uint32_t size) {
  SizeClass best{size, 0, 0, 0};
  double best_waste = 2;
  for (uint32_t pages = 1; pages <= 64; pages++) {
    uint64_t span = pages * kPage;
    uint32_t n = static_cast<uint32_t>(span / size);
    while (n > 0 && first_offset(size, n) + uint64_t{n} * size > span) n--;
    if (n == 0) continue;
    double waste = double(span - uint64_t{n} * size) / double(span);
    if (waste < best_waste - 1e-9) {
      best = {size, pages, n, first_offset(size, n)};
      best_waste = waste;
    }
    if (best_waste <= 1.0 / 32) break;
  }
  return best;
}

struct Table {
  std::array<SizeClass, 72> classes;
  int count = 0;
  Table() {
    for (uint32_t s = 16; s <= 128; s += 16) classes[count++] = make_class(s);
    for (uint32_t base = 128; base < kMaxSmall; base *= 2) {
      for (uint32_t i = 1; i <= 8; i++) classes[count++] = make_class(base + i * base / 8);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

int size_class_count() { return table().count; }
const SizeClass& size_class(int c) { return table().classes[static_cast<size_t>(c)]; }

int size_class_for(uint64_t n) {
  assert(n > 0 && n <= kMaxSmall);
  if (n <= 128) return static_cast<int>((n + 15) / 16) - 1;
  // Binary search over the geometric part.
  int lo = 8, hi = table().count - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (size_class(mid).size >= n)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace pm
