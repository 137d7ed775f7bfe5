// RawRegionImpl: a container's raw region over its Persist (the home view).
#ifndef LIBPM_RAW_REGION_H_
#define LIBPM_RAW_REGION_H_

#include <memory>
#include <string>

#include "libpm/file_lock.h"
#include "libpm/persist.h"
#include "libpm/view_lock.h"
#include "pm/raw_region.h"

namespace pm {

class RawRegionImpl final : public RawRegion {
 public:
  // [file_off, file_off + size) of the file behind *persist, which growth
  // may replace and remap: every access holds `view` shared, growth holds it
  // exclusively. Both must outlive the region.
  RawRegionImpl(std::unique_ptr<Persist>* persist, ViewLock* view, uint64_t file_off,
                uint64_t size, std::string path, bool read_only)
      : persist_(persist), view_(view), file_off_(file_off), size_(size), path_(std::move(path)),
        read_only_(read_only) {}

  uint64_t size() const override { return size_; }
  Status write(uint64_t off, const void* src, size_t n) override;
  Status persist(uint64_t off, size_t n) override;
  Status read(uint64_t off, void* dst, size_t n) const override;

 private:
  Status check_range(uint64_t off, size_t n) const;

  std::unique_ptr<Persist>* persist_;
  ViewLock* view_;
  uint64_t file_off_;
  uint64_t size_;
  std::string path_;
  bool read_only_;  // a private view: writes would be lost, so they are refused
  const uint64_t forks_at_open_ = FileLock::forks();  // writes refused in a fork()ed child
};

}  // namespace pm

#endif  // LIBPM_RAW_REGION_H_
