// SimPersist: a Persist that forwards to the real file (so the program under
// test runs normally) and models what a power failure could leave behind.
//
// Per unit (a 64-byte line on the pmem path, a 4 KiB page on the msync path)
// it keeps the durable bytes and, for units written since the last drain,
// every version that was flushed since. At a crash a unit holds its durable
// bytes, any of those flushed versions, or its live bytes (caches and the
// page cache may write back early); on the msync path a page may also tear
// at 512-byte sectors. Aligned 8-byte words never tear: units are whole.
//
// At every persistence point (flush, drain, resize, kill point) it calls the
// hook, which may ask for crash images.
#ifndef TESTS_CRASH_SIM_PERSIST_H_
#define TESTS_CRASH_SIM_PERSIST_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "libpm/persist.h"

namespace pm::crash {

enum class UnitMode { kPmemLines, kMsyncPages };

class SimPersist final : public Persist {
 public:
  using Hook = std::function<void(SimPersist&, const std::string& point)>;

  SimPersist(std::unique_ptr<Persist> real, UnitMode mode, Hook hook);

  bool is_pmem() const override { return mode_ == UnitMode::kPmemLines; }
  const std::byte* view() const override { return real_->view(); }
  uint64_t size() const override { return real_->size(); }
  void write(uint64_t off, const void* src, size_t n) override;
  void flush(uint64_t off, size_t n) override;
  Status drain() override;
  Status resize(uint64_t keep, uint64_t new_size) override;
  void kill_point(std::string_view name) override;

  // Units that could differ from the durable image after a crash now.
  size_t volatile_units() const { return pending_.size(); }

  // Per volatile unit (in unit order), how many versions it may hold after
  // a crash: 0 durable, 1..k the flushed versions, k+1 live.
  std::vector<size_t> candidate_counts() const;
  // The crash image for `choice` (one index per volatile unit; the value k+2
  // means "torn": the live page with sectors reverted at random by `rng`).
  std::vector<std::byte> image(const std::vector<size_t>& choice, std::mt19937_64* rng) const;

  uint64_t unit_size() const { return unit_; }

 private:
  struct Pending {
    std::vector<std::vector<std::byte>> flushed;  // versions flushed since the last drain
  };
  void touch(uint64_t off, size_t n, bool snapshot);
  std::vector<std::byte> live_unit(uint64_t u) const;
  std::vector<std::byte> durable_unit(uint64_t u) const;

  std::unique_ptr<Persist> real_;
  UnitMode mode_;
  uint64_t unit_;
  Hook hook_;
  std::vector<std::byte> durable_;
  std::map<uint64_t, Pending> pending_;  // unit index -> versions
  bool in_hook_ = false;
};

}  // namespace pm::crash

#endif  // TESTS_CRASH_SIM_PERSIST_H_
