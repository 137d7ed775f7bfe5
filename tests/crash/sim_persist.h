// SimPersist: a Persist that forwards to the real file (so the program under
// test runs normally) and models exactly what a power failure could leave
// behind.
//
// The model. Per unit (a 64-byte line on the pmem path, a 4 KiB page on the
// msync path) it keeps the durable bytes and every version the unit held
// since: a version after each write, because caches and the page cache may
// write a unit back at any moment, in any order with other units. flush()
// marks the unit's newest version as flushed; drain() makes each flushed
// version durable (a later write stays volatile); persist_range() makes
// only its own range durable, never anything else. At a crash each volatile
// unit independently holds its durable bytes or any of its versions; on the
// msync path a page may also tear at 512-byte sectors. Aligned 8-byte words
// never tear: units are whole.
//
// Sessions. A SimPersist may start from a durable image that differs from
// the file (the file is what a killed process left in the page cache, the
// image what had reached the disk): every unit that differs is volatile, so
// a power failure after a kill loses what was never written back.
//
// Faults. set_file_limit() makes growth past a size fail (a full disk).
// fail_at(n) makes the n-th sync (drain, persist_range or resize)
// fail: EIO for a sync, ENOSPC for a resize. A failed sync makes nothing
// durable, and the units stay volatile until they are written and synced
// again (Linux may drop dirty pages after a write-back error).
//
// File space. A write while the file has unreserved space (a hole, never
// fallocated) is recorded as a violation: on a full disk a store into a
// hole of a shared mapping raises SIGBUS.
//
// At every persistence point (flush, drain, persist, resize, kill point) it
// calls the hook, which may ask for crash images.
//
// Thread safety: none; a scheduled run (scheduler.h) calls it from one
// thread at a time.
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

  // `path` (may be empty) is the real file, for the file-space check;
  // `durable` (may be null) what had reached the disk when it was opened.
  SimPersist(std::unique_ptr<Persist> real, UnitMode mode, Hook hook, const std::string& path,
             const std::vector<std::byte>* durable);
  ~SimPersist() override;

  bool is_pmem() const override { return mode_ == UnitMode::kPmemLines; }
  const std::byte* view() const override { return real_->view(); }
  uint64_t size() const override { return real_->size(); }
  void write(uint64_t off, const void* src, size_t n) override;
  void flush(uint64_t off, size_t n) override;
  Status drain() override;
  Status persist_range(uint64_t off, size_t n) override;
  Status resize(uint64_t keep, uint64_t new_size) override;
  // Under a file limit, the room left below it.
  uint64_t free_bytes() const override;
  void kill_point(std::string_view name) override;
  void set_path(const std::string& path) override { real_->set_path(path); }

  // Per volatile unit (in unit order), how many states it may hold after a
  // crash: 0 durable, 1..k its versions (k is the live one).
  std::vector<size_t> candidate_counts() const;
  // The crash image for `choice` (one index per volatile unit; the value k+1
  // means "torn": the live page with sectors reverted at random by `rng`).
  std::vector<std::byte> image(const std::vector<size_t>& choice, std::mt19937_64* rng) const;
  // The same image written over `dst` (durable_image().size() bytes), which
  // holds a recent image: only the pages that differ are copied. No buffer
  // of the file's size is allocated, filled and compared per image.
  void write_image(const std::vector<size_t>& choice, std::mt19937_64* rng, std::byte* dst) const;
  // What a power failure right now would keep for sure.
  const std::vector<std::byte>& durable_image() const { return durable_; }

  // Fails the n-th sync from now on (1 = the next one); 0 never.
  void fail_at(uint64_t n) { fail_at_ = n == 0 ? 0 : syncs_ + n; }
  // The file system's free space, shared by every SimPersist of this
  // process: a resize to more than `bytes` fails with ENOSPC, as on a full
  // disk (0: no limit). Not a sync: it moves no fault index.
  static void set_file_limit(uint64_t bytes);
  // Syncs so far (drains, persist_ranges, resizes), failed ones included.
  uint64_t syncs() const { return syncs_; }
  bool fault_fired() const { return fault_fired_; }
  // Writes into unreserved file space, one line each.
  const std::vector<std::string>& violations() const { return violations_; }

  uint64_t unit_size() const { return unit_; }
  // Indexes of the volatile units (for replays: which parts of the file).
  std::vector<uint64_t> volatile_units() const;

  // Called when the owner (the container) lets go of this SimPersist.
  void on_close(std::function<void(const SimPersist&)> fn) { on_close_ = std::move(fn); }

 private:
  struct Unit {
    std::vector<std::vector<std::byte>> versions;  // oldest first; back() is live
    size_t flushed = 0;  // versions[flushed - 1] is the newest flushed one
  };
  void record_writes(uint64_t off, size_t n);
  void mark_flushed(uint64_t off, size_t n);
  // Makes the flushed versions durable: every unit, or those in [from, to).
  void make_durable(uint64_t from_unit, uint64_t to_unit);
  // True when this sync is the one to fail (and counts it).
  bool sync_fails();
  // A failed sync: Linux marks the pages clean, so no later sync writes
  // them; they stay volatile until written and flushed again.
  void forget_flushes(uint64_t from_unit, uint64_t to_unit);
  void check_reserved(uint64_t off, size_t n);
  void call_hook(const char* point);
  std::vector<std::byte> live_unit(uint64_t u) const;
  void apply_choice(const std::vector<size_t>& choice, std::mt19937_64* rng, std::byte* img) const;
  std::vector<std::byte> durable_unit(uint64_t u) const;

  std::unique_ptr<Persist> real_;
  UnitMode mode_;
  uint64_t unit_;
  Hook hook_;
  int fd_ = -1;  // the real file, read-only: holes
  std::vector<std::byte> durable_;
  std::map<uint64_t, Unit> volatile_;  // unit index -> versions
  uint64_t syncs_ = 0, fail_at_ = 0;
  bool fault_fired_ = false;
  bool in_hook_ = false;
  std::vector<std::string> violations_;
  std::function<void(const SimPersist&)> on_close_;
};

}  // namespace pm::crash

#endif  // TESTS_CRASH_SIM_PERSIST_H_
