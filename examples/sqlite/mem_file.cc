#include "mem_file.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace pmsqlite {

using pm::Result;
using pm::Status;

namespace {

// A piece of bytes grows by appends up to this, so that an overwrite
// inside it (SQLite rewrites a journal's header) copies little.
constexpr uint64_t kMaxBytesPiece = 64 << 10;

// SQLite's journal: a header, then records of a page number (4 bytes, big
// endian), the page (a power of two from 512 to 64 KiB) and a checksum.
// A transaction over several databases ends each journal with the
// super-journal's name, then its length, its checksum and this magic
// (which also begins every journal header).
constexpr unsigned char kJournalMagic[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};

bool is_page_size(size_t n) { return n >= 512 && n <= 65536 && (n & (n - 1)) == 0; }

}  // namespace

Result<size_t> MemFile::read(void* buf, size_t n, uint64_t off) const {
  std::lock_guard<std::mutex> g(mu_);
  PM_TRY(read_locked(buf, n, off));
  return off >= size_ ? 0 : static_cast<size_t>(std::min<uint64_t>(n, size_ - off));
}

Status MemFile::read_locked(void* buf, size_t n, uint64_t off) const {
  auto* out = static_cast<unsigned char*>(buf);
  std::memset(out, 0, n);
  auto it = pieces_.upper_bound(off);
  if (it != pieces_.begin()) --it;
  for (; it != pieces_.end() && it->first < off + n; ++it) {
    const Piece& p = it->second;
    const uint64_t from = std::max(it->first, off);
    const uint64_t to = std::min(it->first + p.len, off + n);
    if (from >= to) continue;
    if (!p.ref) {
      std::memcpy(out + (from - off), p.bytes.data() + (from - it->first), to - from);
      continue;
    }
    std::shared_ptr<const OldPages> pages = old_pages_.lock();
    if (!pages) return Status::io_error("a journal's old page: its database was closed");
    PM_TRY(pages->read_committed(out + (from - off), to - from, p.page_off + (from - it->first),
                                 p.state));
  }
  return Status();
}

// True, with *p filled, when [off, off+n) is a page record's page that
// equals the database's committed page.
bool MemFile::as_reference(const void* buf, size_t n, uint64_t off, Piece* p) const {
  if (!is_page_size(n) || off < kCopiedBytes) return false;
  std::shared_ptr<const OldPages> pages = old_pages_.lock();
  if (!pages) return false;
  auto it = pieces_.upper_bound(off - 4);
  if (it == pieces_.begin()) return false;
  --it;  // the page number must lie in one piece of bytes
  if (it->second.ref || it->first + it->second.len < off) return false;
  const auto* b = reinterpret_cast<const unsigned char*>(it->second.bytes.data()) +
                  (off - 4 - it->first);
  const uint32_t pgno = uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
  if (pgno == 0) return false;
  thread_local std::string committed;
  committed.resize(n);
  const uint64_t state = pages->committed_state();
  const uint64_t page_off = uint64_t{pgno - 1} * n;
  if (!pages->read_committed(committed.data(), n, page_off, state).ok() ||
      std::memcmp(committed.data(), buf, n) != 0) {
    return false;
  }
  p->len = n;
  p->ref = true;
  p->page_off = page_off;
  p->state = state;
  return true;
}

void MemFile::write(const void* buf, size_t n, uint64_t off) {
  std::lock_guard<std::mutex> g(mu_);
  size_ = std::max(size_, off + n);
  if (n == 0) return;
  Piece ref;
  const bool is_ref = as_reference(buf, n, off, &ref);
  erase(off, off + n);
  if (is_ref) {
    pieces_.emplace(off, std::move(ref));
    return;
  }
  auto next = pieces_.lower_bound(off);
  if (next != pieces_.begin()) {
    auto prev = std::prev(next);
    Piece& p = prev->second;
    if (!p.ref && prev->first + p.len == off && p.len + n <= kMaxBytesPiece) {
      p.bytes.append(static_cast<const char*>(buf), n);
      p.len += n;
      return;
    }
  }
  Piece p;
  p.len = n;
  // Room for the appends that follow (SQLite writes a record's page number,
  // page and checksum apart): growing a string by doubling copied each
  // journal a few times, a tenth of a one-row transaction's journal work.
  // Only where records are copies: past kCopiedBytes a piece holds a
  // checksum and the next page number between two references, 8 bytes.
  if (off < kCopiedBytes && n < kMaxBytesPiece) p.bytes.reserve(kMaxBytesPiece);
  p.bytes.assign(static_cast<const char*>(buf), n);
  pieces_.emplace_hint(next, off, std::move(p));
}

