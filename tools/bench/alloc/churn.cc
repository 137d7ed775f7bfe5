#include "bench/alloc/churn.h"

#include <algorithm>
#include <cassert>

namespace pm::bench {

const std::vector<Pattern>& nibble_patterns() {
  static const std::vector<Pattern> patterns = {{"P1", 60, 70},
                                                {"P2", 1000, 1024},
                                                {"P3", 1000, 1030},
                                                {"P4", 1 << 10, 10 << 10},
                                                {"P5", 10 << 10, 100 << 10},
                                                {"P6", 500 << 10, 600 << 10}};
  return patterns;
}

Churn::Churn(const Pattern& p, uint64_t live_bytes, double churn_factor, uint64_t seed)
    : pattern_(p),
      target_(live_bytes),
      replace_bytes_(static_cast<uint64_t>(churn_factor * double(live_bytes))),
      rng_(seed),
      // resize() writes every entry, so the table is resident from here on.
      objects_(live_bytes / std::min(p.from, p.to) + 1) {
  assert(live_bytes >= std::max(p.from, p.to));
}

Status Churn::add(AllocEngine& engine, uint32_t size) {
  Result<uint64_t> h = engine.alloc(size);
  if (!h.ok()) return h.status();
  std::byte* p = engine.address(*h);
  for (uint32_t off = 0; off < size; off += 4096) p[off] = std::byte{1};
  p[size - 1] = std::byte{1};
  objects_[count_++] = {*h, size};
  live_ += size;
  return Status();
}

Status Churn::remove_random(AllocEngine& engine) {
  Object& victim = objects_[rng_.below(count_)];
  PM_TRY(engine.free(victim.handle));
  live_ -= victim.size;
  victim = objects_[--count_];
  return Status();
}

Result<ChurnOutcome> Churn::run(AllocEngine& engine) {
  const uint64_t start = now_ns();
  while (live_ + pattern_.from <= target_) PM_TRY(add(engine, pattern_.from));
  ChurnOutcome out;
  while (out.replaced_bytes < replace_bytes_) {
    while (live_ + pattern_.to > target_) PM_TRY(remove_random(engine));
    PM_TRY(add(engine, pattern_.to));
    out.replaced_bytes += pattern_.to;
  }
  out.seconds = double(now_ns() - start) / 1e9;
  out.live_bytes = live_;
  out.objects = count_;
  for (uint64_t i = 0; i < count_; i++) out.old_objects += objects_[i].size == pattern_.from;
  Result<Usage> u = engine.usage();
  if (!u.ok()) return u.status();
  out.usage = *u;
  return out;
}

}  // namespace pm::bench
