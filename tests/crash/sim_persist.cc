#include "crash/sim_persist.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace pm::crash {

namespace {

// A unit written this often between syncs keeps its oldest and newest
// versions and a spread of the others (the image count is bounded anyway).
constexpr size_t kMaxVersions = 48;

}  // namespace

SimPersist::SimPersist(std::unique_ptr<Persist> real, UnitMode mode, Hook hook,
                       const std::string& path, const std::vector<std::byte>* durable)
    : real_(std::move(real)),
      mode_(mode),
      unit_(mode == UnitMode::kPmemLines ? 64 : 4096),
      hook_(std::move(hook)),
      durable_(real_->view(), real_->view() + real_->size()) {
  if (!path.empty()) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (durable == nullptr) return;
  // Killed before: the file is the page cache, `durable` the disk.
  durable_ = *durable;
  durable_.resize(real_->size());
  for (uint64_t u = 0; u * unit_ < durable_.size(); u++) {
    std::vector<std::byte> live = live_unit(u);
    if (live != durable_unit(u)) volatile_[u].versions.push_back(std::move(live));
  }
}

SimPersist::~SimPersist() {
  if (on_close_) on_close_(*this);
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::byte> SimPersist::live_unit(uint64_t u) const {
  uint64_t from = u * unit_, to = std::min(from + unit_, real_->size());
  if (from >= to) return std::vector<std::byte>(unit_);
  std::vector<std::byte> v(real_->view() + from, real_->view() + to);
  v.resize(unit_);
  return v;
}

std::vector<std::byte> SimPersist::durable_unit(uint64_t u) const {
  uint64_t from = std::min<uint64_t>(u * unit_, durable_.size());
  uint64_t to = std::min<uint64_t>(from + unit_, durable_.size());
  std::vector<std::byte> v(durable_.begin() + static_cast<long>(from),
                           durable_.begin() + static_cast<long>(to));
  v.resize(unit_);
  return v;
}

void SimPersist::call_hook(const char* point) {
  if (in_hook_) return;
  in_hook_ = true;
  hook_(*this, point);
  in_hook_ = false;
}

void SimPersist::check_reserved(uint64_t off, size_t n) {
  // Every byte of a container file must have its blocks reserved: a store
  // into a hole of a shared mapping raises SIGBUS on a full disk. SEEK_HOLE
  // cannot tell reserved-but-unwritten space from a hole (tmpfs and ext4
  // report both as holes), but the block count can: fallocate counts.
  if (fd_ < 0 || n == 0 || !violations_.empty()) return;
  struct stat st;
  if (::fstat(fd_, &st) != 0) return;
  const uint64_t size = static_cast<uint64_t>(st.st_size) & ~uint64_t{4095};
  const uint64_t blocks = static_cast<uint64_t>(st.st_blocks) * 512;
  if (blocks >= size) return;
  violations_.push_back("write of " + std::to_string(n) + " bytes at offset " +
                        std::to_string(off) + " into a file with " + std::to_string(size - blocks) +
                        " bytes of unreserved space (SIGBUS on a full disk)");
}

void SimPersist::record_writes(uint64_t off, size_t n) {
  for (uint64_t u = off / unit_; u <= (off + n - 1) / unit_; u++) {
    std::vector<std::byte> v = live_unit(u);
    auto it = volatile_.find(u);
    if (it == volatile_.end()) {
      if (v == durable_unit(u)) continue;
      it = volatile_.emplace(u, Unit{}).first;
    }
    Unit& unit = it->second;
    if (!unit.versions.empty() && unit.versions.back() == v) continue;
    if (unit.versions.size() >= kMaxVersions) {
      // Drop a middle version, never a flushed one's index shift past it.
      const size_t drop = std::max<size_t>(unit.flushed, 1);
      if (drop < unit.versions.size() - 1) {
        unit.versions.erase(unit.versions.begin() + static_cast<long>(drop));
      }
    }
    unit.versions.push_back(std::move(v));
  }
}

void SimPersist::write(uint64_t off, const void* src, size_t n) {
  if (n == 0) return;
  check_reserved(off, n);
  real_->write(off, src, n);
  record_writes(off, n);
}

void SimPersist::mark_flushed(uint64_t off, size_t n) {
  auto it = volatile_.lower_bound(off / unit_);
  for (; it != volatile_.end() && it->first <= (off + n - 1) / unit_; ++it) {
    it->second.flushed = it->second.versions.size();
  }
}

void SimPersist::flush(uint64_t off, size_t n) {
  real_->flush(off, n);
  if (n == 0) return;
  mark_flushed(off, n);
  call_hook("flush");
}

void SimPersist::make_durable(uint64_t from_unit, uint64_t to_unit) {
  for (auto it = volatile_.lower_bound(from_unit); it != volatile_.end() && it->first < to_unit;) {
    Unit& unit = it->second;
    const uint64_t from = it->first * unit_;
    if (unit.flushed > 0 && from < durable_.size()) {
      const size_t n = std::min<uint64_t>(unit_, durable_.size() - from);
      std::memcpy(durable_.data() + from, unit.versions[unit.flushed - 1].data(), n);
      unit.versions.erase(unit.versions.begin(),
                          unit.versions.begin() + static_cast<long>(unit.flushed));
      unit.flushed = 0;
    }
    // Versions written after the flush stay possible, unless they match.
    if (unit.flushed == 0) std::erase(unit.versions, durable_unit(it->first));
    it = unit.versions.empty() ? volatile_.erase(it) : std::next(it);
  }
}

bool SimPersist::sync_fails() {
  syncs_++;
  if (fail_at_ == 0 || syncs_ != fail_at_) return false;
  fault_fired_ = true;
  return true;
}

void SimPersist::forget_flushes(uint64_t from_unit, uint64_t to_unit) {
  for (auto it = volatile_.lower_bound(from_unit); it != volatile_.end() && it->first < to_unit;
       ++it) {
    it->second.flushed = 0;
  }
}

Status SimPersist::drain() {
  // A crash before the drain completes: everything is still possible.
  call_hook("drain");
  if (sync_fails()) {
    forget_flushes(0, UINT64_MAX);
    return Status::io_error("msync: Input/output error (injected)");
  }
  PM_TRY(real_->drain());
  make_durable(0, UINT64_MAX);
  return Status();
}

Status SimPersist::persist_range(uint64_t off, size_t n) {
  if (n == 0) return Status();
  real_->flush(off, n);  // the real persist_range below flushes as well
  mark_flushed(off, n);
  call_hook("persist");
  if (sync_fails()) {
    forget_flushes(off / unit_, (off + n - 1) / unit_ + 1);
    return Status::io_error("msync: Input/output error (injected)");
  }
  PM_TRY(real_->persist_range(off, n));
  make_durable(off / unit_, (off + n - 1) / unit_ + 1);
  return Status();
}

namespace {
std::atomic<uint64_t> g_file_limit{0};
}  // namespace

void SimPersist::set_file_limit(uint64_t bytes) { g_file_limit.store(bytes); }

Status SimPersist::resize(uint64_t keep, uint64_t new_size) {
  call_hook("resize");
  if (sync_fails()) return Status::no_space("resize: No space left on device (injected)");
  if (const uint64_t limit = g_file_limit.load(); limit != 0 && new_size > limit) {
    return Status::no_space("resize to " + std::to_string(new_size) +
                            " bytes: No space left on device (full disk, simulated)");
  }
  PM_TRY(real_->resize(keep, new_size));
  // The new size is durable on return (the real backend fsyncs).
  durable_.resize(std::min<uint64_t>(keep, durable_.size()));
  durable_.resize(new_size);
  volatile_.erase(volatile_.lower_bound(keep / unit_ + (keep % unit_ ? 1 : 0)), volatile_.end());
  return Status();
}

uint64_t SimPersist::free_bytes() const {
  const uint64_t limit = g_file_limit.load();
  if (limit == 0) return real_->free_bytes();
  return limit - std::min(limit, size());
}

void SimPersist::kill_point(std::string_view name) { call_hook(std::string(name).c_str()); }

std::vector<uint64_t> SimPersist::volatile_units() const {
  std::vector<uint64_t> v;
  for (const auto& [u, unit] : volatile_) v.push_back(u);
  return v;
}

std::vector<size_t> SimPersist::candidate_counts() const {
  std::vector<size_t> counts;
  counts.reserve(volatile_.size());
  for (const auto& [u, unit] : volatile_) counts.push_back(1 + unit.versions.size());
  return counts;
}

std::vector<std::byte> SimPersist::image(const std::vector<size_t>& choice,
                                         std::mt19937_64* rng) const {
  std::vector<std::byte> img = durable_;
  apply_choice(choice, rng, img.data());
  return img;
}

void SimPersist::write_image(const std::vector<size_t>& choice, std::mt19937_64* rng,
                             std::byte* dst) const {
  for (size_t off = 0; off < durable_.size(); off += 4096) {
    const size_t n = std::min<size_t>(4096, durable_.size() - off);
    if (std::memcmp(dst + off, durable_.data() + off, n) != 0)
      std::memcpy(dst + off, durable_.data() + off, n);
  }
  apply_choice(choice, rng, dst);
}

// `img` holds the durable image; each chosen version replaces its unit.
void SimPersist::apply_choice(const std::vector<size_t>& choice, std::mt19937_64* rng,
                              std::byte* img) const {
  size_t i = 0;
  for (const auto& [u, unit] : volatile_) {
    const size_t c = choice[i++];
    const uint64_t from = u * unit_;
    if (c == 0 || from >= durable_.size()) continue;  // durable
    const size_t n = std::min<uint64_t>(unit_, durable_.size() - from);
    std::vector<std::byte> v = c <= unit.versions.size() ? unit.versions[c - 1] : live_unit(u);
    if (c > unit.versions.size()) {
      // Torn page (msync path): each 512-byte sector old or new.
      for (size_t sec = 0; sec < n; sec += 512) {
        if ((*rng)() & 1)
          std::memcpy(v.data() + sec, durable_.data() + from + sec, std::min<size_t>(512, n - sec));
      }
    }
    std::memcpy(img + from, v.data(), n);
  }
}

}  // namespace pm::crash