// Cuts the piece that spans `at`, if any, in two.
void MemFile::split_at(uint64_t at) {
  auto it = pieces_.upper_bound(at);
  if (it == pieces_.begin()) return;
  --it;
  Piece& p = it->second;
  if (it->first == at || it->first + p.len <= at) return;
  const uint64_t head = at - it->first;
  Piece tail;
  tail.len = p.len - head;
  tail.ref = p.ref;
  tail.state = p.state;
  if (p.ref) {
    tail.page_off = p.page_off + head;
  } else {
    tail.bytes = p.bytes.substr(head);
    p.bytes.resize(head);
  }
  p.len = head;
  pieces_.emplace_hint(std::next(it), at, std::move(tail));
}

void MemFile::erase(uint64_t from, uint64_t to) {
  split_at(from);
  split_at(to);
  pieces_.erase(pieces_.lower_bound(from), pieces_.lower_bound(to));
}

void MemFile::truncate(uint64_t size) {
  std::lock_guard<std::mutex> g(mu_);
  if (size >= size_) return;
  erase(size, UINT64_MAX);
  size_ = size;
}

uint64_t MemFile::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return size_;
}

void MemFile::set_old_pages(std::weak_ptr<const OldPages> pages) {
  std::lock_guard<std::mutex> g(mu_);
  old_pages_ = std::move(pages);
}

Status MemFile::keep_old_pages() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [off, p] : pieces_) {
    if (!p.ref) continue;
    std::string bytes(p.len, '\0');
    PM_TRY(read_locked(bytes.data(), p.len, off));
    p.bytes = std::move(bytes);
    p.ref = false;
  }
  return Status();
}

bool MemFile::names_super_journal() const {
  std::lock_guard<std::mutex> g(mu_);
  unsigned char tail[sizeof kJournalMagic];
  return size_ > sizeof tail && read_locked(tail, sizeof tail, size_ - sizeof tail).ok() &&
         std::memcmp(tail, kJournalMagic, sizeof tail) == 0;
}

bool MemFile::has_references() const {
  std::lock_guard<std::mutex> g(mu_);
  return std::any_of(pieces_.begin(), pieces_.end(), [](const auto& p) { return p.second.ref; });
}

uint64_t MemFile::held_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = 0;
  for (const auto& [off, p] : pieces_) n += p.bytes.size();
  return n;
}

uint64_t MemFile::dram_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = 0;
  for (const auto& [off, p] : pieces_) n += p.bytes.capacity();
  return n;
}

namespace mem_files {
namespace {
std::mutex g_mu;
std::map<std::string, std::shared_ptr<MemFile>, std::less<>>& files() {
  static auto* f = new std::map<std::string, std::shared_ptr<MemFile>, std::less<>>;
  return *f;
}
}  // namespace

std::shared_ptr<MemFile> open(std::string_view name, bool create) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = files().find(name);
  if (it != files().end()) return it->second;
  if (!create) return nullptr;
  auto f = std::make_shared<MemFile>();
  files().emplace(std::string(name), f);
  return f;
}

Presence presence(std::string_view name) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = files().find(name);
  if (it == files().end()) return Presence::kUnknown;
  return it->second->size() > 0 ? Presence::kNotEmpty : Presence::kEmpty;
}

bool remove(std::string_view name) {
  std::lock_guard<std::mutex> g(g_mu);
  auto it = files().find(name);
  if (it == files().end()) return false;
  files().erase(it);
  return true;
}

}  // namespace mem_files
}  // namespace pmsqlite
