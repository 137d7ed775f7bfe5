#include "libpm/escape_classifier.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

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
// /proc/self/maps in one buffer: a stream and a string per field cost more
// than the kernel's formatting of the file (a check per crash image in the
// harness opened it tens of thousands of times).
std::string read_maps() {
  std::string text;
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  constexpr size_t kChunk = 64 << 10;
  for (;;) {
    const size_t at = text.size();
    text.resize(at + kChunk);
    const ssize_t n = ::read(fd, text.data() + at, kChunk);
    text.resize(at + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
  ::close(fd);
  return text;
}

// Drops a field and the blanks after it.
std::string_view skip_field(std::string_view s) {
  size_t end = s.find(' ');
  if (end == std::string_view::npos) return {};
  size_t next = s.find_first_not_of(' ', end);
  return next == std::string_view::npos ? std::string_view() : s.substr(next);
}

}  // namespace

EscapeClassifier::EscapeClassifier(uint64_t skip_begin, uint64_t skip_end, bool typical_ranges)
    : skip_begin_(skip_begin), skip_end_(skip_end), typical_ranges_(typical_ranges) {
  const std::string text = read_maps();
  std::string_view rest(text);
  while (!rest.empty()) {
    // "begin-end perms offset dev inode [name]"
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    uint64_t begin = 0, end = 0;
    const char* p = line.data();
    const char* last = line.data() + line.size();
    auto [dash, e1] = std::from_chars(p, last, begin, 16);
    if (e1 != std::errc() || dash == last || *dash != '-') continue;
    auto [blank, e2] = std::from_chars(dash + 1, last, end, 16);
    if (e2 != std::errc()) continue;
    std::string_view fields = line.substr(static_cast<size_t>(blank - p));
    fields = fields.substr(std::min(fields.find_first_not_of(' '), fields.size()));
    // Reservations and guard pages (no access at all) hold no objects: no
    // program keeps a pointer into them, and TSan reserves most of the
    // address space this way, where any 6-byte string would land.
    if (fields.starts_with("---")) continue;
    std::string_view name = skip_field(skip_field(skip_field(skip_field(fields))));
    if (end <= skip_begin || begin >= skip_end) {
      maps_.push_back(Mapping{begin, end, name.empty() ? "anonymous" : std::string(name)});
    }
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
