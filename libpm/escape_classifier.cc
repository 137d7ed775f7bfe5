#include "libpm/escape_classifier.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace pm {

namespace {
// Where x86-64 Linux puts the brk heap of PIE programs (just after the
// binary, 0x55..-0x56..) and mmap'ed memory and stacks (0x7e..-0x7f..).
constexpr uint64_t kBrkLo = 0x5500'0000'0000ull, kBrkHi = 0x5700'0000'0000ull;
constexpr uint64_t kMmapLo = 0x7e00'0000'0000ull, kMmapHi = 0x8000'0000'0000ull;
#if defined(__SANITIZE_ADDRESS__)
// ASan's shadow memory and the gap between its halves (x86-64): mappings of
// this process that no program stores a pointer to, and where ordinary
// integers land (two 32-bit lengths in one word, 2 GiB .. 16 TiB).
constexpr uint64_t kAsanLo = 0x7fff'8000ull, kAsanHi = 0x1000'7fff'8000ull;
#endif
}  // namespace

EscapeClassifier::EscapeClassifier(uint64_t skip_begin, uint64_t skip_end, bool typical_ranges)
    : skip_begin_(skip_begin), skip_end_(skip_end), typical_ranges_(typical_ranges) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string range, perms, offset, dev, inode, name;
    f >> range >> perms >> offset >> dev >> inode;
    std::getline(f >> std::ws, name);
    auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    // Reservations and guard pages (no access at all) hold no objects: no
    // program keeps a pointer into them, and TSan reserves most of the
    // address space this way, where any 6-byte string would land.
    if (perms.rfind("---", 0) == 0) continue;
    Mapping m{std::stoull(range.substr(0, dash), nullptr, 16),
              std::stoull(range.substr(dash + 1), nullptr, 16), name.empty() ? "anonymous" : name};
    if (m.end <= skip_begin || m.begin >= skip_end) maps_.push_back(std::move(m));
  }
  std::sort(maps_.begin(), maps_.end(),
            [](const Mapping& a, const Mapping& b) { return a.begin < b.begin; });
}

std::string EscapeClassifier::classify(uint64_t v) const {
  if (v >= skip_begin_ && v < skip_end_) return "";
#if defined(__SANITIZE_ADDRESS__)
  if (v >= kAsanLo && v < kAsanHi) return "";
#endif
  auto it = std::upper_bound(maps_.begin(), maps_.end(), v,
                             [](uint64_t x, const Mapping& m) { return x < m.begin; });
  if (it != maps_.begin() && v < std::prev(it)->end) return std::prev(it)->name;
  if (typical_ranges_ && ((v >= kBrkLo && v < kBrkHi) || (v >= kMmapLo && v < kMmapHi))) {
    return "volatile range";
  }
  return "";
}

}  // namespace pm
