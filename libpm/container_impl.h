// The container's implementation, one class shared by its files:
// container_open.cc (create, open, recovery), container_commit.cc (commit,
// abort) and container.cc (allocation, growth, reports). open_container is
// also the entry point for code that substitutes the persistence backend
// (the crash harness).
#ifndef LIBPM_CONTAINER_IMPL_H_
#define LIBPM_CONTAINER_IMPL_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libpm/address_space.h"
#include "libpm/commit_gate.h"
#include "libpm/file_lock.h"
#include "libpm/heap.h"
#include "libpm/journal.h"
#include "libpm/persist.h"
#include "libpm/planted_bugs.h"
#include "libpm/raw_region.h"
#include "libpm/superblock.h"
#include "libpm/tracker.h"
#include "libpm/view_lock.h"
#include "pm/container.h"

namespace pm {

// Container::create (create = true) or Container::open, with `opener`
// providing the home view instead of open_pmem_file.
Result<std::unique_ptr<Container>> open_container(const std::string& path, const Options& options,
                                                  bool create, const PersistOpener& opener);

// The Container behind Container::create and Container::open. Lock order:
// the commit gate (mutations against commit and abort), the heap's mutex,
// persist_mu_ (the file: commits, growth, reports), view_mu_ (raw-region
// writers against growth's remapping).
class ContainerImpl final : public Container {
 public:
  ContainerImpl(std::string path, Options options)
      : path_(std::move(path)), options_(std::move(options)) {}
  ~ContainerImpl() override;

  Status init_new(const PersistOpener& opener);
  Status init_existing(const PersistOpener& opener);
  uint64_t bytes_in_use(int fd) const;
  Status check_same_file(const std::string& path) const;
  Status read_superblock(uint64_t file_size);
  Status repair_superblock();

  Status commit() override;
  Status abort() override;
  using Container::alloc;
  Result<void*> alloc(size_t n, AllocKind kind) override;
  Status free(void* p) override;
  Status shrink(void* p, size_t n) override;
  Result<BlockInfo> find_block(const void* p) const override;
  void* root(std::string_view name) const override { return heap_->root(name); }
  Status set_root(void* p, std::string_view name) override;
  Status reserve(uint64_t heap_bytes) override;
  void will_write(const void* p, size_t n) override;
  Status release_clean() override;
  Status read_committed(const void* p, void* buf, size_t n) const override;
  bool contains(const void* p) const override;
  void* base() const override { return reservation_.base(); }
  uint64_t generation() const override { return generation_; }
  ContainerInfo info() const override;
  ContainerInfo usage() const override;
  uint64_t private_bytes() const override {
    return private_pages_.load(std::memory_order_relaxed) * kPage;
  }
  HeapCounters heap_counters() const override { return heap_->counters(); }
  TrackerKind tracker_kind() const override { return tracker_->kind(); }
  bool read_only() const override { return options_.read_only; }
  bool commit_fits() override;
  CheckReport check(bool foreign_writer) override;
  Result<CollectReport> collect(bool dry_run) override;
  void begin_mutation() override { gate_.enter(); }
  // The file a failed create must remove ("" if none).
  const std::string& created_file() const { return created_file_; }
  void end_mutation() override { (void)gate_.leave(); }
  bool in_mutation() const override { return gate_.held_by_this_thread(); }
  RawRegion& raw() override { return *raw_; }

 private:
  static constexpr uint64_t kPage = 4096;
  static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

