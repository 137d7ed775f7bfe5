#include "libpm/raw_region.h"

#include <cstring>
#include <string>

namespace pm {

Status RawRegionImpl::check_range(uint64_t off, size_t n) const {
  if (off <= size_ && n <= size_ - off) return Status();
  return Status::invalid_argument("raw range [" + std::to_string(off) + ", +" + std::to_string(n) +
                                  ") outside the " + std::to_string(size_) + "-byte raw region");
}

Status RawRegionImpl::write(uint64_t off, const void* src, size_t n) {
  PM_TRY(check_range(off, n));
  if (read_only_) return Status::read_only("raw write: " + path_ + " is open read-only");
  PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
  ViewLock::Shared v(*view_);
  (*persist_)->write(file_off_ + off, src, n);
  return Status();
}

Status RawRegionImpl::persist(uint64_t off, size_t n) {
  PM_TRY(check_range(off, n));
  PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
  ViewLock::Shared v(*view_);
  return (*persist_)->persist_range(file_off_ + off, n);
}

Status RawRegionImpl::read(uint64_t off, void* dst, size_t n) const {
  PM_TRY(check_range(off, n));
  ViewLock::Shared v(*view_);
  std::memcpy(dst, (*persist_)->view() + file_off_ + off, n);
  return Status();
}

}  // namespace pm
