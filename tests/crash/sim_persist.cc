#include "crash/sim_persist.h"

#include <algorithm>
#include <cstring>

namespace pm::crash {

SimPersist::SimPersist(std::unique_ptr<Persist> real, UnitMode mode, Hook hook)
    : real_(std::move(real)),
      mode_(mode),
      unit_(mode == UnitMode::kPmemLines ? 64 : 4096),
      hook_(std::move(hook)),
      durable_(real_->view(), real_->view() + real_->size()) {}

std::vector<std::byte> SimPersist::live_unit(uint64_t u) const {
  uint64_t from = u * unit_, to = std::min(from + unit_, real_->size());
  if (from >= to) return std::vector<std::byte>(unit_);
  std::vector<std::byte> v(real_->view() + from, real_->view() + to);
  v.resize(unit_);
  return v;
}

void SimPersist::touch(uint64_t off, size_t n, bool snapshot) {
  if (n == 0) return;
  for (uint64_t u = off / unit_; u <= (off + n - 1) / unit_; u++) {
    Pending& p = pending_[u];
    if (!snapshot) continue;
    std::vector<std::byte> v = live_unit(u);
    if (p.flushed.empty() || p.flushed.back() != v) p.flushed.push_back(std::move(v));
  }
}

void SimPersist::write(uint64_t off, const void* src, size_t n) {
  real_->write(off, src, n);
  touch(off, n, false);
}

void SimPersist::flush(uint64_t off, size_t n) {
  real_->flush(off, n);
  touch(off, n, true);
  if (!in_hook_) {
    in_hook_ = true;
    hook_(*this, "flush");
    in_hook_ = false;
  }
}

std::vector<std::byte> SimPersist::durable_unit(uint64_t u) const {
  uint64_t from = std::min<uint64_t>(u * unit_, durable_.size());
  uint64_t to = std::min<uint64_t>(from + unit_, durable_.size());
  std::vector<std::byte> v(durable_.begin() + static_cast<long>(from),
                           durable_.begin() + static_cast<long>(to));
  v.resize(unit_);
  return v;
}

Status SimPersist::drain() {
  // A crash before the drain completes: everything is still possible.
  hook_(*this, "drain");
  PM_TRY(real_->drain());
  // The last flushed version of each unit is durable now. A unit written
  // after its last flush stays volatile (its live bytes may or may not land).
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    uint64_t from = it->first * unit_;
    if (!p.flushed.empty() && from < durable_.size()) {
      size_t n = std::min<uint64_t>(unit_, durable_.size() - from);
      std::memcpy(durable_.data() + from, p.flushed.back().data(), n);
    }
    p.flushed.clear();
    it = live_unit(it->first) == durable_unit(it->first) ? pending_.erase(it) : std::next(it);
  }
  return Status();
}

Status SimPersist::resize(uint64_t keep, uint64_t new_size) {
  hook_(*this, "resize");
  PM_TRY(real_->resize(keep, new_size));
  // The new size is durable on return (the real backend fsyncs).
  durable_.resize(std::min<uint64_t>(keep, durable_.size()));
  durable_.resize(new_size);
  pending_.erase(pending_.lower_bound(keep / unit_ + (keep % unit_ ? 1 : 0)), pending_.end());
  return Status();
}

void SimPersist::kill_point(std::string_view name) { hook_(*this, std::string(name)); }

std::vector<size_t> SimPersist::candidate_counts() const {
  std::vector<size_t> counts;
  counts.reserve(pending_.size());
  for (const auto& [u, p] : pending_)
    counts.push_back(2 + p.flushed.size());  // durable, flushed..., live
  return counts;
}

std::vector<std::byte> SimPersist::image(const std::vector<size_t>& choice,
                                         std::mt19937_64* rng) const {
  std::vector<std::byte> img = durable_;
  size_t i = 0;
  for (const auto& [u, p] : pending_) {
    size_t c = choice[i++];
    uint64_t from = u * unit_;
    if (from >= img.size()) continue;
    size_t n = std::min<uint64_t>(unit_, img.size() - from);
    std::vector<std::byte> v;
    if (c == 0) continue;  // durable
    if (c <= p.flushed.size()) {
      v = p.flushed[c - 1];
    } else if (c == p.flushed.size() + 1) {
      v = live_unit(u);
    } else {
      // Torn page (msync path): each 512-byte sector old or new. `img`
      // still holds this unit's durable bytes.
      v = live_unit(u);
      for (size_t sec = 0; sec < n; sec += 512) {
        if ((*rng)() & 1)
          std::memcpy(v.data() + sec, img.data() + from + sec, std::min<size_t>(512, n - sec));
      }
    }
    std::memcpy(img.data() + from, v.data(), n);
  }
  return img;
}

}  // namespace pm::crash