  void log(LogLevel level, const std::string& msg) const {
    if (options_.logger) options_.logger(level, msg);
  }
  Status recover();
  Status map_and_attach();
  // Lists this container for Container::owner_of() (the destructor unlists it).
  void add_to_open_list();
  void replay_into_working_view();
  // OK, or why the container takes no changes: opened read-only, or a
  // write-back failure broke it (see commit()).
  Status usable() const {
    if (options_.read_only) {
      return Status::read_only(path_ + ": opened read-only; open it writable to change it");
    }
    PM_TRY(FileLock::check_not_forked(forks_at_open_, path_));
    if (!broken_.load(std::memory_order_acquire)) return Status();
    std::lock_guard<std::mutex> l(persist_mu_);
    return failed_;
  }
  Status grow_to(uint64_t new_heap_size);
  Status commit_locked();
  // Rewrites the pending header of the last (fully applied) commit as
  // applied, and the other slot's if it is still pending (journal.h). Both,
  // always: a commit that fails after this (no room on a full disk) leaves
  // journal_pending_ false, so the close marks nothing, and a pending older
  // slot would be replayed over newer data if the newest header were ever
  // damaged.
  Status mark_applied(bool closing = false) {
    PM_TRY(drain_deferred());
    const bool planted = closing ? g_planted_bugs.close_marks_newest_only
                                 : g_planted_bugs.finish_marks_newest_only;
    PM_TRY(mark_journal_slots_applied(*persist_, seq_.load(), slots(), !planted));
    journal_pending_ = false;
    journal_state_ = JournalState::kApplied;
    return Status();
  }
  // Journal header slots (journal.h): two from format version 4.
  int slots() const { return sb_.version >= 4 ? 2 : 1; }
  // Makes a deferred write-back (journal.h) durable; a failure breaks the
  // container, since that commit is then durable only in its journal.
  Status drain_deferred();
  // Where the journal of `runs` goes: past everything mapped, and off the
  // body of a deferred write-back (journal.h, rule 2).
  uint64_t place_body(uint64_t len) const;
  // grow_for_journal, under view_mu_: growing the file remaps the view that
  // raw-region writers use.
  Status grow_journal_room(uint64_t body_at, const std::vector<Run>& runs) {
    std::lock_guard<ViewLock> v(view_mu_);
    return grow_for_journal(*persist_, body_at, runs);
  }
  // At close: the fresh bytes of a failed commit (fresh_retry_) written and
  // drained again, best effort. Home holds them, not necessarily the disk;
  // the next session's commits diff against home, and one that writes the
  // same bytes there again (a store replaying its logs) would not.
  void rewrite_fresh_retry();
  // Breaks the container (see commit() in the public header): `s` is its error.
  Status break_with(Status s) {
    failed_ = std::move(s);
    broken_.store(true, std::memory_order_release);
    return failed_;
  }
  void remember_committed(const std::vector<PageRun>& pages);
  // Moves from `runs` to `fresh` what goes home before the commit point
  // instead of through the journal (journal.h, "Fresh bytes").
  void take_fresh(std::vector<Run>* runs, std::vector<Run>* fresh);
  void find_escapes(bool foreign_writer, CheckReport* r) const;
  // Pages among `pages` whose working copy differs from home. REQUIRES: persist_mu_.
  uint64_t count_changed(const std::vector<PageRun>& pages) const;

