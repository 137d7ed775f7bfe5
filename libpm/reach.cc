// Reachability: which blocks are persistent (reachable from the roots), the
// collector that frees the others, and the escaping-pointer check.
//
// Conservative marking: every aligned 8-byte word of a reachable block is
// read twice, as an absolute address and as a self-relative offset (the
// encoding of boost::interprocess::offset_ptr: target = &word + value, with
// 1 meaning null); either one that lands inside an allocated block marks it.
// Integers that happen to look like pointers keep garbage alive; nothing
// reachable is ever freed. Data blocks (AllocKind::kData) are marked when
// reached and never read: their bytes are values, not pointers.
#include <bit>
#include <cstring>
#include <map>

#include "libpm/heap.h"
#include "libpm/size_classes.h"

namespace pm {

void Heap::mark(std::vector<uint64_t>* marks, const std::function<void(const BlockInfo&)>& visit) {
  const uint64_t heap = header()->heap_size;
  const auto lo = reinterpret_cast<uintptr_t>(base_);
  marks->assign((heap / kGranule + 63) / 64, 0);
  std::vector<BlockInfo> stack;
  auto consider = [&](uint64_t addr) {
    if (addr < lo || addr >= lo + heap) return;
    Result<BlockInfo> b = find_block_locked(addr - lo);
    if (!b.ok()) return;
    uint64_t g = (reinterpret_cast<uintptr_t>(b->start) - lo) / kGranule;
    uint64_t& w = (*marks)[g / 64];
    if (w >> (g % 64) & 1) return;
    w |= 1ull << (g % 64);
    stack.push_back(*b);
  };
  const HeapHeader* h = header();
  if (h->root != 0) consider(lo + h->root);
  for (const NamedRoot& r : h->roots) {
    if (r.name[0] != '\0' && r.off != 0) consider(lo + r.off);
  }
  while (!stack.empty()) {
    BlockInfo b = stack.back();
    stack.pop_back();
    auto* p = static_cast<std::byte*>(b.start);
    visit(b);
    if (b.kind == AllocKind::kData) continue;
    for (uint64_t i = 0; i + 8 <= b.size; i += 8) {
      uint64_t v;
      std::memcpy(&v, p + i, 8);
      if (v == 0 || v == 1) continue;
      consider(v);
      consider(reinterpret_cast<uintptr_t>(p + i) + v);  // offset_ptr
    }
  }
}

namespace {

bool is_marked(const std::vector<uint64_t>& marks, uint64_t g) {
  return marks[g / 64] >> (g % 64) & 1;
}

}  // namespace

Status Heap::collect(bool dry_run, CollectReport* r) {
  std::lock_guard<std::mutex> l(mu_);
  PM_TRY(ensure_index());
  std::vector<std::string> bad;
  root_problems_locked(&bad);
  if (!bad.empty()) {
    return Status::corruption(bad.front() + "; nothing collected, since what it reached would " +
                              "count as garbage: set or clear that root (pm check lists them)");
  }
  std::vector<uint64_t> marks;
  mark(&marks, [&](const BlockInfo& b) {
    r->live_blocks++;
    r->live_bytes += b.size;
  });
  std::vector<std::byte*> dead;
  std::map<uint64_t, uint64_t> by_size;
  visit_blocks_locked([&](std::byte* p, uint64_t n) {
    if (is_marked(marks, static_cast<uint64_t>(p - base_) / kGranule)) return;
    dead.push_back(p);
    r->freed_blocks++;
    r->freed_bytes += n;
    by_size[std::bit_ceil(n)]++;
  });
  r->freed_by_size.assign(by_size.begin(), by_size.end());
  if (dry_run) return Status();
  for (std::byte* p : dead) PM_TRY(free_locked(p));
  return Status();
}

void Heap::find_escapes(const Classifier& is_volatile, CheckReport* report) {
  std::lock_guard<std::mutex> l(mu_);
  const auto lo = reinterpret_cast<uintptr_t>(base_);
  const uint64_t heap = header()->heap_size;
  std::vector<uint64_t> marks;
  mark(&marks, [&](const BlockInfo& b) {
    report->reachable_blocks++;
    if (b.kind == AllocKind::kData) return;  // values: nothing to report
    auto* p = static_cast<const std::byte*>(b.start);
    for (uint64_t i = 0; i + 8 <= b.size; i += 8) {
      uint64_t v;
      std::memcpy(&v, p + i, 8);
      if (v >= lo && v < lo + heap) continue;
      // An offset_ptr into the container (mark() reads words so too): a
      // negative offset is a huge value, which may fall in [vsyscall].
      uint64_t self_relative = reinterpret_cast<uintptr_t>(p + i) + v;
      if (self_relative >= lo && self_relative < lo + heap) continue;
      std::string where = is_volatile(v);
      if (where.empty()) continue;
      report->escaping.push_back({reinterpret_cast<uintptr_t>(p), i, v, std::move(where)});
    }
  });
}

}  // namespace pm