  std::string path_;
  Options options_;
  FileLock lock_;
  std::unique_ptr<Persist> persist_;
  Superblock sb_{};
  std::string superblock_problem_;  // read from the copy: why (for check())
  std::string copy_problem_;        // the copy damaged, the superblock sound (for check())
  AddressReservation reservation_;
  std::unique_ptr<DirtyTracker> tracker_;
  std::unique_ptr<Heap> heap_;
  mutable CommitGate gate_;
  // Serialises use of persist_ between commit/abort (gate closed), growth
  // (inside alloc, gate open) and info().
  mutable std::mutex persist_mu_;
  // Raw-region calls hold it shared; growth (which remaps persist_'s view)
  // holds it exclusively.
  ViewLock view_mu_;
  // Under persist_mu_: the smallest heap size growth found no room for
  // since the last commit (0: none), the file system's free bytes just
  // before that attempt, and why. Growth to it or beyond fails at once
  // until a commit is made or the file system has more free bytes: on a full
  // disk every allocation tries to grow, and a failing fallocate of
  // megabytes costs a millisecond or more (a put once waited 11 s).
  // The file system refused the file room (a growth or a commit's journal
  // failed with kNoSpace) and no growth has succeeded since: commit_fits()
  // then measures.
  std::atomic<bool> short_of_room_{false};
  // The file system's free bytes when last sampled below kLowSpace (else
  // UINT64_MAX): then commit_fits() measures too, against the file's room
  // and that free space. Without it, the first epoch on a nearly full disk
  // grew unchecked until its commit failed, and kept what it held, too much
  // for any later commit (a user trial: puts through the C API failed by
  // the thousand, each commit needing 4 MiB with 1 MiB left). Sampled at
  // open and after a growth, and after a commit and by commit_fits() itself
  // at most every kSpaceSampleEvery: an idle store whose disk another file
  // took meanwhile must see it before its next epoch grows (an epoch that
  // outgrew the room cannot shrink; it commits once the disk has room).
  static constexpr uint64_t kLowSpace = 64 << 20;
  static constexpr std::chrono::milliseconds kSpaceSampleEvery{10};
  std::atomic<uint64_t> low_space_free_{UINT64_MAX};
  std::atomic<int64_t> space_sampled_{0};  // steady_clock ticks
  void sample_space(bool now);
  uint64_t no_room_from_ = 0;
  uint64_t no_room_free_ = 0;
  Status no_room_;
  uint64_t heap_off_ = kHeapOffset;  // file offset of the heap (after the raw region)
  std::atomic<uint64_t> mapped_{0};  // heap bytes mapped in the working view
  // Written under persist_mu_; atomic so that usage() reads them without it.
  std::atomic<uint64_t> seq_{0};  // last commit's journal sequence number
  bool journal_pending_ = false;     // header says pending (not yet marked applied)
  std::atomic<JournalState> journal_state_{JournalState::kEmpty};
  // A read-only open of a pending journal: the commits applied in this
  // process's copies only (recover(), map_and_attach()).
  std::vector<JournalHeader> read_only_replay_;
  const uint64_t forks_at_open_ = FileLock::forks();  // a fork()ed child changes nothing
  bool is_pmem_ = false;
  Status failed_;                    // write-back failed after a commit point (persist_mu_)
  std::atomic<bool> broken_{false};  // failed_ is set
  std::unique_ptr<RawRegionImpl> raw_;
  uint64_t generation_ = 0;
  std::string created_file_;                // init_new made this file (removed on failure)
  std::vector<PageRun> committed_private_;  // committed pages still private (DRAM)
  std::atomic<uint64_t> private_pages_{0};  // their count (overlaps counted twice until merged)
  std::vector<PageRun> dirty_scratch_;
  std::vector<PageRun> lines_scratch_;  // line numbers (hints tracker)
  std::vector<Run> runs_scratch_;
  std::vector<Run> fresh_scratch_;
  std::vector<Run> fresh_kept_scratch_, fresh_still_scratch_;  // take_fresh's
  // Under persist_mu_: the last commit's journal entries (by offset), which
  // a recovery may replay while its header is pending; fresh bytes of a
  // failed commit, already home, which the next commit's diff cannot see.
  std::vector<Run> last_runs_;
  std::vector<Run> fresh_retry_;
  // Bytes written through journals, and fresh bytes written home directly,
  // since open (ContainerInfo).
  std::atomic<uint64_t> journaled_bytes_{0};
  std::atomic<uint64_t> fresh_bytes_{0};
  std::vector<std::byte> journal_stage_;  // write_journal's staging buffer
  // Under persist_mu_: the last commit's write-back waits for the next
  // commit's drain (journal.h); where that commit's journal body lies.
  bool deferred_ = false;
  uint64_t deferred_body_off_ = 0;
  uint64_t deferred_body_len_ = 0;
};

}  // namespace pm

#endif  // LIBPM_CONTAINER_IMPL_H_
